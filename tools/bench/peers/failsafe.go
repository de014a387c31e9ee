package peers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"

	"github.com/cycled/cycled/fault"
)

// fsMod is a module of peer B with its composed policies.
type fsMod struct {
	Module
	key     string
	running atomic.Bool
	cb      circuitbreaker.CircuitBreaker[any]
	exe     failsafe.Executor[any]
	call    func(failsafe.Execution[any]) (any, error)
	cur     *fsRun // the run in progress (at most one: see running)
}

// fsRun is one module's run in one tick.
type fsRun struct {
	state    atomic.Int32
	status   string // busy, for a module not started
	v        any
	err      error
	attempts int
	start    time.Time
	end      time.Time
	fellBack bool
	fbErr    error // the error the fallback replaced
	fbSource string
	fbAge    time.Duration
}

// Failsafe is peer B: the tier orchestration of A (goroutine per module, WaitGroup,
// context.WithTimeout per tier), each module run through failsafe-go policies composed
// Fallback → CircuitBreaker → RetryPolicy → Timeout.
type Failsafe struct {
	tickState
	byTier [][]*fsMod
}

// isTransient is the retry policy's predicate: transient faults (a failsafe timeout included).
func isTransient(_ any, err error) bool {
	return err != nil && (errors.Is(err, timeout.ErrExceeded) || classify(err) == fault.KindTransient)
}

// NewFailsafe returns peer B for spec.
func NewFailsafe(spec Spec) *Failsafe {
	f := &Failsafe{tickState: newTickState(spec)}
	f.byTier = make([][]*fsMod, len(spec.Tiers))
	for _, m := range spec.Modules {
		t := &spec.Tiers[m.Tier]
		fm := &fsMod{Module: m, key: keyOf(m.Name)}
		cbb := circuitbreaker.NewBuilder[any]().
			HandleIf(func(_ any, err error) bool { return err != nil && classify(err) != fault.KindCanceled }).
			WithDelay(t.Cooldown).WithSuccessThreshold(uint(max(t.HalfOpenSuccesses, 1)))
		if thr := max(t.FailureThreshold, 1); thr <= 1024 {
			// Consecutive failed executions (a bitset of thr bits).
			cbb = cbb.WithFailureThreshold(uint(thr))
		} else {
			// A count-based threshold this large would allocate a thr-bit window per
			// breaker: "never opens" is a time-based threshold instead.
			cbb = cbb.WithFailureThresholdPeriod(uint(thr), time.Hour)
		}
		fm.cb = cbb.Build()
		rpb := retrypolicy.NewBuilder[any]().HandleIf(isTransient).WithMaxAttempts(max(t.MaxAttempts, 1)).ReturnLastFailure()
		if t.MaxAttempts > 1 {
			rpb = rpb.WithBackoffFactor(t.BackoffBase, max(t.BackoffMax, t.BackoffBase), max(t.BackoffFactor, 1))
			if t.BackoffJitter > 0 {
				rpb = rpb.WithJitterFactor(t.BackoffJitter)
			}
		}
		fb := fallback.NewWithFunc(func(exec failsafe.Execution[any]) (any, error) {
			r := fm.cur
			r.fellBack = true
			r.fbErr = exec.LastError()
			return f.serveLastGood(fm, r)
		})
		fm.exe = failsafe.With[any](fb, fm.cb, rpb.Build(), timeout.New[any](t.Budget))
		fm.call = func(ex failsafe.Execution[any]) (any, error) {
			fm.cur.attempts = ex.Attempts()
			return fm.Fn(ex.Context())
		}
		f.byTier[m.Tier] = append(f.byTier[m.Tier], fm)
	}
	return f
}

// serveLastGood is the fallback: the last-known-good value if younger than the TTL.
func (f *Failsafe) serveLastGood(m *fsMod, r *fsRun) (any, error) {
	now := time.Now()
	f.lgMu.Lock()
	e, ok := f.lastGood[m.key]
	f.lgMu.Unlock()
	if ok && now.Sub(e.at) < DefaultTTL {
		r.fbSource, r.fbAge = SourceLastGood, now.Sub(e.at)
		return e.v, nil
	}
	r.fbSource = SourceNone
	return nil, r.fbErr
}

// Tick runs one tick.
func (f *Failsafe) Tick(ctx context.Context) error {
	f.tick(func(ti int, s *Summary) { f.runTier(ctx, ti, s) })
	return nil
}

