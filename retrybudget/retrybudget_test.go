package retrybudget_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/retrybudget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errIO = errors.New("i/o hiccup")

// failing returns an attempt that fails with err the first fails times, then succeeds. It
// records the virtual time at which every attempt started.
type failing struct {
	fails  int
	err    error
	work   time.Duration // simulated work per attempt (virtual time inside a bubble)
	starts []time.Time
}

func (f *failing) attempt(ctx context.Context, n int) error {
	f.starts = append(f.starts, time.Now())
	if f.work > 0 {
		select {
		case <-time.After(f.work):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if n <= f.fails {
		return f.err
	}
	return nil
}

func noJitter() retrybudget.Option { return retrybudget.WithRand(func() float64 { return 0.5 }) }

func TestAttemptCounts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		maxAttempts  int
		fails        int
		wantAttempts int
		wantErr      bool
		wantAttExh   bool
	}{
		{"zero means one, success", 0, 0, 1, false, false},
		{"zero means one, no retry", 0, 5, 1, true, true},
		{"one means no retry", 1, 5, 1, true, true},
		{"negative means one", -3, 5, 1, true, true},
		{"three, all fail", 3, 5, 3, true, true},
		{"three, ok on second", 3, 1, 2, false, false},
		{"three, ok on third", 3, 2, 3, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &failing{fails: tc.fails, err: fault.Transient(errIO)}
				res := retrybudget.New(noJitter()).Run(t.Context(), retrybudget.Budget{MaxAttempts: tc.maxAttempts}, f.attempt)
				if res.Attempts != tc.wantAttempts || len(f.starts) != tc.wantAttempts {
					t.Fatalf("Attempts = %d (called %d), want %d", res.Attempts, len(f.starts), tc.wantAttempts)
				}
				if (res.Err != nil) != tc.wantErr {
					t.Fatalf("Err = %v, want error %v", res.Err, tc.wantErr)
				}
				if res.AttemptsExhausted != tc.wantAttExh || res.BudgetExhausted {
					t.Fatalf("AttemptsExhausted = %v, BudgetExhausted = %v; want %v, false", res.AttemptsExhausted, res.BudgetExhausted, tc.wantAttExh)
				}
				wantKind := fault.KindNone
				if tc.wantErr {
					wantKind = fault.KindTransient
				}
				if res.Kind != wantKind {
					t.Fatalf("Kind = %v, want %v", res.Kind, wantKind)
				}
			})
		})
	}
}

func TestTransientRetriedThenOK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &failing{fails: 2, err: fault.Transient(errIO)}
		res := retrybudget.New(noJitter()).Run(t.Context(), retrybudget.Budget{MaxAttempts: 5, Budget: time.Second}, f.attempt)
		if res != (retrybudget.Result{Attempts: 3}) {
			t.Fatalf("Result = %+v, want 3 attempts and success", res)
		}
		// Default backoff: 10ms after the first attempt, 20ms after the second.
		want := []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond}
		for i, s := range f.starts {
			if got := s.Sub(start); got != want[i] {
				t.Errorf("attempt %d started at +%v, want +%v", i+1, got, want[i])
			}
		}
	})
}

func TestNonRetryableReturnAtOnce(t *testing.T) {
	// Marked: an unmarked Canceled under a live context is the callee's own (internal).
	canceledErr := fault.Wrap(fault.KindCanceled, fmt.Errorf("callee gave up: %w", context.Canceled))
	for _, tc := range []struct {
		name      string
		err       error
		retryable fault.Set
		want      fault.Kind
	}{
		{"permanent", fault.Permanent(errIO), 0, fault.KindContract},
		{"validation", fault.Validation(errIO), 0, fault.KindValidation},
		{"control", fault.Control(errIO), 0, fault.KindControl},
		{"internal (unknown error)", errIO, 0, fault.KindInternal},
		{"panic", &fault.PanicError{Value: "boom"}, 0, fault.KindInternal},
		{"downstream is opt-in", fault.Downstream(errIO), 0, fault.KindDownstream},
		{"transient not in custom set", fault.Transient(errIO), fault.SetOf(fault.KindDownstream), fault.KindTransient},
		{"canceled is never retried", canceledErr, fault.SetOf(fault.KindCanceled, fault.KindTransient), fault.KindCanceled},
		{"the callee's own Canceled is internal", fmt.Errorf("sub-call: %w", context.Canceled), fault.SetOf(fault.KindCanceled, fault.KindTransient), fault.KindInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				f := &failing{fails: 100, err: tc.err}
				res := retrybudget.New().Run(t.Context(), retrybudget.Budget{MaxAttempts: 5, Budget: time.Second, Retryable: tc.retryable}, f.attempt)
				if res.Attempts != 1 || len(f.starts) != 1 {
					t.Fatalf("Attempts = %d, want 1", res.Attempts)
				}
				if res.Err != tc.err || res.Kind != tc.want {
					t.Fatalf("Err, Kind = %v, %v; want %v, %v", res.Err, res.Kind, tc.err, tc.want)
				}
				if res.AttemptsExhausted || res.BudgetExhausted {
					t.Fatalf("exhausted flags set: %+v", res)
				}
				if d := time.Since(start); d != 0 {
					t.Fatalf("Run took %v, want 0", d)
				}
			})
		})
	}
}

func TestCustomRetryableSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := retrybudget.Budget{MaxAttempts: 4, Budget: time.Second, Retryable: fault.SetOf(fault.KindTransient, fault.KindDownstream)}
		f := &failing{fails: 2, err: fault.Downstream(errIO)}
		res := retrybudget.New().Run(t.Context(), b, f.attempt)
		if res != (retrybudget.Result{Attempts: 3}) {
			t.Fatalf("downstream opted in: Result = %+v, want success on attempt 3", res)
		}

		f = &failing{fails: 100, err: fault.Downstream(errIO)}
		res = retrybudget.New().Run(t.Context(), b, f.attempt)
		if res.Attempts != 4 || res.Kind != fault.KindDownstream || !res.AttemptsExhausted || res.BudgetExhausted {
			t.Fatalf("downstream opted in, always failing: Result = %+v", res)
		}
	})
}

// TestBudgetNeverExceeded checks, over many policies and attempt durations, that attempts
// plus backoff sleeps never take longer than the budget when attempts honour their context.
func TestBudgetNeverExceeded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		budget := time.Duration(1+rng.IntN(300)) * time.Millisecond
		work := time.Duration(rng.IntN(80)) * time.Millisecond
		b := retrybudget.Budget{
			MaxAttempts: 1 + rng.IntN(10),
			Budget:      budget,
			Backoff: retrybudget.Backoff{
				Base:   time.Duration(1+rng.IntN(50)) * time.Millisecond,
				Factor: 1 + 2*rng.Float64(),
				Max:    time.Duration(1+rng.IntN(200)) * time.Millisecond,
				Jitter: rng.Float64(),
			},
		}
		seed := rng.Uint64()
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				f := &failing{fails: 1000, err: fault.Transient(errIO), work: work}
				jr := rand.New(rand.NewPCG(seed, seed))
				res := retrybudget.New(retrybudget.WithRand(jr.Float64)).Run(t.Context(), b, f.attempt)
				if elapsed := time.Since(start); elapsed > budget {
					t.Fatalf("policy %+v, work %v: took %v > budget %v (%+v)", b, work, elapsed, budget, res)
				}
				if !res.BudgetExhausted && !res.AttemptsExhausted {
					t.Fatalf("policy %+v, work %v: neither budget nor attempts exhausted: %+v", b, work, res)
				}
				if res.Kind != fault.KindTransient {
					t.Fatalf("Kind = %v, want transient", res.Kind)
				}
				if res.Attempts != len(f.starts) {
					t.Fatalf("Attempts = %d, attempt called %d times", res.Attempts, len(f.starts))
				}
			})
		})
	}
}

func TestBudgetRunsOutDuringAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &failing{fails: 1000, err: fault.Transient(errIO), work: 30 * time.Millisecond}
		b := retrybudget.Budget{MaxAttempts: 10, Budget: 100 * time.Millisecond}
		res := retrybudget.New(noJitter()).Run(t.Context(), b, f.attempt)
		// 0–30 attempt, 30–40 sleep, 40–70 attempt, 70–90 sleep, 90–100 attempt cut by the deadline.
		if elapsed := time.Since(start); elapsed != 100*time.Millisecond {
			t.Fatalf("elapsed %v, want 100ms", elapsed)
		}
		if res.Attempts != 3 || !errors.Is(res.Err, context.DeadlineExceeded) || res.Kind != fault.KindTransient ||
			!res.BudgetExhausted || res.AttemptsExhausted {
			t.Fatalf("Result = %+v", res)
		}
	})
}

