package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
)

// followWait is the long-poll's wait at the active's API; followPause the pause after a
// failed poll, or while there is no one to follow.
const (
	followWait  = 2 * time.Second
	followPause = 100 * time.Millisecond
	maxSummary  = 16 << 20
	// boardEvery is how often the follower reads the active's blackboard (its values),
	// which a summary does not carry.
	boardEvery = 500 * time.Millisecond
)

// Follower keeps a standby's view of the active daemon: it long-polls the active's
// GET /ticks/latest and hands every newer summary to its sink (the standby's history, so
// that its read API serves the active's state).
type Follower struct {
	node    *Node
	client  *http.Client
	sink    func(*faultsummary.Summary)
	latest  atomic.Pointer[faultsummary.Summary]
	board   atomic.Pointer[[]blackboard.Entry]
	open    atomic.Pointer[map[string]time.Time]
	last    uint64    // the highest id followed; Run's goroutine only
	boarded time.Time // when the board was last read; Run's goroutine only
}

// NewFollower returns a follower of n's active daemon that hands summaries to sink.
func NewFollower(n *Node, sink func(*faultsummary.Summary)) *Follower {
	return &Follower{node: n, sink: sink, client: &http.Client{Timeout: followWait + 5*time.Second}}
}

// Latest returns the newest summary followed (nil before any).
func (f *Follower) Latest() *faultsummary.Summary { return f.latest.Load() }

// Board returns the active's blackboard as last read (nil before any): the values its
// modules last wrote, with their write times, for a takeover.
func (f *Follower) Board() []blackboard.Entry {
	if b := f.board.Load(); b != nil {
		return *b
	}
	return nil
}

// OpenBreakers returns the active's open (or half-open) breakers as last read, by name,
// with when they opened (nil before any read).
func (f *Follower) OpenBreakers() map[string]time.Time {
	if m := f.open.Load(); m != nil {
		return *m
	}
	return nil
}

// Seen records a summary of this daemon's own: a later follow continues after it.
func (f *Follower) Seen(s *faultsummary.Summary) { f.latest.Store(s) }

// Run follows until ctx ends; while this node is active it only waits.
func (f *Follower) Run(ctx context.Context) {
	for ctx.Err() == nil {
		st := f.node.Status()
		if st.Role == RoleActive || st.Active == nil || st.Active.Node == st.Node || st.Active.URL == "" {
			if l := f.latest.Load(); l != nil {
				f.last = max(f.last, l.TickID)
			}
			pause(ctx, followPause)
			continue
		}
		if err := f.poll(ctx, st.Active.URL); err != nil {
			pause(ctx, followPause)
			continue
		}
		if time.Since(f.boarded) >= boardEvery {
			f.boarded = time.Now()
			f.readBoard(ctx, st.Active.URL)
			f.readBreakers(ctx, st.Active.URL)
		}
	}
}

// poll long-polls base for a tick newer than the last one followed.
func (f *Follower) poll(ctx context.Context, base string) error {
	u := base + "/ticks/latest?wait=" + followWait.String() + "&after=" + strconv.FormatUint(f.last, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("follow %s: %s", base, resp.Status)
	}
	var s faultsummary.Summary
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSummary)).Decode(&s); err != nil {
		return fmt.Errorf("follow %s: %w", base, err)
	}
	if s.TickID <= f.last {
		return nil
	}
	f.last = s.TickID
	f.latest.Store(&s)
	if f.sink != nil {
		f.sink(&s)
	}
	return nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// getJSON reads url into v and reports whether it answered 200 with JSON that fits v.
func (f *Follower) getJSON(ctx context.Context, url string, v any) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, maxSummary)).Decode(v) == nil
}

// readBoard reads the active's blackboard; a failure keeps the last one read.
func (f *Follower) readBoard(ctx context.Context, base string) {
	var v struct {
		Entries []blackboard.Entry `json:"entries"`
	}
	if f.getJSON(ctx, base+"/blackboard", &v) {
		f.board.Store(&v.Entries)
	}
}

// readBreakers reads the active's breakers and keeps the open ones; a failure keeps the
// last ones read.
func (f *Follower) readBreakers(ctx context.Context, base string) {
	var v struct {
		Breakers []struct {
			Name     string     `json:"name"`
			State    string     `json:"state"`
			OpenedAt *time.Time `json:"opened_at"`
		} `json:"breakers"`
	}
	if !f.getJSON(ctx, base+"/breakers", &v) {
		return
	}
	open := map[string]time.Time{}
	for _, b := range v.Breakers {
		if b.State != "closed" && b.OpenedAt != nil {
			open[b.Name] = *b.OpenedAt
		}
	}
	f.open.Store(&open)
}
