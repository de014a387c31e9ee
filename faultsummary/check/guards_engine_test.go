package check_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// slowWhile takes d (virtual time, honouring its context) while slow is set.
func slowWhile(slow *atomic.Bool, d time.Duration) behave {
	return func(ctx context.Context, in *tiers.Input) (any, error) {
		if slow.Load() {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return in.TickID(), nil
	}
}

// The engine's summaries under load shedding, startup (ready and timed out) and
// asynchronous modules keep every invariant.
func TestEngineGuardsKeepInvariants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow, safetyFail atomic.Bool
		safetyFail.Store(true)
		cfg := cycle.Config{
			Shedding: &cycle.SheddingConfig{AfterOverruns: 2, RestoreAfter: 3, Target: 20 * time.Millisecond},
			Startup:  &cycle.StartupConfig{Timeout: 2 * time.Second},
		}
		h := newHarness(t, cfg, []cycle.Registration{
			reg("s", "safety", switchable(&safetyFail, errBoom)),
			reg("low", "knowledge", slowWhile(&slow, 30*time.Millisecond), func(s *tiers.ModuleSpec) { s.Priority = -1 }),
			reg("mid", "knowledge", okMod(1)),
			reg("crit", "planning", slowWhile(&slow, 15*time.Millisecond), func(s *tiers.ModuleSpec) { s.Critical = true }),
			reg("bg", "knowledge", okMod(7), func(s *tiers.ModuleSpec) { s.Async, s.Timeout = true, 10*time.Millisecond }),
		})
		h.ticks(3, 10*time.Millisecond) // starting: the safety module fails, no emergency
		safetyFail.Store(false)
		h.ticks(1, 1100*time.Millisecond) // its breaker probes: ready
		slow.Store(true)
		h.ticks(12, 10*time.Millisecond) // overruns: shed low, then mid; crit never
		slow.Store(false)
		h.ticks(12, 10*time.Millisecond) // fits: restored step by step
		var shed, ready, asyncOK bool
		for _, s := range h.ss {
			shed = shed || s.Shed != nil
			ready = ready || (s.CycleState == "" && h.status(s, "mid") == faultsummary.StatusOK)
			asyncOK = asyncOK || (len(s.Async) > 0 && s.Async[0].Status == faultsummary.StatusOK)
		}
		if !shed || !ready || !asyncOK {
			t.Fatalf("shed %v ready %v async %v: the run did not exercise them", shed, ready, asyncOK)
		}
		h.finish()
	})
}

func TestEngineStartupTimeoutKeepsInvariants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		fail.Store(true)
		h := newHarness(t, cycle.Config{Startup: &cycle.StartupConfig{Timeout: 100 * time.Millisecond}}, []cycle.Registration{
			reg("s", "safety", switchable(&fail, errBoom)),
			reg("k", "knowledge", okMod(1)),
		})
		h.ticks(5, 40*time.Millisecond)
		fail.Store(false)
		h.ticks(6, 600*time.Millisecond)
		if last := h.ss[len(h.ss)-1]; last.Emergency.Reason != "startup_timeout" {
			t.Fatalf("last emergency reason %q", last.Emergency.Reason)
		}
		h.finish()
	})
}
