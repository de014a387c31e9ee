package faultsummary

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/cycled/cycled/blackboard"
)

func compactFixture(id uint64, n int) *Summary {
	s := &Summary{TickID: id, Tiers: []Tier{{Name: "t"}}}
	var ms []Module
	for i := 0; i < n; i++ {
		m := Module{Name: fmt.Sprintf("m%d", i), Tier: "t", Breaker: fmt.Sprintf("m%d", i), Status: StatusOK, Attempts: 1,
			LatencyMs: 0.25, CircuitState: "closed", Served: Served{Key: fmt.Sprintf("m%d.result", i), Source: blackboard.Live, Value: i}}
		if i%10 == int(id%10) {
			m.Status, m.FaultKind, m.Error = StatusFailed, "transient", "boom"
			m.Served = Served{Key: m.Served.Key, Source: blackboard.LastGood, Stale: true, AgeMs: 100}
		}
		ms = append(ms, m)
	}
	s.SetModules(ms)
	s.Normalize()
	return s
}

// sliceLines is a Lines over whole lines, as a producer's compact form would answer.
type sliceLines struct {
	ms []Module
	id *int
}

func (l sliceLines) Len() int              { return len(l.ms) }
func (l sliceLines) Line(i int, m *Module) { *m = l.ms[i] }
func (l sliceLines) Status(i int) Status   { return l.ms[i].Status }
func (l sliceLines) Plain(i int) bool      { return plain(&l.ms[i]) }
func (l sliceLines) Identity() any         { return l.id }
func asLines(s *Summary, id *int) *Summary { s.SetLines(sliceLines{ms: s.Modules(), id: id}); return s }
func TestHistoryCompactsOldSummaries(t *testing.T) {
	t.Run("whole lines", func(t *testing.T) { testHistoryCompacts(t, compactFixture) })
	id := new(int) // one identity: the same modules in every summary
	t.Run("lines", func(t *testing.T) {
		testHistoryCompacts(t, func(tick uint64, n int) *Summary { return asLines(compactFixture(tick, n), id) })
	})
	t.Run("lines without identity", func(t *testing.T) {
		testHistoryCompacts(t, func(tick uint64, n int) *Summary { return asLines(compactFixture(tick, n), nil) })
	})
}

// TestLinesReadOnDemand checks that a summary whose lines are kept by a Lines reads, counts,
// encodes and grades them as the same summary with whole lines does, building them once.
func TestLinesReadOnDemand(t *testing.T) {
	whole := compactFixture(3, 20)
	lined := asLines(compactFixture(3, 20), nil)
	if lined.NumModules() != 20 || lined.ModuleAt(3).Status != StatusFailed || lined.ModuleAt(4) != whole.ModuleAt(4) {
		t.Fatalf("NumModules %d, ModuleAt(3) %+v", lined.NumModules(), lined.ModuleAt(3))
	}
	if m, ok := lined.Module("m13"); !ok || m.Status != StatusFailed {
		t.Fatalf("Module(m13) = %+v, %v", m, ok)
	}
	var wg sync.WaitGroup
	got := make([][]Module, 4)
	for k := range got {
		wg.Go(func() { got[k] = lined.Modules() })
	}
	wg.Wait()
	for k := range got {
		if &got[k][0] != &got[0][0] {
			t.Fatal("the lines were built more than once")
		}
	}
	if !reflect.DeepEqual(got[0], whole.Modules()) {
		t.Fatalf("lines differ:\n%+v\n%+v", got[0], whole.Modules())
	}
	if a, b := lined.ComputeSeverity(), whole.ComputeSeverity(); a != b || a != Degraded {
		t.Fatalf("severity %s, whole %s", a, b)
	}
	jw, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	jl, err := json.Marshal(lined)
	if err != nil {
		t.Fatal(err)
	}
	if string(jw) != string(jl) {
		t.Fatalf("JSON differs:\n%s\n%s", jw, jl)
	}
	var back Summary
	if err := json.Unmarshal(jl, &back); err != nil || back.NumModules() != 20 || back.ModuleAt(13).Error != "boom" {
		t.Fatalf("decode: %v, %d lines", err, back.NumModules())
	}
}

