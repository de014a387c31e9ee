package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
)

// The feed gives the invariant checker every summary, in order, exactly once.
//
// Its source is an SSE stream (GET /ticks/stream). The daemon drops events for a
// subscriber that falls behind and a stream may break; every gap in the tick ids is filled
// from GET /ticks?limit=N&before=ID (the history keeps several seconds of ticks), and a
// broken stream is resumed with Last-Event-ID. A tick that is no longer in the history
// when it is needed is counted as missed, and the soak fails.

// book knows every configuration the daemon may run: the valid variants and the modules
// registered at runtime, so that the checker can be given the configuration in force for
// each summary.
type book struct {
	mu       sync.Mutex
	variants map[string]engineCfg // by marker module
	runtime  map[string][]byte    // runtime module name → POST /modules body
}

type engineCfg struct {
	cfg  cycle.Config
	regs []cycle.Registration
}

func newBook(yamls map[string]string) (*book, error) {
	b := &book{variants: map[string]engineCfg{}, runtime: map[string][]byte{}}
	for marker, y := range yamls {
		c, err := config.Load(config.WithData([]byte(y), marker+".yaml"), config.WithoutEnv())
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", marker, err)
		}
		ec, regs, ps := c.Engine()
		if err := ps.Err(); err != nil {
			return nil, fmt.Errorf("variant %s: %w", marker, err)
		}
		b.variants[marker] = engineCfg{cfg: ec, regs: regs}
	}
	return b, nil
}

// addRuntime records the body of a runtime registration before it is sent.
func (b *book) addRuntime(name string, body []byte) {
	b.mu.Lock()
	b.runtime[name] = body
	b.mu.Unlock()
}

// runtimeNames returns the names of the modules ever registered at runtime.
func (b *book) runtimeNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.runtime))
}

// configFor returns the checker configuration of the engine that produced s: the variant
// whose marker module s has, plus the runtime modules it has.
func (b *book) configFor(s *faultsummary.Summary) (check.Config, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var marker string
	for _, m := range s.Modules() {
		if _, ok := b.variants[m.Name]; ok {
			if marker != "" {
				return check.Config{}, "", fmt.Errorf("tick %d has two variant markers (%s, %s)", s.TickID, marker, m.Name)
			}
			marker = m.Name
		}
	}
	v, ok := b.variants[marker]
	if !ok {
		return check.Config{}, "", fmt.Errorf("tick %d runs no known configuration (no variant marker)", s.TickID)
	}
	regs := slices.Clone(v.regs)
	known := map[string]bool{}
	for _, r := range regs {
		known[r.Spec.Name] = true
	}
	names := make([]string, 0, s.NumModules()+len(s.Async))
	for _, m := range s.Modules() {
		names = append(names, m.Name)
	}
	for _, a := range s.Async { // asynchronous modules have no line
		names = append(names, a.Name)
	}
	for _, name := range names {
		if known[name] {
			continue
		}
		known[name] = true
		body, ok := b.runtime[name]
		if !ok {
			return check.Config{}, "", fmt.Errorf("tick %d runs module %q, neither configured nor registered by the soak", s.TickID, name)
		}
		reg, err := config.DecodeModule(body)
		if err != nil {
			return check.Config{}, "", fmt.Errorf("runtime module %q: %w", name, err)
		}
		regs = append(regs, reg)
	}
	plan, ps := cycle.Validate(v.cfg, regs)
	if err := ps.Err(); err != nil {
		return check.Config{}, "", fmt.Errorf("tick %d: configuration does not validate: %w", s.TickID, err)
	}
	return cycle.CheckConfig(v.cfg, plan), marker, nil
}

// variantConfig returns the checker configuration of a variant without runtime modules.
func (b *book) variantConfig(marker string) check.Config {
	v := b.variants[marker]
	plan, _ := cycle.Validate(v.cfg, v.regs)
	return cycle.CheckConfig(v.cfg, plan)
}

// opLog orders operator actions (breaker and emergency resets) with the summaries: an
// action is recorded with the range of tick ids [lo, hi] that were the latest while it
// was made, and the checker does not check a tick after lo until the action is recorded.
type opLog struct {
	mu      sync.Mutex
	cond    *sync.Cond
	next    int
	pending map[int]uint64 // action → lo
	done    []op
}

type op struct {
	breaker string // "" for an emergency reset
	lo, hi  uint64
}

func newOpLog() *opLog {
	l := &opLog{pending: map[int]uint64{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// begin announces an action made after tick lo was the latest.
func (l *opLog) begin(lo uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.pending[l.next] = lo
	return l.next
}

// end records the action (ok: it was made; otherwise it is forgotten).
func (l *opLog) end(token int, o op, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, token)
	if ok {
		l.done = append(l.done, o)
	}
	l.cond.Broadcast()
}

// before waits until no pending action may show in tick id, then hands every recorded
// action to the checker.
func (l *opLog) before(id uint64, c *check.Checker) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		blocked := false
		for _, lo := range l.pending {
			if lo < id {
				blocked = true
			}
		}
		if !blocked {
			break
		}
		l.cond.Wait()
	}
	for _, o := range l.done {
		for a := o.lo; a <= o.hi; a++ {
			if o.breaker == "" {
				c.ResetEmergency(a)
			} else {
				c.ResetBreaker(o.breaker, a)
			}
		}
	}
	l.done = l.done[:0]
}

