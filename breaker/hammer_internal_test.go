package breaker

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

// TestProbeCapAcrossGenerations hammers a breaker that keeps cycling through every state
// (tripping failures, successes, cooldowns advanced concurrently) and checks that no
// half-open generation ever has more than HalfOpenProbes probes out at once. Probes of an
// earlier generation may still be running when a later one starts, so the count is kept
// per generation.
func TestProbeCapAcrossGenerations(t *testing.T) {
	const (
		probes     = 2
		goroutines = 16
		iterations = 3000
	)
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	b := New(Settings{Name: "m", FailureThreshold: 2, Cooldown: time.Millisecond,
		HalfOpenProbes: probes, HalfOpenSuccesses: 3}, WithClock(clk))

	var gens sync.Map // generation → *atomic.Int64
	var violations, admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for range iterations {
				if rng.IntN(8) == 0 {
					clk.Advance(time.Millisecond)
				}
				p := b.Acquire()
				if !p.Allowed() {
					continue
				}
				if p.Kind() == Probe {
					v, _ := gens.LoadOrStore(p.gen, new(atomic.Int64))
					c := v.(*atomic.Int64)
					if c.Add(1) > probes {
						violations.Add(1)
					}
					admitted.Add(1)
					runtime.Gosched() // hold the probe so that probes overlap
					c.Add(-1)
				}
				switch rng.IntN(4) {
				case 0:
					b.Failure(p, fault.KindTransient)
				case 1:
					b.Failure(p, fault.KindCanceled)
				case 2:
					b.Release(p)
				default:
					b.Success(p)
				}
			}
		})
	}
	wg.Wait()
	if v := violations.Load(); v > 0 {
		t.Fatalf("%d times a generation had more than %d probes in flight", v, probes)
	}
	snap := b.Snapshot()
	if snap.ProbesInFlight != 0 {
		t.Fatalf("ProbesInFlight = %d after every probe was recorded", snap.ProbesInFlight)
	}
	if admitted.Load() == 0 || snap.Transitions < 3 {
		t.Fatalf("the hammer did not cycle: %d probes, %d transitions", admitted.Load(), snap.Transitions)
	}
	t.Logf("%d probes admitted, %d transitions", admitted.Load(), snap.Transitions)
}
