package cycle

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// TestPreciseInABubble: inside a testing/synctest bubble, whose time stands still while a
// goroutine spins, precise timing waits as coarse timing does, for a tier's deadline and for
// the grid, instead of spinning for ever.
func TestPreciseInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		honest := &script{fn: func(ctx context.Context, _ *tiers.Input) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		e := newEngine(t, Config{Timing: Precise, Period: 300 * time.Millisecond},
			[]Registration{reg("waits", "knowledge", honest)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		start := time.Now()
		go func() { done <- e.Run(ctx) }()
		time.Sleep(650 * time.Millisecond) // grid points at 0, 300 ms and 600 ms
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		s := e.Latest()
		if s == nil || s.TickID != 3 {
			t.Fatalf("latest %+v, want tick 3", s)
		}
		if m := mod(t, s, "waits"); m.Status != faultsummary.StatusTimedOut {
			t.Fatalf("status %q, want timed_out", m.Status)
		}
		if got := s.StartedAt.Sub(start); got != 600*time.Millisecond {
			t.Fatalf("tick 3 started %v after Run, want 600ms", got)
		}
	})
}