func TestBackoffClampedToTimeLeft(t *testing.T) {
	t.Run("no sleep past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			f := &failing{fails: 1000, err: fault.Transient(errIO)}
			b := retrybudget.Budget{MaxAttempts: 5, Budget: 50 * time.Millisecond,
				Backoff: retrybudget.Backoff{Base: 100 * time.Millisecond, Max: time.Second}}
			res := retrybudget.New(noJitter()).Run(t.Context(), b, f.attempt)
			if elapsed := time.Since(start); elapsed != 0 {
				t.Fatalf("Run slept %v for a backoff that could not fit", elapsed)
			}
			if res.Attempts != 1 || !res.BudgetExhausted || res.AttemptsExhausted || res.Kind != fault.KindTransient || res.Err == nil {
				t.Fatalf("Result = %+v", res)
			}
		})
	})
	t.Run("backoff equal to time left", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &failing{fails: 1000, err: fault.Transient(errIO), work: 10 * time.Millisecond}
			b := retrybudget.Budget{MaxAttempts: 5, Budget: 50 * time.Millisecond,
				Backoff: retrybudget.Backoff{Base: 40 * time.Millisecond}}
			res := retrybudget.New(noJitter()).Run(t.Context(), b, f.attempt)
			if res.Attempts != 1 || !res.BudgetExhausted {
				t.Fatalf("Result = %+v, want 1 attempt and budget exhausted", res)
			}
		})
	})
	t.Run("last attempt gets only what is left", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var left []time.Duration
			attempt := func(ctx context.Context, n int) error {
				dl, _ := ctx.Deadline()
				left = append(left, time.Until(dl))
				time.Sleep(5 * time.Millisecond)
				return fault.Transient(errIO)
			}
			b := retrybudget.Budget{MaxAttempts: 5, Budget: 50 * time.Millisecond,
				Backoff: retrybudget.Backoff{Base: 40 * time.Millisecond}}
			res := retrybudget.New(noJitter()).Run(t.Context(), b, attempt)
			want := []time.Duration{50 * time.Millisecond, 5 * time.Millisecond}
			if fmt.Sprint(left) != fmt.Sprint(want) {
				t.Fatalf("time left per attempt = %v, want %v", left, want)
			}
			if elapsed := time.Since(start); elapsed != 50*time.Millisecond || res.Attempts != 2 || !res.BudgetExhausted {
				t.Fatalf("elapsed %v, Result = %+v", elapsed, res)
			}
		})
	})
}

