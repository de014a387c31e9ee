// Package floor measures the floor under the engine's tick cost: the work per module that
// cycled's tick semantics require, done with cycled's own components in a bare loop on one
// goroutine, against the engine's tick with the same modules. It answers how much of a
// tick is the components (timing, breaker, last-known-good, blackboard, the summary line)
// and how much the engine's orchestration (tiers, runners, claims, admission, the stall
// check, settling): BENCHMARKS.md, "What remains".
//
// The loop does, for each trivial module: take the run (two compare-and-swaps and two
// stores on a phase word, as the engine's admission, start, commit and end do), ask the
// breaker, run the module under a recover, time it (clock.Elapsed, the processor's counter
// where the engine uses it), record the breaker's success, store the value as last known
// good (lastgood.Slot.PutValue) and publish it on the blackboard (Board.SetLive), and fill
// the module's summary line and value, in lines allocated per tick as the engine does when
// it has none to reuse. It does not do what an engine needs besides: tiers, deadlines,
// runner hand-offs, admission checks (due, emergency-only, busy), the fast or slow
// decision, the tier's context, settling and the summary itself; nor a few things a
// module's run also needs that are cheap: the input's tick, deadline and attempt
// (tiers.Input), whether an input was stale.
//
// make bench-floor REPS=7 runs every case once per repetition, so that they alternate.
package floor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

var sizes = []int{500, 5000}

type trivial struct{}

func (trivial) Run(context.Context, *tiers.Input) (any, error) { return 1, nil }

// mod is one module's state in the loop, each part its own allocation as in the engine.
type mod struct {
	phase  *atomic.Uint64
	m      tiers.Module
	in     *tiers.Input
	br     *breaker.Breaker
	lslot  *lastgood.Slot
	bslot  *blackboard.Slot
	name   string
	result any
}

// line is a module's summary line, the 40 bytes of the engine's lineRec.
type line struct {
	latency  time.Duration
	seq      uint64
	written  int64
	attempts int32
	ex       int32
	status   uint8
	kind     uint8
	circuit  uint8
	flags    uint8
}

// run is one attempt under a recover, as the engine's.
func (m *mod) run(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return m.runBare(ctx)
}

// loop is the bare loop's state: n modules and the components they write to.
type loop struct {
	c     clock.Clock
	lg    *lastgood.Store
	board *blackboard.Board
	mods  []*mod
	held  []line // the last tick's lines, kept past it as a summary keeps them
	skip  part   // parts left out, to measure what each costs
	lines []line // with skip&partLines: the lines every tick reuses
	vals  []any
}

// part is a part of the per-module work that BenchmarkFloor can leave out.
type part uint

const (
	partTime     part = 1 << iota // clock.Elapsed (the written time is then the tick's start)
	partBreaker                   // Acquire and Success
	partLastGood                  // lastgood.Slot.PutValue
	partBoard                     // blackboard.Board.SetLive
	partLines                     // fresh lines every tick (left out: one set reused)
	partRecover                   // the deferred recover around the run
)

// namedPart is a part with the name its sub-benchmark goes by.
type namedPart struct {
	name string
	p    part
}

// parts names the parts for the benchmark's sub-benchmarks.
var parts = []namedPart{{"time", partTime}, {"breaker", partBreaker}, {"lastgood", partLastGood}, {"board", partBoard}, {"fresh-lines", partLines}, {"recover", partRecover}}

func newLoop(n int) *loop {
	lg := lastgood.New()
	l := &loop{c: clock.Real(), lg: lg, board: blackboard.New(lg), mods: make([]*mod, n)}
	for i := range l.mods {
		name := fmt.Sprintf("m%d", i)
		l.mods[i] = &mod{phase: new(atomic.Uint64), m: trivial{}, in: new(tiers.Input),
			br:    breaker.New(breaker.Settings{Name: name, FailureThreshold: 1 << 30, Cooldown: time.Second}),
			lslot: lg.Slot(name), bslot: l.board.Slot(name), name: name}
	}
	return l
}

// tick runs every module once as tick id and returns the tick's lines and values.
func (l *loop) tick(ctx context.Context, id uint64) ([]line, []any) {
	n := len(l.mods)
	l.board.Begin(id, l.c.Now())
	var lines []line
	var vals []any
	if l.skip&partLines == 0 {
		lines, vals = make([]line, n), make([]any, n)
	} else {
		if l.lines == nil {
			l.lines, l.vals = make([]line, n), make([]any, n)
		}
		lines, vals = l.lines, l.vals
	}
	t := clock.NewStamp(l.c)
	for i, m := range l.mods {
		old := m.phase.Load()
		if !m.phase.CompareAndSwap(old, id<<4|1) { // admitting
			continue
		}
		ln := &lines[i]
		var p breaker.Permit
		if l.skip&partBreaker == 0 {
			ln.circuit = uint8(m.br.Peek()) // the state at admission, as the engine's line has it
			if p = m.br.Acquire(); !p.Allowed() {
				m.phase.Store(id<<4 | 4)
				continue
			}
		}
		m.phase.Store(id<<4 | 2 | 8) // running, busy
		var err error
		if l.skip&partRecover == 0 {
			err = m.run(ctx)
		} else {
			err = m.runBare(ctx)
		}
		var d time.Duration
		if l.skip&partTime == 0 {
			d, t = clock.Elapsed(l.c, t)
		}
		if !m.phase.CompareAndSwap(id<<4|2|8, id<<4|3|8) { // committing
			continue
		}
		ln.latency, ln.attempts = d, 1
		if err != nil {
			ln.kind, ln.ex = 1, 1 // the engine's settling fills the rest of a failure's line
		} else {
			if l.skip&partBreaker == 0 {
				m.br.Success(p)
			}
			end := t.Time()
			if l.skip&partLastGood == 0 {
				ln.seq = m.lslot.PutValue(m.result, m.name, id, end)
			}
			if l.skip&partBoard == 0 {
				l.board.SetLive(m.bslot, m.lslot, 0, false)
			}
			ln.written, ln.status, ln.flags = end.UnixNano(), 1, 1
			vals[i] = m.result
		}
		m.phase.Store(id<<4 | 4) // done, not busy
	}
	l.held = lines
	return lines, vals
}

