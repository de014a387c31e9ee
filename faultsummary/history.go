package faultsummary

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cycled/cycled/blackboard"
)

// KeepWhole is the most summaries a History keeps whole; it keeps fewer for large cycles,
// so that the whole summaries hold at most WholeLines module lines in all (and at least
// the newest one is whole). Older summaries are stored compactly: the module lines that
// are plain successes (status ok, one attempt, a live value, a closed circuit, no fault)
// are dropped and rebuilt on read from the roster of modules, without their latency (0),
// value and write time; such a summary reads back with Compacted set. The rest of the
// summary is kept as it was. This bounds the memory of a long history of a large cycle by
// its failures, not by its size.
const (
	KeepWhole  = 64
	WholeLines = 100_000
)

// keepWhole returns how many summaries of n module lines are kept whole.
func keepWhole(n int) int {
	if n <= 0 {
		return KeepWhole
	}
	return max(1, min(KeepWhole, WholeLines/n))
}

// History is the bounded history of recent summaries. Latest is lock-free; Append never
// blocks on readers.
type History struct {
	latest atomic.Pointer[Summary]

	mu      sync.RWMutex
	ring    []*Summary    // guarded by mu
	next    int           // guarded by mu; index of the next write
	count   int           // guarded by mu
	changed chan struct{} // guarded by mu; closed and replaced on every Append

	roster *roster // the roster of the last compaction; used by Append only (one writer)
	kept   []int32 // the positions the last compaction kept; used by Append only
	// The kept lines of the last compaction and their positions, shared read-only by every
	// compacted summary whose kept lines are the same (see compact); used by Append only.
	lastLines []Module
	lastIdx   []int32
	lastSrc   Lines  // the producer's lines whose kept lines lastLines are (nil: none)
	scratch   Module // a line being compared (see sameKept); used by Append only
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

// Whole returns how many of the newest summaries of n module lines h keeps whole (the
// others it keeps compacted, without references to their producer's lines).
func (h *History) Whole(n int) int { return min(h.Cap(), keepWhole(n)) }

// Append stores s as the latest summary and wakes every waiter. One goroutine at a time
// appends (the history's producer; the engine appends from its tick loop); readers call
// the other methods concurrently.
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
	var victim *Summary
	slot := -1
	if n, k := len(h.ring), keepWhole(s.NumModules()); h.count > k {
		slot = (h.next - 1 - k + 2*n) % n
		victim = h.ring[slot]
	}
	h.mu.Unlock()
	close(ch)

	// Compact the summary that just left the whole window, outside the lock: published
	// summaries are immutable, readers holding it keep their copy.
	if victim != nil && victim.packed == nil {
		c := h.compact(victim)
		h.mu.Lock()
		if h.ring[slot] == victim {
			h.ring[slot] = c
		}
		h.mu.Unlock()
	}
}

// packing is how a compacted summary's module lines are rebuilt.
type packing struct {
	roster *roster
	idx    []int32 // positions of the lines kept in lines
}

type roster struct {
	lines []rosterLine
	id    any // the Identity of the Lines it was made from (nil: made from whole lines)
}

type rosterLine struct {
	name, tier, breaker, key string
	tierIndex                int
}

// plain reports whether a line carries nothing but its identity and its latency.
func plain(m *Module) bool {
	return m.Status == StatusOK && m.Attempts == 1 && m.FaultKind == "" && m.Error == "" &&
		m.CircuitState == "closed" && !m.UsingFallback && m.Served.Source == blackboard.Live &&
		!m.Served.Stale && !m.Served.Expired && !m.Served.DerivedFromStale && m.Served.AgeMs == 0
}