func TestJitterUsesInjectedRand(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want []time.Duration // start offsets of the attempts
	}{
		{0, []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond}},    // 10·0.5, 20·0.5
		{0.5, []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond}}, // no change
		{0.75, []time.Duration{0, 12500 * time.Microsecond, 37500 * time.Microsecond}},
	} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			calls := 0
			r := retrybudget.New(retrybudget.WithRand(func() float64 { calls++; return tc.u }))
			f := &failing{fails: 2, err: fault.Transient(errIO)}
			res := r.Run(t.Context(), retrybudget.Budget{MaxAttempts: 3, Backoff: retrybudget.Backoff{Jitter: 0.5}}, f.attempt)
			if res.Err != nil || calls != 2 {
				t.Fatalf("Result = %+v, rand called %d times", res, calls)
			}
			for i, s := range f.starts {
				if got := s.Sub(start); got != tc.want[i] {
					t.Errorf("u=%v: attempt %d at +%v, want +%v", tc.u, i+1, got, tc.want[i])
				}
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	def := retrybudget.Backoff{}
	for _, tc := range []struct {
		name string
		b    retrybudget.Backoff
		n    int
		u    float64
		want time.Duration
	}{
		{"default n=1", def, 1, 0.5, 10 * ms},
		{"default n=2", def, 2, 0.5, 20 * ms},
		{"default n=3", def, 3, 0.5, 40 * ms},
		{"default n=4", def, 4, 0.5, 80 * ms},
		{"default n=5 capped", def, 5, 0.5, 100 * ms},
		{"default n=1000 capped", def, 1000, 0.5, 100 * ms},
		{"default n=maxint capped", def, int(^uint(0) >> 1), 0.5, 100 * ms},
		{"n=0 counts as 1", def, 0, 0.5, 10 * ms},
		{"no jitter ignores u", def, 2, 0, 20 * ms},
		{"custom", retrybudget.Backoff{Base: ms, Factor: 3, Max: time.Second}, 4, 0.5, 27 * ms},
		{"custom capped", retrybudget.Backoff{Base: ms, Factor: 3, Max: time.Second}, 8, 0.5, time.Second},
		{"factor one", retrybudget.Backoff{Base: 7 * ms, Factor: 1}, 9, 0.5, 7 * ms},
		{"factor below one", retrybudget.Backoff{Base: 8 * ms, Factor: 0.5}, 3, 0.5, 2 * ms},
		{"negative factor is default", retrybudget.Backoff{Factor: -2}, 2, 0.5, 20 * ms},
		{"base above max", retrybudget.Backoff{Base: time.Second, Max: 30 * ms}, 1, 0.5, 30 * ms},
		{"jitter low end", retrybudget.Backoff{Jitter: 0.2}, 2, 0, 16 * ms},
		{"jitter middle", retrybudget.Backoff{Jitter: 0.2}, 2, 0.5, 20 * ms},
		{"jitter quarter", retrybudget.Backoff{Jitter: 0.2}, 2, 0.25, 18 * ms},
		{"jitter applies after cap", retrybudget.Backoff{Jitter: 0.2}, 9, 0, 80 * ms},
		{"full jitter low end is zero", retrybudget.Backoff{Jitter: 1}, 3, 0, 0},
		{"jitter above one is one", retrybudget.Backoff{Jitter: 5}, 3, 0, 0},
		{"negative jitter is none", retrybudget.Backoff{Jitter: -1}, 3, 0, 40 * ms},
		{"u below range", retrybudget.Backoff{Jitter: 0.5}, 1, -3, 5 * ms},
		{"u above range", retrybudget.Backoff{Jitter: 0.5}, 1, 7, 15 * ms},
		{"huge max does not overflow", retrybudget.Backoff{Base: time.Duration(1 << 62), Max: time.Duration(1<<63 - 1), Jitter: 1}, 5, 0.999999, time.Duration(1<<63 - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Delay(tc.n, tc.u); got != tc.want {
				t.Fatalf("%+v.Delay(%d, %v) = %v, want %v", tc.b, tc.n, tc.u, got, tc.want)
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, jitter := range []float64{0.1, 0.2, 0.5, 1} {
		b := retrybudget.Backoff{Base: 3 * time.Millisecond, Factor: 1.5, Max: 50 * time.Millisecond, Jitter: jitter}
		for n := 1; n <= 12; n++ {
			nominal := retrybudget.Backoff{Base: b.Base, Factor: b.Factor, Max: b.Max}.Delay(n, 0)
			lo := time.Duration(float64(nominal) * (1 - jitter))
			hi := time.Duration(float64(nominal) * (1 + jitter))
			for range 200 {
				u := rng.Float64()
				if got := b.Delay(n, u); got < lo-1 || got > hi+1 || got < 0 {
					t.Fatalf("jitter %v: Delay(%d, %v) = %v outside [%v, %v]", jitter, n, u, got, lo, hi)
				}
			}
		}
	}
}

func TestCancelDuringAttempt(t *testing.T) {
	for _, honour := range []bool{true, false} {
		t.Run(fmt.Sprintf("attempt honours ctx=%v", honour), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(5*time.Millisecond, cancel)
				start := time.Now()
				calls := 0
				attempt := func(ctx context.Context, n int) error {
					calls++
					<-ctx.Done()
					if honour {
						return ctx.Err()
					}
					return fault.Transient(errIO) // claims transient, but the caller cancelled
				}
				res := retrybudget.New().Run(ctx, retrybudget.Budget{MaxAttempts: 5, Budget: time.Second}, attempt)
				if elapsed := time.Since(start); elapsed != 5*time.Millisecond {
					t.Fatalf("elapsed %v, want 5ms", elapsed)
				}
				if calls != 1 || res.Attempts != 1 || res.Kind != fault.KindCanceled || res.BudgetExhausted || res.AttemptsExhausted {
					t.Fatalf("Result = %+v, calls %d", res, calls)
				}
			})
		})
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		f := &failing{fails: 1000, err: fault.Transient(errIO)}
		b := retrybudget.Budget{MaxAttempts: 5, Backoff: retrybudget.Backoff{Base: time.Second, Max: time.Minute}}
		res := retrybudget.New().Run(ctx, b, f.attempt)
		if elapsed := time.Since(start); elapsed != 100*time.Millisecond {
			t.Fatalf("elapsed %v, want 100ms (backoff abandoned on cancel)", elapsed)
		}
		if res.Attempts != 1 || !errors.Is(res.Err, errIO) || res.Kind != fault.KindCanceled || res.BudgetExhausted || res.AttemptsExhausted {
			t.Fatalf("Result = %+v", res)
		}
	})
}

func TestCancelWithCauseStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		cause := errors.New("tier abandoned")
		calls := 0
		attempt := func(ctx context.Context, n int) error {
			calls++
			cancel(cause)
			return fault.Transient(errIO)
		}
		res := retrybudget.New().Run(ctx, retrybudget.Budget{MaxAttempts: 5}, attempt)
		// A cancellation with a cause of its own is not the caller's plain cancellation:
		// fault.ClassifyIn keeps the attempt's kind, but no further attempt starts.
		if calls != 1 || res.Attempts != 1 || res.Kind != fault.KindTransient || res.AttemptsExhausted {
			t.Fatalf("Result = %+v, calls %d", res, calls)
		}
	})
}

func TestDeadlinePassedBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Millisecond))
		defer cancel()
		called := false
		res := retrybudget.New().Run(ctx, retrybudget.Budget{MaxAttempts: 3, Budget: time.Second}, func(context.Context, int) error {
			called = true
			return nil
		})
		want := retrybudget.Result{Err: context.DeadlineExceeded, Kind: fault.KindTransient, BudgetExhausted: true}
		if called || res != want {
			t.Fatalf("Result = %+v (called %v), want %+v", res, called, want)
		}
	})
}

func TestCanceledBeforeRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	res := retrybudget.New().Run(ctx, retrybudget.Budget{MaxAttempts: 3}, func(context.Context, int) error {
		called = true
		return nil
	})
	want := retrybudget.Result{Err: context.Canceled, Kind: fault.KindCanceled}
	if called || res != want {
		t.Fatalf("Result = %+v (called %v), want %+v", res, called, want)
	}
}

func TestAttemptContextCarriesDeadline(t *testing.T) {
	t.Run("budget deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			want := time.Now().Add(200 * time.Millisecond)
			var got []time.Time
			f := &failing{fails: 2, err: fault.Transient(errIO)}
			res := retrybudget.New().Run(t.Context(), retrybudget.Budget{MaxAttempts: 3, Budget: 200 * time.Millisecond},
				func(ctx context.Context, n int) error {
					dl, ok := ctx.Deadline()
					if !ok {
						t.Errorf("attempt %d: no deadline", n)
					}
					got = append(got, dl)
					return f.attempt(ctx, n)
				})
			if res.Err != nil || len(got) != 3 {
				t.Fatalf("Result = %+v", res)
			}
			for i, dl := range got {
				if !dl.Equal(want) {
					t.Errorf("attempt %d: deadline %v, want %v", i+1, dl, want)
				}
			}
		})
	})
	t.Run("earlier ctx deadline is used as is", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			want := time.Now().Add(50 * time.Millisecond)
			parent, cancel := context.WithDeadline(t.Context(), want)
			defer cancel()
			res := retrybudget.New().Run(parent, retrybudget.Budget{MaxAttempts: 3, Budget: time.Second},
				func(ctx context.Context, n int) error {
					if ctx != parent {
						t.Errorf("attempt %d: ctx was derived although the caller's deadline is earlier", n)
					}
					if dl, _ := ctx.Deadline(); !dl.Equal(want) {
						t.Errorf("attempt %d: deadline %v, want %v", n, dl, want)
					}
					return nil
				})
			if res.Err != nil {
				t.Fatalf("Result = %+v", res)
			}
		})
	})
	t.Run("later ctx deadline is shortened", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			want := time.Now().Add(80 * time.Millisecond)
			parent, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			retrybudget.New().Run(parent, retrybudget.Budget{Budget: 80 * time.Millisecond}, func(ctx context.Context, n int) error {
				if dl, _ := ctx.Deadline(); !dl.Equal(want) {
					t.Errorf("deadline %v, want %v", dl, want)
				}
				return nil
			})
		})
	})
}

