package peers

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/cycle"
)

func contenders(t *testing.T, spec Spec) map[string]Contender {
	t.Helper()
	e, err := NewEngine(spec, cycle.Coarse)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Contender{"engine": e, "A": NewPlain(spec), "B": NewFailsafe(spec)}
}

// Every peer reports the same statuses and fallbacks for the tick-cost workload.
func TestPeersAgreeOnTrivialWorkload(t *testing.T) {
	var on atomic.Bool
	spec := TrivialSpec(50, true, &on, FiveTiers(time.Second, 1, time.Millisecond, time.Millisecond, 1<<30))
	for name, c := range contenders(t, spec) {
		ctx := context.Background()
		on.Store(false)
		for range 4 {
			if err := c.Tick(ctx); err != nil {
				t.Fatal(name, err)
			}
		}
		on.Store(true)
		if err := c.Tick(ctx); err != nil {
			t.Fatal(name, err)
		}
		v := c.Last()
		if len(v.Lines) != 50 {
			t.Fatalf("%s: %d lines", name, len(v.Lines))
		}
		failed := 0
		for _, ln := range v.Lines {
			switch ln.Status {
			case StatusOK:
				if ln.Source != SourceLive {
					t.Errorf("%s: %s ok but served %q", name, ln.Name, ln.Source)
				}
			case StatusFailed:
				failed++
				if ln.Kind != "transient" || ln.Source != SourceLastGood || !ln.Stale {
					t.Errorf("%s: %s failed: %+v", name, ln.Name, ln)
				}
			default:
				t.Errorf("%s: %s status %q", name, ln.Name, ln.Status)
			}
		}
		if failed != 5 {
			t.Errorf("%s: %d failed, want 5", name, failed)
		}
		c.Close()
	}
}

// A module ignoring its context is abandoned at the deadline and busy until it returns;
// one honouring it fails or times out; the tier ends near its budget.
func TestPeersAbandonHungModule(t *testing.T) {
	// On virtual time: the hung module's 100 ms and the budgets cost no wall-clock time.
	synctest.Test(t, func(t *testing.T) {
		var conc Concurrency
		ts := []TierSpec{
			{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1, FailureThreshold: 1 << 30, Cooldown: time.Second},
			{Name: "work", Budget: 30 * time.Millisecond, MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffFactor: 2,
				BackoffMax: 10 * time.Millisecond, FailureThreshold: 1 << 30, Cooldown: time.Second},
		}
		mods := []Module{{Name: "s", Tier: 0, Fn: Trivial}, {Name: "hung", Tier: 1, Fn: Hung(100*time.Millisecond, &conc)},
			{Name: "honour", Tier: 1, Fn: Honour(100 * time.Millisecond)}, {Name: "fast", Tier: 1, Fn: Trivial}}
		spec := Spec{Tiers: ts, Modules: mods}
		for name, c := range contenders(t, spec) {
			for tick := 0; tick < 3; tick++ {
				time.Sleep(5 * time.Millisecond) // virtual: a scheduler leaves the rest of the period
				if err := c.Tick(context.Background()); err != nil {
					t.Fatal(err)
				}
				v := c.Last()
				el := v.Tiers[1].Elapsed
				if el < 30*time.Millisecond || el > 45*time.Millisecond {
					t.Errorf("%s tick %d: work tier took %v", name, tick, el)
				}
				st := map[string]string{}
				for _, ln := range v.Lines {
					st[ln.Name] = ln.Status
				}
				if want := map[int]string{0: StatusTimedOut, 1: StatusBusy, 2: StatusBusy}[tick]; st["hung"] != want {
					t.Errorf("%s tick %d: hung %q, want %q", name, tick, st["hung"], want)
				}
				if st["honour"] != StatusFailed && st["honour"] != StatusTimedOut {
					t.Errorf("%s tick %d: honour %q", name, tick, st["honour"])
				}
				if st["fast"] != StatusOK || st["s"] != StatusOK {
					t.Errorf("%s tick %d: %v", name, tick, st)
				}
			}
			c.Close()
			time.Sleep(120 * time.Millisecond) // virtual: let the hung module return
		}
		if conc.Max() != 1 {
			t.Errorf("hung module ran %d times concurrently", conc.Max())
		}
	})
}

// The floor runs every module of the spec once a tick, whatever its tier, and marks the
// failing ones failed.
func TestFloorRunsEveryModuleOnce(t *testing.T) {
	var on atomic.Bool
	spec := TrivialSpec(50, true, &on, FiveTiers(time.Second, 1, time.Millisecond, time.Millisecond, 1<<30))
	runs := map[string]int{}
	for i := range spec.Modules {
		m := &spec.Modules[i]
		fn := m.Fn
		m.Fn = func(ctx context.Context) (any, error) { runs[m.Name]++; return fn(ctx) }
	}
	f := NewFloor(spec)
	defer f.Close()
	ctx := context.Background()
	for tick := 1; tick <= 3; tick++ {
		on.Store(tick == 3)
		if err := f.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		v := f.Last()
		if v.TickID != uint64(tick) || len(v.Lines) != len(spec.Modules) {
			t.Fatalf("tick %d: view of tick %d with %d lines", tick, v.TickID, len(v.Lines))
		}
		failed, lastTier := 0, 0
		for _, ln := range v.Lines {
			if runs[ln.Name] != tick {
				t.Fatalf("tick %d: %s ran %d times", tick, ln.Name, runs[ln.Name])
			}
			if ln.Tier < lastTier {
				t.Fatalf("tick %d: %s (tier %d) after a module of tier %d", tick, ln.Name, ln.Tier, lastTier)
			}
			lastTier = ln.Tier
			if ln.Status == StatusFailed {
				failed++
			} else if ln.Status != StatusOK || ln.Attempts != 1 {
				t.Fatalf("tick %d: %+v", tick, ln)
			}
		}
		if want := map[bool]int{false: 0, true: 5}[tick == 3]; failed != want {
			t.Fatalf("tick %d: %d failed, want %d", tick, failed, want)
		}
	}
	if len(runs) != len(spec.Modules) {
		t.Fatalf("%d modules ran, want %d", len(runs), len(spec.Modules))
	}
}

// The harness's open-10% state: modules failing on every call from the first tick, with
// breakers that open after 5 failed ticks, are refused by every peer from the sixth tick
// on, and nothing is served for them (they never had a value).
func TestPeersRefuseOpenBreakers(t *testing.T) {
	var on atomic.Bool
	on.Store(true)
	spec := TrivialSpec(50, true, &on, FiveTiers(time.Second, 1, time.Millisecond, time.Millisecond, 5))
	for name, c := range contenders(t, spec) {
		ctx := context.Background()
		for tick := 1; tick <= 7; tick++ {
			if err := c.Tick(ctx); err != nil {
				t.Fatal(name, err)
			}
			refused := 0
			for _, ln := range c.Last().Lines {
				if ln.Status == StatusOpen {
					refused++
					if ln.Source != SourceNone || ln.Attempts != 0 {
						t.Errorf("%s tick %d: %s refused: %+v", name, tick, ln.Name, ln)
					}
				}
			}
			if want := map[bool]int{true: 5, false: 0}[tick > 5]; refused != want {
				t.Errorf("%s tick %d: %d refused, want %d", name, tick, refused, want)
			}
		}
		c.Close()
	}
}