func (f *Failsafe) runTier(ctx context.Context, ti int, s *Summary) {
	t := &f.tiers[ti]
	mods := f.byTier[ti]
	tStart := time.Now()
	tctx, cancel := context.WithTimeout(ctx, t.Budget)
	deadline, _ := tctx.Deadline()
	res := make([]fsRun, len(mods))
	var wg sync.WaitGroup
	for j, m := range mods {
		r := &res[j]
		if m.running.Load() {
			r.status = StatusBusy
			r.state.Store(slotDone)
			continue
		}
		m.running.Store(true)
		m.cur = r
		wg.Add(1)
		go runFailsafe(tctx, m, r, &wg)
	}
	waitTier(tctx, &wg)
	cancel()
	tEnd := time.Now()
	tl := tierLine(s, ti, t, tStart, tEnd)

	var fresh []int // modules whose value goes to last-known-good
	for j, m := range mods {
		r := &res[j]
		ln := Line{Name: m.Name, Tier: ti}
		switch {
		case r.state.CompareAndSwap(slotRunning, slotAbandoned) || (r.status == "" && r.end.After(deadline)):
			// Still running at the deadline, or returned after it (the tier's goroutine was
			// late): the result is late and discarded.
			// The breaker records the failure when the module finally returns (failsafe's
			// Timeout waits for a synchronous execution).
			ln.Status, ln.Kind, ln.Err = StatusTimedOut, "transient", "abandoned at the tier deadline"
			ln.Latency = tEnd.Sub(tStart)
			tl.BudgetExhausted = true
			f.fallbackLine(s, &ln, m, tEnd)
		case r.status == StatusBusy:
			ln.Status, ln.Kind, ln.Err = StatusBusy, "transient", "still running from an earlier tick"
			m.cb.RecordFailure()
			f.fallbackLine(s, &ln, m, tEnd)
		case r.fellBack:
			ln.Attempts, ln.Latency = r.attempts, r.end.Sub(r.start)
			ln.Status = StatusFailed
			if errors.Is(r.fbErr, circuitbreaker.ErrOpen) {
				ln.Status, ln.Attempts = StatusOpen, 0
			} else {
				k := classify(r.fbErr)
				if isTransient(nil, r.fbErr) {
					k = fault.KindTransient
				}
				ln.Kind, ln.Err = k.String(), r.fbErr.Error()
			}
			if errors.Is(r.fbErr, context.DeadlineExceeded) || errors.Is(r.fbErr, timeout.ErrExceeded) {
				tl.BudgetExhausted = true
			}
			ln.Source, ln.Stale, ln.Age = r.fbSource, r.fbSource == SourceLastGood, r.fbAge
			if r.fbSource == SourceLastGood {
				s.DegradedKeys = append(s.DegradedKeys, m.key)
			} else {
				s.DegradedKeys = append(s.DegradedKeys, m.key+" (expired)")
			}
		default:
			ln.Attempts, ln.Latency = r.attempts, r.end.Sub(r.start)
			if r.err != nil { // a panic (the fallback handles every error)
				ln.Status, ln.Kind, ln.Err = StatusFailed, classify(r.err).String(), r.err.Error()
				f.fallbackLine(s, &ln, m, tEnd)
				break
			}
			ln.Status, ln.Source = StatusOK, SourceLive
			if r.attempts > 1 {
				ln.Status = StatusRetried
			}
			fresh = append(fresh, j)
		}
		if ln.Attempts > 1 {
			if s.RetryCounts == nil {
				s.RetryCounts = make(map[string]int)
			}
			s.RetryCounts[m.Name] = ln.Attempts - 1
		}
		ln.Circuit = m.cb.State().String()
		addLine(s, tl, ln)
	}
	if len(fresh) > 0 {
		f.lgMu.Lock()
		for _, j := range fresh {
			f.lastGood[mods[j].key] = lgEntry{v: res[j].v, at: res[j].end, tick: s.TickID}
		}
		f.lgMu.Unlock()
	}
}

// fallbackLine serves last-known-good on the line of a module the policies did not finish.
func (f *Failsafe) fallbackLine(s *Summary, ln *Line, m *fsMod, now time.Time) {
	f.lgMu.Lock()
	defer f.lgMu.Unlock()
	f.fallbackLocked(s, ln, m.key, now)
}

func runFailsafe(ctx context.Context, m *fsMod, r *fsRun, wg *sync.WaitGroup) {
	defer wg.Done()
	defer m.running.Store(false)
	r.start = time.Now()
	defer func() {
		if p := recover(); p != nil {
			r.err = fault.Internal(fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
			r.end = time.Now()
			r.state.CompareAndSwap(slotRunning, slotDone)
		}
	}()
	r.v, r.err = m.exe.WithContext(ctx).GetWithExecution(m.call)
	r.end = time.Now()
	if r.fellBack && r.fbSource == SourceLastGood {
		r.err = nil
	}
	r.state.CompareAndSwap(slotRunning, slotDone)
}