// TestFakeClock drives the budget and the backoff with a manually advanced clock.
func TestFakeClock(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	r := retrybudget.New(retrybudget.WithClock(fc), noJitter())

	var mu sync.Mutex
	var starts []time.Duration
	var deadlines []time.Time
	done := make(chan retrybudget.Result, 1)
	go func() {
		done <- r.Run(context.Background(), retrybudget.Budget{MaxAttempts: 4, Budget: 35 * time.Millisecond},
			func(ctx context.Context, n int) error {
				dl, _ := ctx.Deadline()
				mu.Lock()
				starts = append(starts, fc.Now().Sub(start))
				deadlines = append(deadlines, dl)
				mu.Unlock()
				return fault.Transient(errIO)
			})
	}()

	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Armed timers: the budget's deadline and one backoff sleep.
	for _, step := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond} {
		if err := fc.BlockUntil(wait, 2); err != nil {
			t.Fatalf("backoff timer never armed: %v", err)
		}
		fc.Advance(step)
	}
	// After attempt 3 (at +30ms) the next backoff (40ms) does not fit in the 5ms left.
	var res retrybudget.Result
	select {
	case res = <-done:
	case <-wait.Done():
		t.Fatal("Run did not return")
	}
	if res.Attempts != 3 || !res.BudgetExhausted || res.AttemptsExhausted || res.Kind != fault.KindTransient {
		t.Fatalf("Result = %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond}; fmt.Sprint(starts) != fmt.Sprint(want) {
		t.Fatalf("attempt starts %v, want %v", starts, want)
	}
	for i, dl := range deadlines {
		if !dl.Equal(start.Add(35 * time.Millisecond)) {
			t.Errorf("attempt %d: deadline %v", i+1, dl)
		}
	}
	if n := fc.Timers(); n != 0 {
		t.Fatalf("%d fake timers left armed", n)
	}
}

// TestFakeClockJumpPastDeadline advances the fake clock past the deadline in one step while
// Run sleeps in a backoff. Advance fires the backoff timer (+10ms) before the deadline
// (+35ms), so Run may or may not see the clock at +10ms and start attempt 2 before the
// deadline fires; either way no attempt starts at or after the deadline and the run ends
// with the budget exhausted.
func TestFakeClockJumpPastDeadline(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	r := retrybudget.New(retrybudget.WithClock(fc), noJitter())
	done := make(chan retrybudget.Result, 1)
	var starts []time.Duration // read after done delivers
	go func() {
		done <- r.Run(context.Background(), retrybudget.Budget{MaxAttempts: 4, Budget: 35 * time.Millisecond},
			func(ctx context.Context, n int) error {
				starts = append(starts, fc.Now().Sub(start))
				return fault.Transient(errIO)
			})
	}()
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.BlockUntil(wait, 2); err != nil {
		t.Fatalf("backoff timer never armed: %v", err)
	}
	fc.Advance(time.Second)
	select {
	case res := <-done:
		if res.Attempts != len(starts) || res.Attempts < 1 || res.Attempts > 2 || !errors.Is(res.Err, errIO) ||
			res.Kind != fault.KindTransient || !res.BudgetExhausted || res.AttemptsExhausted {
			t.Fatalf("Result = %+v, attempts started at %v", res, starts)
		}
		for i, s := range starts {
			if s >= 35*time.Millisecond {
				t.Fatalf("attempt %d started at +%v, after the deadline", i+1, s)
			}
		}
	case <-wait.Done():
		t.Fatal("Run did not return")
	}
}

