package floor

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

var sizes = []int{500, 5000}

type trivial struct{}

func (trivial) Run(context.Context, *tiers.Input) (any, error) { return 1, nil }

// namedPart is a part with the name its sub-benchmark goes by.
type namedPart struct {
	name string
	p    Part
}

// parts names the parts for the benchmark's sub-benchmarks.
var parts = []namedPart{{"time", PartTime}, {"breaker", PartBreaker}, {"lastgood", PartLastGood}, {"board", PartBoard}, {"fresh-lines", PartLines}, {"recover", PartRecover}}

// newLoop returns a loop over n trivial modules without the parts in skip.
func newLoop(n int, skip Part) *Loop {
	names, mods := make([]string, n), make([]tiers.Module, n)
	for i := range mods {
		names[i], mods[i] = fmt.Sprintf("m%d", i), trivial{}
	}
	return New(names, mods, skip)
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

func benchLoop(b *testing.B, n int, skip Part) {
	l := newLoop(n, skip)
	ctx := context.Background()
	measure(b, n, func(id uint64) { l.Tick(ctx, id) })
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
	if got := unsafe.Sizeof(Line{}); got != 40 {
		t.Fatalf("a line is %d bytes, want the engine's 40", got)
	}
	ctx := context.Background()
	for _, c := range append([]namedPart{{"whole", 0}}, parts...) {
		l := newLoop(3, c.p)
		for id := uint64(1); id <= 2; id++ {
			lines, vals := l.Tick(ctx, id)
			var timed time.Duration // a clock may read the same twice: the tick's sum is checked
			for i, m := range l.mods {
				if lines[i].Status != StatusOK || lines[i].Attempts != 1 || vals[i] != 1 {
					t.Fatalf("%s, tick %d: %s's line %+v, value %v", c.name, id, m.name, lines[i], vals[i])
				}
				timed += lines[i].Latency
				e, ok := l.board.Get(m.name)
				live := ok && e.Source == blackboard.Live && e.Value == 1 && e.TickID == id
				if live != (c.p != PartBoard && c.p != PartLastGood) {
					t.Fatalf("%s, tick %d: the board has %+v (ok %v) for %s", c.name, id, e, ok, m.name)
				}
				g := l.lg.Get(m.name, time.Now())
				stored := g.Value == 1 && g.TickID == id && g.Seq == lines[i].Seq
				if stored != (c.p != PartLastGood) {
					t.Fatalf("%s, tick %d: last known good %+v for %s (line seq %d)", c.name, id, g, m.name, lines[i].Seq)
				}
			}
			if (timed > 0) == (c.p == PartTime) {
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