func testHistoryCompacts(t *testing.T, fixture func(uint64, int) *Summary) {
	h := NewHistory(KeepWhole + 20)
	var orig []*Summary
	for id := uint64(1); id <= KeepWhole+20; id++ {
		s := fixture(id, 50)
		orig = append(orig, s)
		h.Append(s)
	}
	for id := uint64(1); id <= KeepWhole+20; id++ {
		got, ok := h.Get(id)
		if !ok {
			t.Fatalf("tick %d missing", id)
		}
		want := orig[id-1]
		old := id <= 20 // left the whole window
		if got.Compacted != old {
			t.Fatalf("tick %d: compacted %v, want %v", id, got.Compacted, old)
		}
		if !old {
			if got != want {
				t.Fatalf("tick %d: a recent summary must be the one appended", id)
			}
			continue
		}
		if len(got.Modules()) != len(want.Modules()) {
			t.Fatalf("tick %d: %d lines, want %d", id, len(got.Modules()), len(want.Modules()))
		}
		for i := range want.Modules() {
			w, g := want.Modules()[i], got.Modules()[i]
			if plain(&w) {
				// Everything but the latency, the value and the write time survives.
				w.LatencyMs, w.Served.Value = 0, nil
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("tick %d line %d:\n got %+v\nwant %+v", id, i, g, w)
			}
		}
	}
	// The compact copy holds only the failed lines, and shares one roster.
	h.mu.RLock()
	defer h.mu.RUnlock()
	var rosters = map[*roster]bool{}
	for _, s := range h.ring {
		if s.packed != nil {
			rosters[s.packed.roster] = true
			if len(s.Modules()) != 5 {
				t.Fatalf("tick %d keeps %d lines, want the 5 failed ones", s.TickID, len(s.Modules()))
			}
		}
	}
	if len(rosters) != 1 {
		t.Fatalf("%d rosters for one set of modules", len(rosters))
	}
}

// plainLines is n plain module lines made on demand: a large cycle without its memory.
type plainLines int

func (l plainLines) Len() int { return int(l) }
func (l plainLines) Line(i int, m *Module) {
	name := fmt.Sprintf("m%d", i)
	*m = Module{Name: name, Tier: "t", Breaker: name, Status: StatusOK, Attempts: 1, CircuitState: "closed",
		Served: Served{Key: name + ".result", Source: blackboard.Live}}
}
func (l plainLines) Status(int) Status { return StatusOK }
func (l plainLines) Plain(int) bool    { return true }
func (l plainLines) Identity() any     { return l }

// TestHistoryWhole checks that Whole tells how many of the newest summaries a history
// keeps whole, as its List shows them.
func TestHistoryWhole(t *testing.T) {
	for _, c := range []struct{ cap, n, want int }{
		{16, 20, 16},           // the history is shorter than KeepWhole
		{100, 20, KeepWhole},   // KeepWhole bounds it
		{5, WholeLines / 3, 3}, // WholeLines bounds it
		{2, WholeLines * 2, 1}, // at least the newest
		{4, 0, 4},              // no module lines
	} {
		h := NewHistory(c.cap)
		if got := h.Whole(c.n); got != c.want {
			t.Errorf("NewHistory(%d).Whole(%d) = %d, want %d", c.cap, c.n, got, c.want)
		}
		for id := uint64(1); id <= uint64(c.cap+3); id++ {
			s := &Summary{TickID: id, Tiers: []Tier{{Name: "t"}}}
			s.SetLines(plainLines(c.n))
			h.Append(s)
		}
		whole := 0
		for _, s := range h.List(0, 0) {
			if !s.Compacted {
				whole++
			}
		}
		if c.n > 0 && whole != c.want {
			t.Errorf("history of %d, %d lines: %d summaries whole, Whole says %d", c.cap, c.n, whole, c.want)
		}
	}
}

// failingLines is n module lines of which the first failed are failures, made on demand
// without allocating (the names are made once).
type failingLines struct {
	names  []string
	failed int
}

func newFailingLines(n, failed int) failingLines {
	l := failingLines{names: make([]string, n), failed: failed}
	for i := range l.names {
		l.names[i] = fmt.Sprintf("m%d", i)
	}
	return l
}

func (l failingLines) Len() int { return len(l.names) }
func (l failingLines) Line(i int, m *Module) {
	*m = Module{Name: l.names[i], Tier: "t", Breaker: l.names[i], Status: StatusOK, Attempts: 1, CircuitState: "closed",
		Served: Served{Key: l.names[i], Source: blackboard.Live}}
	if i < l.failed {
		m.Status, m.FaultKind, m.Error = StatusFailed, "transient", "boom"
		m.Served.Source, m.Served.Stale = blackboard.LastGood, true
	}
}
func (l failingLines) Status(i int) Status {
	if i < l.failed {
		return StatusFailed
	}
	return StatusOK
}
func (l failingLines) Plain(i int) bool { return i >= l.failed }
func (l failingLines) Identity() any    { return &l.names[0] }