// TestConcurrentUse shares one Runner, with a rand that is not safe for concurrent use,
// between goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jr := rand.New(rand.NewPCG(5, 6))
		r := retrybudget.New(retrybudget.WithRand(jr.Float64))
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				f := &failing{fails: i % 4, err: fault.Transient(errIO), work: time.Millisecond}
				res := r.Run(t.Context(), retrybudget.Budget{MaxAttempts: 4, Budget: time.Second,
					Backoff: retrybudget.Backoff{Jitter: 0.3}}, f.attempt)
				if res.Err != nil || res.Attempts != i%4+1 {
					t.Errorf("goroutine %d: Result = %+v", i, res)
				}
			})
		}
		wg.Wait()
	})
}

func TestZeroRunnerAndNilOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, r := range []*retrybudget.Runner{{}, retrybudget.New(nil, retrybudget.WithClock(nil), retrybudget.WithRand(nil))} {
			f := &failing{fails: 1, err: fault.Transient(errIO)}
			res := r.Run(t.Context(), retrybudget.Budget{MaxAttempts: 2, Backoff: retrybudget.Backoff{Jitter: 0.2}}, f.attempt)
			if res != (retrybudget.Result{Attempts: 2}) {
				t.Fatalf("Result = %+v", res)
			}
		}
	})
}

func TestOneAttemptAllocatesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	r := retrybudget.New()
	attempt := func(context.Context, int) error { return nil }
	for _, b := range []retrybudget.Budget{{MaxAttempts: 3}, {MaxAttempts: 3, Budget: 2 * time.Hour}} {
		if n := testing.AllocsPerRun(100, func() { r.Run(ctx, b, attempt) }); n != 0 {
			t.Errorf("budget %+v: %v allocs per successful run, want 0", b, n)
		}
	}
}

func ExampleRunner_Run() {
	r := retrybudget.New()
	b := retrybudget.Budget{
		MaxAttempts: 3,
		Budget:      time.Second,
		Backoff:     retrybudget.Backoff{Base: time.Millisecond},
	}

	// A transient failure is retried within the budget.
	res := r.Run(context.Background(), b, func(ctx context.Context, n int) error {
		if n < 3 {
			return fault.Transient(errors.New("connection reset"))
		}
		return nil
	})
	fmt.Println(res.Attempts, res.Err, res.Kind)

	// A permanent failure is not.
	res = r.Run(context.Background(), b, func(ctx context.Context, n int) error {
		return fault.Permanent(errors.New("bad config"))
	})
	fmt.Println(res.Attempts, res.Err, res.Kind)

	// Output:
	// 3 <nil> none
	// 1 bad config contract
}

func ExampleRunner_RunAfter() {
	r := retrybudget.New()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b := retrybudget.Budget{MaxAttempts: 3, Backoff: retrybudget.Backoff{Base: time.Millisecond}}
	attempt := func(ctx context.Context, n int) error {
		if n < 2 {
			return fault.Transient(errors.New("connection reset"))
		}
		return nil
	}

	// The caller makes the first attempt itself, where RunFrom would have (ctx not done,
	// its deadline not passed), and enters the runner only if it failed.
	res := retrybudget.Result{Attempts: 1}
	if err := attempt(ctx, 1); err != nil {
		res = r.RunAfter(ctx, b, attempt, err)
	}
	fmt.Println(res.Attempts, res.Err)

	// Output:
	// 2 <nil>
}