// feed checks every summary.
type feed struct {
	c     *client
	book  *book
	ops   *opLog
	chk   *check.Checker
	stats *tickStats
	// budgets tallies the retry budgets' counts as the summaries show them.
	budgets *budgetTally

	dump string // a directory for the summaries that break an invariant ("": none)
	// recent are the last summaries checked (only with dump): a violation is written with
	// the ticks before it, which windowed rules (retry budgets, breakers) depend on.
	recent []*faultsummary.Summary

	ch    chan *faultsummary.Summary
	next  uint64   // the next tick id to check
	fp    string   // the module names of the configuration in force
	async []string // the asynchronous modules of the configuration in force
	mu    sync.Mutex
	last  uint64 // the last tick id checked (read by others)
	viols []violation

	reconnects, sseTicks, sseSkips int
	filled, missed                 int
	reconfigs                      int
	breakerOpens                   int
	errs                           []string
}

func newFeed(c *client, b *book, ops *opLog, tol time.Duration, initial string) *feed {
	cfg := b.variantConfig(initial)
	f := &feed{c: c, book: b, ops: ops, chk: check.New(cfg, check.WithTolerance(tol)), stats: newTickStats(),
		budgets: newBudgetTally(), ch: make(chan *faultsummary.Summary, 20000), next: 1}
	f.budgets.configure(cfg)
	return f
}

// progress returns the id of the last tick checked and the violations so far.
func (f *feed) progress() (uint64, []violation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, slices.Clone(f.viols)
}

func (f *feed) errorf(format string, args ...any) {
	f.mu.Lock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// stream reads the SSE stream into f.ch until ctx ends, reconnecting as needed.
func (f *feed) stream(ctx context.Context) {
	var lastID string
	for ctx.Err() == nil {
		err := f.readStream(ctx, &lastID)
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		f.reconnects++
		f.mu.Unlock()
		if err != nil && !errors.Is(err, context.Canceled) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// readStream reads one connection to the SSE stream, resuming after lastID, until it
// breaks or ctx ends; every tick event is handed to the checker.
func (f *feed) readStream(ctx context.Context, lastID *string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.c.base+"/ticks/stream", nil)
	if err != nil {
		return err
	}
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := f.c.long.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /ticks/stream: %d", resp.StatusCode)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, id string
	var data []byte
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if err := f.dispatch(ctx, event, id, data, lastID); err != nil {
				return err
			}
			event, id, data = "", "", data[:0]
		case bytes.HasPrefix(line, []byte(": skipped")):
			f.mu.Lock()
			f.sseSkips++
			f.mu.Unlock()
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[7:])
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[4:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[6:]...)
		}
	}
}

// dispatch takes one event of the stream: a tick goes to f.ch (and its id to lastID), an
// opened breaker is counted. It fails only when ctx ends.
func (f *feed) dispatch(ctx context.Context, event, id string, data []byte, lastID *string) error {
	switch {
	case event == "tick" && len(data) > 0:
		s := new(faultsummary.Summary)
		if err := json.Unmarshal(data, s); err != nil {
			f.errorf("stream: undecodable tick event %s: %v", id, err)
			return nil
		}
		*lastID = id
		f.mu.Lock()
		f.sseTicks++
		f.mu.Unlock()
		select {
		case f.ch <- s:
		case <-ctx.Done():
			return ctx.Err()
		}
	case event == "breaker" && bytes.Contains(data, []byte(`"to":"open"`)):
		f.mu.Lock()
		f.breakerOpens++
		f.mu.Unlock()
	}
	return nil
}

// run checks the summaries of f.ch in order until ctx ends.
func (f *feed) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-f.ch:
			f.take(ctx, s)
		}
	}
}

// take checks s after the ticks between the last one checked and s.
func (f *feed) take(ctx context.Context, s *faultsummary.Summary) {
	if s.TickID < f.next {
		return // a replay or a gap already filled
	}
	if s.TickID > f.next {
		f.fill(ctx, f.next, s.TickID-1)
	}
	f.process(s)
}

// drain checks every tick up to the latest, after the clients have stopped.
func (f *feed) drain(ctx context.Context) error {
	latest, err := f.c.latestID(ctx)
	if err != nil {
		return err
	}
	for {
		select {
		case s := <-f.ch:
			f.take(ctx, s)
			continue
		default:
		}
		break
	}
	if latest >= f.next {
		f.fill(ctx, f.next, latest)
	}
	return nil
}