// TestModuleIntoReadsEveryLine checks that ModuleInto sets the same line ModuleAt returns,
// over whole lines and over a producer's Lines, whatever the Module held before.
func TestModuleIntoReadsEveryLine(t *testing.T) {
	for name, s := range map[string]*Summary{"whole": compactFixture(3, 20), "lines": asLines(compactFixture(3, 20), nil)} {
		m := Module{Name: "left over", Error: "left over", LatencyMs: 9}
		for i := range s.NumModules() {
			s.ModuleInto(i, &m)
			if want := s.Modules()[i]; !reflect.DeepEqual(m, want) || !reflect.DeepEqual(s.ModuleAt(i), want) {
				t.Fatalf("%s line %d: ModuleInto %+v, ModuleAt %+v, want %+v", name, i, m, s.ModuleAt(i), want)
			}
		}
	}
}

// TestPlainAtAndLinesIdentity checks that PlainAt tells the plain lines apart as History's
// compaction keeps them, over whole lines and a producer's, and that only a producer's
// lines have an identity.
func TestPlainAtAndLinesIdentity(t *testing.T) {
	id := new(int)
	whole, lined := compactFixture(3, 20), asLines(compactFixture(3, 20), id)
	for i := range whole.NumModules() {
		m := whole.ModuleAt(i)
		if want := m.Status == StatusOK; whole.PlainAt(i) != want || lined.PlainAt(i) != want {
			t.Fatalf("line %d (%s): PlainAt whole %v, lines %v, want %v", i, m.Status, whole.PlainAt(i), lined.PlainAt(i), want)
		}
	}
	if whole.LinesIdentity() != nil || lined.LinesIdentity() != any(id) {
		t.Fatalf("LinesIdentity: whole %v, lines %v, want nil and %p", whole.LinesIdentity(), lined.LinesIdentity(), id)
	}
}

// TestCompactionAllocatesPerSummaryNotPerFailure checks that compacting a summary whose lines
// a producer keeps copies its failed lines into the compact summary's one slice, without
// building each on the heap first: 2000 failed lines cost about as many allocations as 20.
func TestCompactionAllocatesPerSummaryNotPerFailure(t *testing.T) {
	const n = WholeLines / 2 // the history keeps two summaries whole and compacts the third
	allocs := func(failed int) float64 {
		lines := newFailingLines(n, failed)
		ss := make([]*Summary, 64)
		for i := range ss {
			ss[i] = &Summary{TickID: uint64(i + 1), Tiers: []Tier{{Name: "t"}}}
			ss[i].SetLines(lines)
		}
		h := NewHistory(3)
		for _, s := range ss[:3] {
			h.Append(s)
		}
		next := 3
		a := testing.AllocsPerRun(20, func() {
			h.Append(ss[next]) // compacts the summary that left the whole window
			next++
		})
		if got := h.List(0, 0)[2]; !got.Compacted || got.ModuleAt(failed-1).Error != "boom" || got.ModuleAt(failed).Status != StatusOK {
			t.Fatalf("%d failed: the oldest summary is not compacted with its failures (compacted %v)", failed, got.Compacted)
		}
		return a
	}
	few, many := allocs(20), allocs(2000)
	if many > few+16 {
		t.Fatalf("compacting a summary: %v allocs with 20 failed lines, %v with 2000", few, many)
	}
}

// BenchmarkHistoryCompact appends summaries of 50 000 module lines, a tenth of them
// failures, kept by their producer, to a history that keeps two of them whole: every
// Append compacts the summary that leaves the whole window.
func BenchmarkHistoryCompact(b *testing.B) {
	lines := newFailingLines(WholeLines/2, WholeLines/20)
	ss := make([]Summary, 64)
	for i := range ss {
		ss[i].Tiers = []Tier{{Name: "t"}}
		ss[i].SetLines(lines)
	}
	appendEach(b, NewHistory(3), ss)
}

