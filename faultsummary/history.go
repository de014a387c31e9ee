package faultsummary

import (
	"context"
	"sync"
	"sync/atomic"
)

// History is the bounded history of recent summaries. Latest is lock-free; Append never
// blocks on readers.
type History struct {
	latest atomic.Pointer[Summary]

	mu      sync.RWMutex
	ring    []*Summary    // guarded by mu
	next    int           // guarded by mu; index of the next write
	count   int           // guarded by mu
	changed chan struct{} // guarded by mu; closed and replaced on every Append
}

// NewHistory returns a history that keeps the last n summaries (n < 1 means 1).
func NewHistory(n int) *History {
	if n < 1 {
		n = 1
	}
	return &History{ring: make([]*Summary, n), changed: make(chan struct{})}
}

// Cap returns how many summaries the history keeps.
func (h *History) Cap() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.ring)
}

// Append stores s as the latest summary and wakes every waiter.
func (h *History) Append(s *Summary) {
	h.mu.Lock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	if h.count < len(h.ring) {
		h.count++
	}
	h.latest.Store(s)
	ch := h.changed
	h.changed = make(chan struct{})
	h.mu.Unlock()
	close(ch)
}

// Latest returns the newest summary, or nil before the first tick. It takes no lock.
func (h *History) Latest() *Summary { return h.latest.Load() }

// Get returns the summary of tick id if it is still in the history. Tick ids must increase
// from one Append to the next; they are usually consecutive, which makes the lookup O(1),
// but gaps are allowed (then the lookup scans the ring).
func (h *History) Get(id uint64) (*Summary, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.count == 0 {
		return nil, false
	}
	n := len(h.ring)
	newest := h.ring[(h.next-1+n)%n]
	oldest := h.ring[(h.next-h.count+n)%n]
	if id > newest.TickID || id < oldest.TickID {
		return nil, false
	}
	// With consecutive ids the position can be computed.
	if back := newest.TickID - id; back < uint64(h.count) {
		if s := h.ring[(h.next-1-int(back)+2*n)%n]; s.TickID == id {
			return s, true
		}
	}
	// Ids with gaps: scan.
	for _, x := range h.ring {
		if x != nil && x.TickID == id {
			return x, true
		}
	}
	return nil, false
}

// List returns up to limit summaries, newest first, with tick ids below before (0: no bound).
func (h *History) List(limit int, before uint64) []*Summary {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if limit <= 0 || limit > h.count {
		limit = h.count
	}
	out := make([]*Summary, 0, limit)
	for i := 0; i < h.count && len(out) < limit; i++ {
		s := h.ring[(h.next-1-i+2*len(h.ring))%len(h.ring)]
		if before != 0 && s.TickID >= before {
			continue
		}
		out = append(out, s)
	}
	return out
}

// Wait returns the summary that follows tick after, waiting until one is appended or ctx
// ends (then it returns ctx's error and the latest summary, possibly nil). The summary
// returned is that of tick after+1 while it is still in the history; a reader that fell
// further behind (after+1 evicted, or not a tick id) skips ahead to the latest.
func (h *History) Wait(ctx context.Context, after uint64) (*Summary, error) {
	for {
		h.mu.RLock()
		ch := h.changed
		h.mu.RUnlock()
		if s := h.latest.Load(); s != nil && s.TickID > after {
			if s.TickID == after+1 {
				return s, nil
			}
			if x, ok := h.Get(after + 1); ok {
				return x, nil
			}
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return h.latest.Load(), ctx.Err()
		}
	}
}