// fill fetches and checks the ticks [a, b] from GET /ticks.
func (f *feed) fill(ctx context.Context, a, b uint64) {
	got := map[uint64]*faultsummary.Summary{}
	before := b + 1
	for before > a {
		limit := min(before-a, 500)
		r, err := f.c.do(ctx, http.MethodGet, "/ticks?limit="+strconv.FormatUint(limit, 10)+"&before="+strconv.FormatUint(before, 10), nil, false)
		if err != nil || r.status != http.StatusOK {
			if ctx.Err() == nil {
				f.errorf("GET /ticks before %d: %v %d", before, err, r.status)
			}
			break
		}
		var page struct {
			Ticks []*faultsummary.Summary `json:"ticks"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			f.errorf("GET /ticks: %v", err)
			break
		}
		if len(page.Ticks) == 0 {
			break
		}
		for _, s := range page.Ticks {
			if s.TickID >= a && s.TickID <= b {
				got[s.TickID] = s
			}
			before = min(before, s.TickID)
		}
	}
	for id := a; id <= b; id++ {
		if s, ok := got[id]; ok {
			f.filled++
			f.process(s)
			continue
		}
		f.mu.Lock()
		f.missed++
		f.mu.Unlock()
	}
}

// process checks one summary.
func (f *feed) process(s *faultsummary.Summary) {
	f.ops.before(s.TickID, f.chk)
	names := make([]string, len(s.Modules()))
	for i, m := range s.Modules() {
		names[i] = m.Name
	}
	if fp := strings.Join(names, ","); fp != f.fp || f.newAsync(s) {
		cfg, _, err := f.book.configFor(s)
		if err != nil {
			f.errorf("%v", err)
		} else {
			if f.fp != "" {
				f.reconfigs++
			}
			f.chk.Reconfigure(cfg)
			f.budgets.configure(cfg)
			f.fp = fp
			f.async = cfg.Async
		}
	}
	vs := f.chk.Check(s)
	if f.dump != "" {
		f.keepRecent(s, len(vs) > 0)
	}
	f.stats.add(s)
	f.budgets.add(s)
	f.next = s.TickID + 1
	f.mu.Lock()
	f.last = s.TickID
	for _, v := range vs {
		f.viols = append(f.viols, violation{Violation: v, started: s.StartedAt, finished: s.FinishedAt})
	}
	f.mu.Unlock()
}

// recentKept is how many summaries before a violation -keep writes with it: more than a
// retry budget's or a rate breaker's window of the soak's configuration.
const recentKept = 80

// keepRecent remembers s and, if it broke an invariant, writes it and the summaries
// before it to the dump directory (those already written are left as they are).
func (f *feed) keepRecent(s *faultsummary.Summary, violated bool) {
	if len(f.recent) == recentKept {
		f.recent = append(f.recent[:0], f.recent[1:]...)
	}
	f.recent = append(f.recent, s)
	if !violated {
		return
	}
	_ = os.MkdirAll(f.dump, 0o750)
	for _, r := range f.recent {
		name := filepath.Join(f.dump, fmt.Sprintf("tick-%d.json", r.TickID))
		if _, err := os.Stat(name); err == nil {
			continue
		}
		if b, err := json.MarshalIndent(r, "", "  "); err == nil {
			_ = os.WriteFile(name, b, 0o600)
		}
	}
}

// tickStats accumulates what the report says about the ticks.
type tickStats struct {
	ticks, overruns, skippedPoints, emergencyTicks, episodes int
	budgetViolations                                         int
	lags                                                     []float32 // start lag, ms
	statuses                                                 map[string]int
	finishes                                                 map[string]int
	inEmergency                                              bool
	firstID, lastID                                          uint64
	maxWallMs                                                float64
}

func newTickStats() *tickStats {
	return &tickStats{statuses: map[string]int{}, finishes: map[string]int{}}
}

func (t *tickStats) add(s *faultsummary.Summary) {
	if t.ticks == 0 {
		t.firstID = s.TickID
	}
	t.lastID = s.TickID
	t.ticks++
	if s.Overrun {
		t.overruns++
	}
	t.skippedPoints += s.SkippedGridPoints
	t.lags = append(t.lags, float32(s.StartLagMs))
	t.maxWallMs = max(t.maxWallMs, s.WallMs)
	t.finishes[string(s.Finish)]++
	t.budgetViolations += len(s.BudgetViolations)
	if s.EmergencyMode {
		t.emergencyTicks++
		if !t.inEmergency {
			t.episodes++
		}
	}
	t.inEmergency = s.EmergencyMode
	for _, m := range s.Modules() {
		t.statuses[string(m.Status)]++
	}
}

// percentile returns the p-quantile (0..1) of the start lags.
func (t *tickStats) percentile(p float64) float64 {
	if len(t.lags) == 0 {
		return 0
	}
	s := slices.Clone(t.lags)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))])
}

// newAsync reports whether s reports a run of an asynchronous module the checker's
// configuration does not have: asynchronous modules have no line, so the lines'
// fingerprint does not see a registration of one.
func (f *feed) newAsync(s *faultsummary.Summary) bool {
	for _, a := range s.Async {
		if !slices.Contains(f.async, a.Name) {
			return true
		}
	}
	return false
}