func ExampleRunner_RunAfterAt() {
	r := retrybudget.New()
	deadline := time.Now().Add(time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	b := retrybudget.Budget{MaxAttempts: 1}
	attempt := func(ctx context.Context, n int) error { return fault.Transient(errors.New("timeout")) }

	// The caller times its first attempt anyway: the runner decides from that end, not
	// from a clock read of its own, whether the budget had run out. Here the attempt is
	// taken to have ended past the deadline.
	err := attempt(ctx, 1)
	res := r.RunAfterAt(ctx, b, attempt, err, deadline.Add(time.Millisecond))
	fmt.Println(res.Attempts, res.AttemptsExhausted, res.BudgetExhausted)

	// Output:
	// 1 true true
}

func BenchmarkRunOneAttempt(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	r := retrybudget.New()
	budget := retrybudget.Budget{MaxAttempts: 3, Backoff: retrybudget.Backoff{Jitter: 0.2}}
	attempt := func(context.Context, int) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Run(ctx, budget, attempt); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

func BenchmarkRunRetry(b *testing.B) {
	r := retrybudget.New()
	budget := retrybudget.Budget{MaxAttempts: 3, Budget: time.Second, Backoff: retrybudget.Backoff{Base: time.Nanosecond, Jitter: 0.2}}
	errT := fault.Transient(errIO)
	attempt := func(_ context.Context, n int) error {
		if n == 1 {
			return errT
		}
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Run(context.Background(), budget, attempt); res.Attempts != 2 {
			b.Fatalf("Result = %+v", res)
		}
	}
}

// lazyDeadline reports a deadline that nothing enforces: the context is not cancelled at
// it (as a tier's context in the engine, until the engine takes the tier).
type lazyDeadline struct {
	context.Context
	deadline time.Time
}

func (c lazyDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// A run whose caller made the first attempt itself (RunAfter, and RunAfterAt with the time
// the attempt returned) ends as RunFrom's would: same result, same attempt times.
func TestRunAfterEqualsRunFrom(t *testing.T) {
	errT, errP := fault.Transient(errIO), fault.Permanent(errIO)
	for _, tc := range []struct {
		name     string
		max      int
		fails    int
		err      error
		work     time.Duration
		deadline time.Duration // the context's (0: none)
		lazy     bool          // the context reports its deadline but is not cancelled at it
	}{
		{name: "first attempt succeeds", max: 3, err: errT, deadline: time.Second},
		{name: "retried, then ok", max: 3, fails: 1, err: errT, deadline: time.Second},
		{name: "attempts used up", max: 3, fails: 5, err: errT, deadline: time.Second},
		{name: "one attempt allowed", max: 1, fails: 5, err: errT},
		{name: "not retryable", max: 3, fails: 5, err: errP, deadline: time.Second},
		{name: "first attempt runs to the deadline", max: 3, fails: 5, err: errT, work: 2 * time.Second, deadline: time.Second},
		{name: "no time left for the backoff", max: 3, fails: 5, err: errT, work: 995 * time.Millisecond, deadline: time.Second},
		{name: "no deadline", max: 4, fails: 2, err: errT},
		{name: "first attempt returns past a deadline nothing enforces", max: 3, fails: 5, err: errT, work: 1500 * time.Millisecond, deadline: time.Second, lazy: true},
		{name: "one attempt allowed, returns past a deadline nothing enforces", max: 1, fails: 5, err: errT, work: 1500 * time.Millisecond, deadline: time.Second, lazy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := retrybudget.Budget{MaxAttempts: tc.max}
			const (
				from = iota
				after
				afterAt
			)
			run := func(how int) (res retrybudget.Result, offsets []time.Duration) {
				synctest.Test(t, func(t *testing.T) {
					ctx := t.Context()
					switch {
					case tc.lazy:
						ctx = lazyDeadline{ctx, time.Now().Add(tc.deadline)}
					case tc.deadline > 0:
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, tc.deadline)
						defer cancel()
					}
					start := time.Now()
					f := &failing{fails: tc.fails, err: tc.err, work: tc.work}
					r := retrybudget.New(noJitter())
					switch how {
					case after:
						res = r.RunAfter(ctx, b, f.attempt, f.attempt(ctx, 1))
					case afterAt:
						err := f.attempt(ctx, 1)
						res = r.RunAfterAt(ctx, b, f.attempt, err, time.Now())
					default:
						res = r.RunFrom(ctx, start, b, f.attempt)
					}
					for _, s := range f.starts {
						offsets = append(offsets, s.Sub(start))
					}
				})
				return res, offsets
			}
			want, wantAt := run(from)
			for how, name := range map[int]string{after: "RunAfter", afterAt: "RunAfterAt"} {
				got, gotAt := run(how)
				if got != want || !slices.Equal(gotAt, wantAt) {
					t.Fatalf("%s: %+v, attempts at %v; RunFrom: %+v, attempts at %v", name, got, gotAt, want, wantAt)
				}
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Fatal("RunAfter with a Budget of its own did not panic")
		}
	}()
	retrybudget.New().RunAfter(context.Background(), retrybudget.Budget{Budget: time.Second}, func(context.Context, int) error { return nil }, errIO)
}