func (h *History) compact(s *Summary) *Summary {
	n := s.NumModules()
	r := h.roster
	id := s.LinesIdentity()
	sameID := r != nil && id != nil && id == r.id && len(r.lines) == n
	if !sameID && (r == nil || len(r.lines) != n || !r.matches(s)) {
		r = &roster{lines: make([]rosterLine, n)}
		var m Module
		for i := range n {
			s.ModuleInto(i, &m)
			r.lines[i] = rosterLine{name: m.Name, tier: m.Tier, breaker: m.Breaker, key: m.Served.Key, tierIndex: m.TierIndex}
		}
	}
	r.id = id
	h.roster = r
	c := *s
	c.Compacted = true
	c.lines, c.src, c.mat = nil, nil, nil
	p := &packing{roster: r}
	// One pass finds the kept lines (those of a summary 64 ticks old are out of the cache);
	// they are then copied once into a slice of their size (appending doubled a slice of
	// 240-byte lines, a failure storm of a large cycle copying its lines about twice over).
	kept := h.kept[:0]
	if pl, ok := s.src.(PlainLines); ok {
		kept = pl.AppendNotPlain(kept)
	} else {
		for i := range n {
			if !s.PlainAt(i) {
				kept = append(kept, int32(i))
			}
		}
	}
	h.kept = kept
	switch {
	case len(kept) == 0:
	case h.sameKept(s, kept):
		// A steady state of failures (breakers that stay open, nothing served) repeats its
		// lines tick after tick: the compacted summaries share them instead of a copy each.
		c.lines, p.idx = h.lastLines, h.lastIdx
		h.lastSrc = s.src
	default:
		c.lines, p.idx = make([]Module, len(kept)), slices.Clone(kept)
		for j, i := range kept {
			s.ModuleInto(int(i), &c.lines[j]) // ModuleAt would build each line on the heap first
		}
		h.lastLines, h.lastIdx, h.lastSrc = c.lines, p.idx, s.src
	}
	c.packed = p
	return &c
}

// sameKept reports whether the lines of s at the positions kept are those the last
// compaction kept, at the same positions.
func (h *History) sameKept(s *Summary, kept []int32) bool {
	if !slices.Equal(kept, h.lastIdx) {
		return false
	}
	if h.lastSrc != nil {
		if st, ok := s.src.(SteadyLines); ok && st.SameNotPlain(h.lastSrc, len(kept)) {
			return true
		}
	}
	same, _ := s.src.(SameLines)
	if h.lastSrc == nil {
		same = nil
	}
	m := &h.scratch
	for j, i := range kept {
		if same != nil && same.SameLine(h.lastSrc, int(i)) {
			continue // the producer knows it is the line lastLines[j] was made from
		}
		s.ModuleInto(int(i), m)
		if !sameLine(m, &h.lastLines[j]) {
			return false
		}
	}
	return true
}

// SameLines is implemented by Lines that can tell, without building either, that one of
// their lines is the line at the same position of other Lines from the same producer
// (those of an earlier summary): the compaction of a steady state of failures then
// compares no lines.
type SameLines interface {
	// SameLine reports whether line i is line i of prev, a line that serves no value
	// (false: it is not, or it is not known to be).
	SameLine(prev Lines, i int) bool
}

// SteadyLines is implemented by Lines that can tell at once that all their lines that are
// not plain successes are those of other Lines from the same producer: the compaction of
// a steady state of failures then looks at no line.
type SteadyLines interface {
	// SameNotPlain reports whether the n lines that are not plain successes are each the
	// line at the same position of prev, whose n such lines are at the same positions
	// (false: they are not, or it is not known).
	SameNotPlain(prev Lines, n int) bool
}

// sameLine reports whether a and b are the same line. A line that serves a value is never
// the same as another (values need not be comparable, and a value is never shared).
func sameLine(a, b *Module) bool {
	if a.Served.Value != nil || b.Served.Value != nil {
		return false
	}
	return *a == *b
}

func (r *roster) matches(s *Summary) bool {
	var m Module
	for i := range r.lines {
		l := &r.lines[i]
		s.ModuleInto(i, &m)
		if l.name != m.Name || l.tier != m.Tier || l.breaker != m.Breaker || l.key != m.Served.Key || l.tierIndex != m.TierIndex {
			return false
		}
	}
	return true
}

// expand rebuilds a compacted summary (others are returned as they are).
func expand(c *Summary) *Summary {
	if c == nil || c.packed == nil {
		return c
	}
	p := c.packed
	s := *c
	s.packed = nil
	ms := make([]Module, len(p.roster.lines))
	for i, l := range p.roster.lines {
		ms[i] = Module{Name: l.name, Tier: l.tier, TierIndex: l.tierIndex, Status: StatusOK, Attempts: 1,
			Breaker: l.breaker, CircuitState: "closed", Served: Served{Key: l.key, Source: blackboard.Live}}
	}
	for k, i := range p.idx {
		ms[i] = c.lines[k]
	}
	s.SetModules(ms)
	return &s
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
			return expand(s), true
		}
	}
	// Ids with gaps: scan.
	for _, x := range h.ring {
		if x != nil && x.TickID == id {
			return expand(x), true
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
		out = append(out, expand(s))
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

// Oldest returns the id of the oldest summary kept, or 0 when the history is empty.
func (h *History) Oldest() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.count == 0 {
		return 0
	}
	n := len(h.ring)
	return h.ring[(h.next-h.count+n)%n].TickID
}