// runBare is run without the recover.
func (m *mod) runBare(ctx context.Context) error {
	v, err := m.m.Run(ctx, m.in)
	if err == nil {
		m.result = v
	}
	return err
}

// BenchmarkFloor is the bare loop over N modules, one tick an iteration: all of it, and
// without each part in turn (what a part costs is the difference).
func BenchmarkFloor(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { benchLoop(b, n, 0) })
		for _, pt := range parts {
			b.Run(fmt.Sprintf("N=%d/without=%s", n, pt.name), func(b *testing.B) { benchLoop(b, n, pt.p) })
		}
	}
}

func benchLoop(b *testing.B, n int, skip part) {
	l := newLoop(n)
	l.skip = skip
	ctx := context.Background()
	measure(b, n, func(id uint64) { l.tick(ctx, id) })
}

// measure times tick over n modules, one call an iteration, after four ticks of warm-up
// (the engine's modules proven fast, every key stored), and reports it per module.
func measure(b *testing.B, n int, tick func(id uint64)) {
	for id := uint64(1); id <= 4; id++ {
		tick(id)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tick(uint64(i) + 5)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/module")
}

// BenchmarkEngine is the engine's tick with the same modules over five tiers (as
// cycle.BenchmarkTick), in the same binary so that the two alternate in one run.
func BenchmarkEngine(b *testing.B) {
	names := []string{"safety", "knowledge", "perception", "planning", "execution"}
	ts := make([]tiers.Tier, len(names))
	for i, nm := range names {
		ts[i] = tiers.Tier{Name: nm, Budget: time.Second, MaxAttempts: 1,
			Breaker: breaker.Settings{FailureThreshold: 1 << 30, Cooldown: time.Second}}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			regs := make([]cycle.Registration, n)
			for i := range regs {
				regs[i] = cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: names[i%len(names)]}, Module: trivial{}}
			}
			e, err := cycle.New(cycle.Config{Tiers: ts, History: 16}, regs)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			measure(b, n, func(uint64) {
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// TestFloorLoopPublishes checks that the loop does the work it claims, whole and without
// each part: every module's line filled, its value stored as last known good and live on
// the blackboard unless that part is left out, a line the size of the engine's, and a
// panicking module's run recovered.
func TestFloorLoopPublishes(t *testing.T) {
	if got := unsafe.Sizeof(line{}); got != 40 {
		t.Fatalf("a line is %d bytes, want the engine's 40", got)
	}
	ctx := context.Background()
	for _, c := range append([]namedPart{{"whole", 0}}, parts...) {
		l := newLoop(3)
		l.skip = c.p
		for id := uint64(1); id <= 2; id++ {
			lines, vals := l.tick(ctx, id)
			var timed time.Duration // a clock may read the same twice: the tick's sum is checked
			for i, m := range l.mods {
				if lines[i].status != 1 || lines[i].attempts != 1 || vals[i] != 1 {
					t.Fatalf("%s, tick %d: %s's line %+v, value %v", c.name, id, m.name, lines[i], vals[i])
				}
				timed += lines[i].latency
				e, ok := l.board.Get(m.name)
				live := ok && e.Source == blackboard.Live && e.Value == 1 && e.TickID == id
				if live != (c.p != partBoard && c.p != partLastGood) {
					t.Fatalf("%s, tick %d: the board has %+v (ok %v) for %s", c.name, id, e, ok, m.name)
				}
				g := l.lg.Get(m.name, time.Now())
				stored := g.Value == 1 && g.TickID == id && g.Seq == lines[i].seq
				if stored != (c.p != partLastGood) {
					t.Fatalf("%s, tick %d: last known good %+v for %s (line seq %d)", c.name, id, g, m.name, lines[i].seq)
				}
			}
			if (timed > 0) == (c.p == partTime) {
				t.Fatalf("%s, tick %d: the runs' latencies add up to %v", c.name, id, timed)
			}
		}
	}
	panicky := &mod{m: panicModule{}, in: new(tiers.Input)}
	if err := panicky.run(ctx); err == nil {
		t.Fatal("a panic gave no error")
	}
}

type panicModule struct{}

func (panicModule) Run(context.Context, *tiers.Input) (any, error) { panic("boom") }