// A steady state of failures that repeat their lines (breakers that stay open, nothing
// served) shares the kept lines between compacted summaries; a line that changes, or one
// that serves a value, gets lines of its own, and every summary reads back as appended.
func TestHistorySharesRepeatedLines(t *testing.T) {
	open := func(id uint64, variant string) *Summary {
		s := compactFixture(id, 20)
		ms := slices.Clone(s.Modules())
		ms[3] = Module{Name: "m3", Tier: "t", Breaker: "m3", Status: StatusOpen, CircuitState: "open" + variant,
			Served: Served{Key: "m3.result", Source: blackboard.None}}
		for i := range ms {
			if ms[i].Status == StatusFailed { // the fixture's rotating failure: make it plain
				ms[i] = compactFixture(id+1, 20).Modules()[i]
			}
		}
		s.SetModules(ms)
		return s
	}
	h := NewHistory(KeepWhole + 4)
	var orig []*Summary
	for id := uint64(1); id <= KeepWhole+4; id++ {
		v := ""
		if id == 3 {
			v = "x" // a line that differs: not shared
		}
		s := open(id, v)
		orig = append(orig, s)
		h.Append(s)
	}
	h.mu.RLock()
	c1, c2, c3, c4 := h.ring[0], h.ring[1], h.ring[2], h.ring[3]
	h.mu.RUnlock()
	if !c1.Compacted || !c4.Compacted || len(c1.lines) != 1 {
		t.Fatalf("compaction: %v %v %d lines kept", c1.Compacted, c4.Compacted, len(c1.lines))
	}
	if &c1.lines[0] != &c2.lines[0] || &c3.lines[0] == &c2.lines[0] || &c4.lines[0] == &c2.lines[0] {
		t.Fatal("repeated lines must be shared, and only those")
	}
	for id := uint64(1); id <= 4; id++ {
		got, _ := h.Get(id)
		if m := got.Modules()[3]; m != orig[id-1].Modules()[3] {
			t.Fatalf("tick %d: line %+v, want %+v", id, m, orig[id-1].Modules()[3])
		}
	}
}

// steadyLines is sliceLines whose producer answers SteadyLines with steady, and counts the
// lines the compaction compares one by one (SameLines, answering that it does not know).
type steadyLines struct {
	sliceLines
	steady   bool
	asked    *int
	compared *int
}

func (l steadyLines) SameNotPlain(prev Lines, n int) bool {
	*l.asked++
	return l.steady
}

func (l steadyLines) SameLine(prev Lines, i int) bool {
	*l.compared++
	return false
}

// A producer that can tell that its lines that are not plain successes repeat those of
// the summary compacted before (SteadyLines) spares the compaction every line: it
// compares none and shares the kept lines. One that cannot has each kept line compared.
// Either way every summary reads back as appended.
func TestHistoryAsksSteadyLinesFirst(t *testing.T) {
	id := new(int)
	for _, steady := range []bool{true, false} {
		t.Run(fmt.Sprintf("steady=%v", steady), func(t *testing.T) {
			asked, compared := 0, 0
			const n = KeepWhole + 6
			h := NewHistory(n)
			var orig []*Summary
			for tick := uint64(1); tick <= n; tick++ {
				s := compactFixture(tick, 20)
				ms := slices.Clone(s.Modules())
				for i := range ms {
					if ms[i].Status == StatusFailed { // the fixture's rotating failure: made plain
						ms[i] = compactFixture(tick+1, 20).Modules()[i]
					}
				}
				for _, i := range []int{3, 11} { // two lines refused tick after tick
					ms[i] = Module{Name: ms[i].Name, Tier: "t", Breaker: ms[i].Breaker, Status: StatusOpen, CircuitState: "open",
						Served: Served{Key: ms[i].Served.Key, Source: blackboard.None}}
				}
				s.SetLines(steadyLines{sliceLines: sliceLines{ms: ms, id: id}, steady: steady, asked: &asked, compared: &compared})
				orig = append(orig, s)
				h.Append(s)
			}
			compactions := n - KeepWhole
			switch {
			case steady && (compared != 0 || asked != compactions-1):
				t.Fatalf("steady lines: asked %d times, %d lines compared; want %d, none", asked, compared, compactions-1)
			case !steady && compared != 2*(compactions-1):
				t.Fatalf("lines not known steady: %d lines compared, want %d", compared, 2*(compactions-1))
			}
			h.mu.RLock()
			c1, c2 := h.ring[0], h.ring[1]
			h.mu.RUnlock()
			if !c1.Compacted || len(c1.lines) != 2 || &c1.lines[0] != &c2.lines[0] {
				t.Fatalf("compaction: %v, %d lines kept, shared %v", c1.Compacted, len(c1.lines), len(c2.lines) > 0 && &c1.lines[0] == &c2.lines[0])
			}
			for tick := uint64(1); tick <= uint64(compactions); tick++ {
				got, _ := h.Get(tick)
				for _, i := range []int{3, 11} {
					if m := got.Modules()[i]; m != orig[tick-1].Modules()[i] {
						t.Fatalf("tick %d: line %+v, want %+v", tick, m, orig[tick-1].Modules()[i])
					}
				}
			}
		})
	}
}
