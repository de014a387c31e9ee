package cycle

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/internal/ktimer"
	"github.com/cycled/cycled/tiers"
)

// emergencyState is the emergency state machine; guarded by tickMu.
type emergencyState struct {
	active    bool
	since     uint64
	reason    string
	latched   bool
	healthy   int
	endedTick uint64
}

// statusError is the error reported for a module the engine did not run to its end: busy,
// abandoned, refused by an open breaker, never started.
type statusError string

func (e statusError) Error() string { return string(e) }

const (
	errBusy         statusError = "still running from an earlier tick (ignored its context)"
	errAbandoned    statusError = "still running at the tier deadline: abandoned, its late result discarded"
	errOpenFail     statusError = "circuit breaker is open (on_open: fail)"
	errUnstarted    statusError = "not started before the tier deadline"
	errTickCanceled statusError = "not started: the tick was cancelled"
)

// statusUnstarted marks, until its tier is settled, a module never started before the
// tier's deadline; the summary reports it timed_out.
const statusUnstarted faultsummary.Status = "unstarted"

// Tick runs one tick now and returns its summary. It is refused with ErrNotStepMode while
// the scheduler runs on a period.
func (e *Engine) Tick(ctx context.Context) (*faultsummary.Summary, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if e.running.Load() && !e.StepMode() {
		return nil, ErrNotStepMode
	}
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	if e.closed.Load() {
		return nil, ErrClosed
	}
	return e.tickLocked(ctx, e.clock.Now()), nil
}

// ResetEmergency is the operator reset of a latched emergency: from the next tick on,
// emergency mode ends after recover_after healthy ticks.
func (e *Engine) ResetEmergency() { e.resetReq.Store(true) }

// Emergency returns the emergency state as of the latest tick.
func (e *Engine) Emergency() faultsummary.Emergency {
	if p := e.emView.Load(); p != nil {
		return *p
	}
	return faultsummary.Emergency{}
}

func (e *Engine) tickLocked(ctx context.Context, scheduled time.Time) *faultsummary.Summary {
	e.applyPending()
	st := e.active
	e.nextID++
	id := e.nextID
	e.curTick.Store(id)
	start := e.clock.Now()
	e.board.Begin(id, start)
	transitionsBefore := e.brTransitions.Load()
	if e.resetReq.Swap(false) && e.em.active && e.em.latched {
		e.em.latched = false
		e.em.healthy = 0
	}

	s := &faultsummary.Summary{
		Schema:            faultsummary.Schema,
		TickID:            id,
		ScheduledAt:       scheduled,
		StartedAt:         start,
		SkippedGridPoints: e.pendingGap,
		Finish:            faultsummary.Completed,
		Tiers:             make([]faultsummary.Tier, len(st.cfg.Tiers)),
	}
	tl := newTickLines(st, id, start, e.lines.take(len(st.lines)), e.lastExtras)
	if e.lastDegraded > 0 {
		// Failing modules tend to fail again: one allocation instead of a growing list.
		s.DegradedKeys = make([]string, 0, e.lastDegraded)
	}
	s.SetLines(tl)
	e.lines.keep(tl)
	e.pendingGap = 0
	clear(e.kinds)
	clear(e.errs)
	if lag := start.Sub(scheduled); lag > 0 {
		s.StartLagMs = blackboard.Millis(lag)
	}
	stop := false
	var stopReason string
	for ti := range st.cfg.Tiers {
		tier := &st.cfg.Tiers[ti]
		ts := &s.Tiers[ti]
		ts.Index, ts.Name, ts.BudgetMs = ti, tier.Name, blackboard.Millis(tier.Budget)
	}
	for ti := 0; ti < len(st.cfg.Tiers); ti++ {
		switch {
		case stop:
			e.skipTier(st, ti, s, tl, start, stopReason)
		case e.em.active && st.skip[ti]:
			e.skipTier(st, ti, s, tl, start, "emergency mode")
		default:
			// The runners may go through clean tiers on their own (see segment): ti is
			// then the tier that ended the segment, the first one with work left here.
			var out tierOutcome
			out, ti = e.runTier(ctx, st, ti, id, start, s, tl)
			tier := &st.cfg.Tiers[ti]
			if ti == 0 {
				e.evalEmergency(st, id, out.safetyFailed, safetyHealthy(tl, st.tierMods[0]), out.safetyReason)
			}
			switch {
			case out.abort:
				s.Finish = faultsummary.ShortCircuited
				stop, stopReason = true, "short-circuited by "+out.abortBy
			case out.failed && ti > 0:
				s.Finish = faultsummary.Failed
				stop, stopReason = true, "tier "+tier.Name+" failed"
			}
		}
	}
	end := e.clock.Now()
	s.FinishedAt = end
	s.WallMs = blackboard.Millis(end.Sub(start))
	if p := st.cfg.Period; p > 0 && end.Sub(scheduled) > p {
		s.Overrun = true
	}
	s.EmergencyMode = e.em.active
	s.Emergency = faultsummary.Emergency{Active: e.em.active, SinceTick: e.em.since, Reason: e.em.reason,
		Latched: e.em.active && e.em.latched, HealthyTicks: e.em.healthy, EndedTick: e.em.endedTick}
	em := s.Emergency
	e.emView.Store(&em)

	// Circuits after this tick. Lines carry the state seen at admission; if any breaker
	// moved during the tick (a failure, a probe, a shared breaker) they are read again here.
	// Lines and lists come from one snapshot of the non-closed breakers, so that a
	// breaker half-opened meanwhile by a reader (GET /breakers) cannot make them disagree.
	snap := e.circuitSnapshot()
	if e.brTransitions.Load() != transitionsBefore || len(snap) > 0 {
		for i := range tl.recs {
			if stt, ok := snap[st.lines[i].brName]; ok {
				tl.recs[i].circuit = stt
			} else {
				tl.recs[i].circuit = breaker.Closed
			}
		}
	}
	for name, stt := range snap {
		if stt == breaker.Open {
			s.OpenCircuits = append(s.OpenCircuits, name)
		} else {
			s.HalfOpenCircuits = append(s.HalfOpenCircuits, name)
		}
	}
	slices.Sort(s.OpenCircuits)
	slices.Sort(s.HalfOpenCircuits)
	s.Normalize()
	s.OverallSeverity = s.ComputeSeverity()
	e.lastExtras, e.lastDegraded = len(tl.ex), len(s.DegradedKeys)
	s.RunID, s.Generation = e.ident.RunID, st.version
	if e.ident.Annotate != nil {
		e.ident.Annotate(s)
	}

	e.history.Append(s)
	e.hub.Publish(faultsummary.Event{Type: faultsummary.EventTick, Summary: s})
	for _, h := range e.hooks {
		if h.OnModule != nil {
			for i, rt := range st.lines {
				r := &tl.recs[i]
				h.OnModule(ModuleEvent{TickID: id, Module: rt.name, Tier: st.cfg.Tiers[rt.planned.TierIndex].Name,
					Status: lineStatuses[r.status], Attempts: int(r.attempts),
					Latency: r.latency, Kind: e.kinds[i], Err: e.errs[i]})
			}
		}
		if h.OnTick != nil {
			h.OnTick(s)
		}
	}
	if e.running.Load() {
		e.lines.request(len(st.lines)) // for the next scheduled tick, off its critical path
	}
	return s
}

func (e *Engine) skipTier(st *state, ti int, s *faultsummary.Summary, tl *tickLines, tickStart time.Time, reason string) {
	s.Tiers[ti].Status = faultsummary.TierSkipped
	s.Tiers[ti].Reason = reason
	for _, rt := range st.tierMods[ti] {
		ln := tl.init(rt)
		ln.status = lsSkipped
		// An emergency-only module outside emergency mode is not a degradation.
		e.serveFallback(s, tl, rt, ti, tickStart, !(rt.spec.Emergency && !e.em.active), false)
	}
}

// serveFallback fills the served entry of a module that produced no value this tick and
// writes it on the board. degraded tags it stale and lists it in degraded_keys; failed in
// the safety tier serves nothing (fail closed).
func (e *Engine) serveFallback(s *faultsummary.Summary, tl *tickLines, rt *modRT, ti int, tickStart time.Time, degraded, failed bool) {
	var ent blackboard.Entry
	if ti == 0 && failed {
		ent = blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None}
	} else {
		var ok bool
		ent, ok = blackboard.FromLastGood(rt.lslot.Get(tickStart))
		if !ok {
			ent = blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None}
		}
		if !degraded && ent.Source == blackboard.LastGood {
			ent.Stale = false
		}
	}
	x := tl.extra(rt.idx)
	x.hasServed, x.usingFallback = true, ent.Source == blackboard.LastGood
	x.served = faultsummary.Served{Key: rt.key, Source: ent.Source, Stale: ent.Stale, Expired: ent.Expired,
		AgeMs: blackboard.Millis(ent.Age), Value: ent.Value, Written: ent.Written, WrittenTick: ent.TickID, Seq: ent.Seq}
	// A module that had nothing to do (not due, emergency-only outside emergency) is not a
	// degradation, also when its last value has expired meanwhile: the served entry says
	// expired, degraded_keys does not list it (README, "Statuses").
	if degraded {
		switch {
		case ent.Expired:
			s.DegradedKeys = append(s.DegradedKeys, tl.st.degradedKey(rt, true))
		case ent.Source == blackboard.LastGood:
			s.DegradedKeys = append(s.DegradedKeys, rt.key)
		case failed || degraded:
			s.DegradedKeys = append(s.DegradedKeys, tl.st.degradedKey(rt, false))
		}
	}
	e.board.Set(rt.bslot, ti, ent)
}

type tierOutcome struct {
	failed       bool
	abort        bool
	abortBy      string
	safetyFailed bool
	safetyReason string
}

func (e *Engine) runTier(ctx context.Context, st *state, ti int, id uint64, tickStart time.Time, s *faultsummary.Summary, tl *tickLines) (tierOutcome, int) {
	seg := &segment{st: st, ctx: ctx, s: s, tl: tl, tick: id, tickStart: tickStart, emergency: e.em.active, done: make(chan struct{})}
	now := e.clock.Now()
	if st.cfg.Timing == Precise && e.maySpin(now) {
		seg.margin = st.cfg.PreciseMargin
	}
	if sp := seg.spins(e); e.pool.spin.Load() != sp {
		e.pool.spin.Store(sp)
	}
	first := e.newTierRun(seg, ti, now)
	first.pending.Store(int32(len(first.mods)) + 1) // +1 held by the engine until the runners are woken

	// The runners admit, run and commit the modules; what they leave as exceptions
	// (failures, fallbacks, retries) is handled once the tier is over (settle).
	if len(first.mods) > 0 {
		// One runner to start with: it wakes more if the tier is long enough to be worth it.
		first.runners.Store(1)
		e.pool.wake(first, 1, false)
	}
	if nx := first.finish(1, len(first.mods) == 0); nx != nil {
		// A first tier without modules closed at once and started the next tier of the
		// segment, as a runner would have (no segment of its own): that tier needs a runner.
		e.pool.wake(nx, 1, false)
	}
	if n := len(first.mods); n > 0 && n <= smallTier {
		// The runner just woken waits in this core's run-next slot. Yielding once lets it
		// run a small tier to its end before the engine arms a timer and parks: the engine
		// then finds the tier done, and the runner had no one to wake: about 0.7 µs less
		// per tier (five one-module tiers: 18.2 → 14.5 µs a tick).
		runtime.Gosched()
	}
	tr, timedOut := e.wait(seg, first)
	if !timedOut {
		return seg.out, tr.tier // the goroutine that ended it settled it
	}
	tr.ctx.expire() // the modules still running see their deadline
	out, _ := tr.settle(tr.settleAtDeadline(), true)
	return out, tr.tier
}

// settle handles what the runs of tr left as exceptions (failures, fallbacks, retry
// counts, late modules) and fills the tier's line. late are the modules the engine found
// still running or never started when it took the tier at its deadline (timedOut). The
// goroutine that closes the tier settles it: the one that finished its last module (a
// runner may then go on to the next tier, see tierRun.ended), or the engine when it takes
// the tier at its deadline. It returns the tier's outcome and the time the tier ended.
func (tr *tierRun) settle(late []int32, timedOut bool) (tierOutcome, time.Time) {
	var out tierOutcome
	e, seg := tr.e, tr.seg
	s, tl, st, ti, id, tickStart := seg.s, seg.tl, seg.st, tr.tier, seg.tick, seg.tickStart
	mods := tr.mods
	tier := &st.cfg.Tiers[ti]
	ts := &s.Tiers[ti]
	tr.ctx.stop()
	tStart, tEnd := tr.start, e.clock.Now()
	if tr.budgetExhausted.Load() {
		ts.BudgetExhausted = true
	}

	exc := tr.exceptions(late)
	slices.Sort(exc)
	for _, j := range exc {
		rt := mods[j]
		i := rt.idx
		ln := &tl.recs[i]
		// The runners left the fault in kinds and errs; the line takes it from there.
		ln.kind = e.kinds[i]
		var errText string
		if err := e.errs[i]; err != nil {
			errText = err.Error()
			tl.extra(i).err = errText
		}
		if ln.attempts > 1 {
			if s.RetryCounts == nil {
				s.RetryCounts = make(map[string]int)
			}
			s.RetryCounts[rt.name] = int(ln.attempts) - 1
		}
		var failedNow bool
		switch ln.status {
		case lsSkipped, lsNotDue:
			e.serveFallback(s, tl, rt, ti, tickStart, false, false)
			continue
		case lsRetried, lsProbeOK:
			continue // success: the retry count is all there is to do
		case lsBusy:
			failedNow = true
			// An abort policy's failures record nothing on the breaker (DESIGN, step 6).
			if p := rt.br.Acquire(); p.Allowed() && rt.planned.Policy != tiers.Abort {
				rt.br.Failure(p, fault.KindTransient)
			} else {
				rt.br.Release(p)
			}
			e.serveFallback(s, tl, rt, ti, tickStart, true, true)
		case lsOpen:
			failedNow = rt.spec.OnOpen == tiers.Fail || ti == 0
			e.serveFallback(s, tl, rt, ti, tickStart, true, true)
		case lsUnstarted:
			// The runners were all stuck: the module was never started before the deadline.
			ln.status = lsTimedOut
			rt.br.Release(rt.w.permit)
			failedNow = rt.planned.Policy != tiers.Abort
			e.serveFallback(s, tl, rt, ti, tickStart, true, true)
		case lsTimedOut:
			// Abandoned: the module ignored its context. Its late result is discarded.
			ln.latency = tEnd.Sub(tStart)
			failedNow = rt.planned.Policy != tiers.Abort
			if failedNow {
				rt.br.Failure(rt.w.permit, fault.KindTransient)
			} else {
				rt.br.Release(rt.w.permit)
				out.abort, out.abortBy = true, rt.name
			}
			e.serveFallback(s, tl, rt, ti, tickStart, true, true)
			for _, h := range e.hooks {
				if h.OnAbandon != nil {
					h.OnAbandon(rt.name, id)
				}
			}
		default: // ran and did not succeed: failed, probe_failed, or ok with a control kind
			kind, p := e.kinds[i], rt.w.permit
			switch {
			case kind == fault.KindControl:
				rt.br.Release(p)
				e.serveFallback(s, tl, rt, ti, tickStart, false, false)
				continue
			case rt.planned.Policy == tiers.Abort:
				rt.br.Release(p)
				out.abort, out.abortBy = true, rt.name
			case kind == fault.KindCanceled:
				rt.br.Release(p)
			default:
				rt.br.Failure(p, kind)
				failedNow = true
			}
			e.serveFallback(s, tl, rt, ti, tickStart, true, true)
		}
		if failedNow {
			switch rt.planned.Policy {
			case tiers.FailFast:
				out.failed = true
			case tiers.Abort:
				out.abort, out.abortBy = true, rt.name
			}
			if ti == 0 && rt.planned.Policy != tiers.Abort && !out.safetyFailed {
				out.safetyFailed = true
				out.safetyReason = rt.name + ": " + string(lineStatuses[ln.status])
				if errText != "" {
					out.safetyReason += ": " + errText
				}
			}
		}
	}

	ts.ElapsedMs = blackboard.Millis(tEnd.Sub(tStart))
	if timedOut {
		ts.BudgetExhausted = true
	}
	if ts.BudgetExhausted {
		s.BudgetViolations = append(s.BudgetViolations, tier.Name)
	}
	ts.Status = faultsummary.TierOK
	if out.failed {
		ts.Status = faultsummary.TierFailed
	} else {
		for _, j := range exc {
			if !tl.recs[mods[j].idx].status.nominal() {
				ts.Status = faultsummary.TierDegraded
			}
		}
	}
	return out, tEnd
}

// kernelMargin is the last stretch of a coarse deadline wait that the engine sleeps on the
// kernel's timer (see kernelTimer). It covers how late a Go timer wakes: up to a
// millisecond for the runtime's millisecond sleeps, plus two of the kernel's wake-ups.
const kernelMargin = 2 * time.Millisecond

// kernelTimer returns the timer that finishes a coarse deadline wait, made on first need;
// nil where there is none: not Linux, a clock other than the real one, or a virtual one
// (testing/synctest). The engine then waits on Go timers alone, as it did before.
//
// Why: Go's timers wake up to a millisecond late (see package ktimer), and how late depends
// on when the runtime last went to sleep, which the runners and modules' goroutines move
// about. In the deadline benchmark (BENCHMARKS.md, "Deadline adherence") a tier whose
// module ignores its context was taken 0.40–0.70 ms past its 50 ms budget at the median on
// Go timers alone, against 0.33–0.45 ms for plain Go's context.WithTimeout; finishing on a
// timerfd, 0.10–0.16 ms. It costs a system call to arm and one to disarm, and only waits
// that come within kernelMargin of their deadline pay them.
func (e *Engine) kernelTimer() *ktimer.Timer {
	if e.kt != nil || !e.mayKernelTimer() {
		return e.kt
	}
	kt, err := ktimer.New(e.clock.Now)
	if err != nil {
		e.ktNone = true // not an error to report: the Go timers still keep the deadline
		return nil
	}
	e.kt = kt
	return kt
}

// maySpin reports whether the engine may spin for a wait that now starts, as precise timing
// does: only on the real clock, and not inside a testing/synctest bubble, whose time stands
// still while a goroutine spins, so a spin for a deadline would never end (clock.RealTime).
// There precise timing waits as coarse timing does.
func (e *Engine) maySpin(now time.Time) bool { return clock.RealTime(e.clock, now) }

// mayKernelTimer reports whether the engine has a kernel timer or may make one: the clock
// is the real one, the system has them, and none failed (or was refused) before.
func (e *Engine) mayKernelTimer() bool { return e.realClock && ktimer.Supported && !e.ktNone }

// kernelWait sleeps until at, the end of a coarse wait, on the kernel timer, or until the
// segment hands a tier back (ended). slept is false if there is no kernel timer to sleep
// on: the caller then waits on its Go timer.
func (e *Engine) kernelWait(seg *segment, at time.Time) (slept, ended bool) {
	kt := e.kernelTimer()
	if kt == nil {
		return false, false
	}
	if kt.ArmAt(at) != nil {
		e.dropKernelTimer()
		return false, false
	}
	select {
	case <-seg.done:
		kt.Disarm()
		return true, true
	case _, ok := <-kt.C():
		if !ok {
			e.dropKernelTimer()
		}
		return true, false
	}
}

// dropKernelTimer releases the kernel timer (it failed, or the engine is closed); the
// engine waits on Go timers alone from then on.
func (e *Engine) dropKernelTimer() {
	e.kt.Close()
	e.kt, e.ktNone = nil, true
}

// smallTier is the most modules a tier may have for the engine to yield to its runner
// before waiting (see runTier).
const smallTier = 16

// minBudgetAfter returns the shortest budget of the tiers after ti that the segment
// could still start (ok=false: none, the segment cannot go on).
func (seg *segment) minBudgetAfter(ti int) (time.Duration, bool) {
	if seg.emergency {
		return 0, false
	}
	ts := seg.st.cfg.Tiers[ti+1:]
	if len(ts) == 0 {
		return 0, false
	}
	b := ts[0].Budget
	for _, t := range ts[1:] {
		b = min(b, t.Budget)
	}
	return b, true
}

// wait blocks until the segment hands a tier back (it returns that tier, timedOut false)
// or the deadline of the tier in flight passes before it ends (it returns that tier,
// taken: timedOut true). While modules of the first tier still wait for admission, the
// stall check (tierRun.watchStall) wakes more runners if the tier makes no progress (a
// fast module blocked); runners that start a later tier arm it for theirs.
func (e *Engine) wait(seg *segment, first *tierRun) (tr *tierRun, timedOut bool) {
	select {
	case <-seg.done:
		return seg.end, false
	default:
	}
	precise := seg.margin > 0
	now := e.clock.Now()
	first.watchStall(now, seg.margin)
	defer func() { e.stall.stop(seg.cur.Load(), false) }()
	spin := false // spin before parking (see spinWait): once, and only after a short wait
	if seg.spins(e) {
		spin = e.lastWait < engineSpin
		start := now
		defer func() { e.lastWait = e.clock.Now().Sub(start) }()
	}
	for {
		cur := seg.cur.Load()
		d := cur.deadline.Sub(now) - seg.margin
		// A runner may go on to a later tier with an earlier deadline while the engine
		// sleeps; such a tier starts after now, so its deadline is at least now plus its
		// budget. Waking by then at the latest, the engine never sleeps past it.
		if b, ok := seg.minBudgetAfter(cur.tier); ok && d > b {
			d = b
		}
		if d > 0 && !precise && e.mayKernelTimer() {
			if d > kernelMargin {
				d -= kernelMargin // the Go timer's part, ending kernelMargin early
			} else if slept, ended := e.kernelWait(seg, now.Add(d)); ended {
				return seg.end, false
			} else if slept {
				now = e.clock.Now()
				continue // early for a stray signal: look again
			}
		}
		if d > 0 {
			if e.timer == nil {
				e.timer = e.clock.NewTimer(d)
			} else {
				e.timer.Reset(d)
			}
			if spin {
				spin = false
				if e.spinWait(seg, now, d) {
					e.timer.Stop() // a channel timer: nothing to drain since Go 1.23
					return seg.end, false
				}
			}
			select {
			case <-seg.done:
				if !e.timer.Stop() {
					select {
					case <-e.timer.C():
					default:
					}
				}
				return seg.end, false
			case <-e.timer.C():
			}
			now = e.clock.Now()
			continue // the segment may have moved on to a later tier meanwhile
		}
		if precise {
			for seg.cur.Load() == cur && e.clock.Now().Before(cur.deadline) {
				select {
				case <-seg.done:
					return seg.end, false
				default:
				}
				runtime.Gosched()
			}
		}
		select {
		case <-seg.done:
			return seg.end, false
		default:
		}
		if seg.cur.Load() == cur && cur.owner.CompareAndSwap(tierOpen, tierTaken) {
			return cur, true
		}
		// The tier ended just now: its runner is starting the next one or handing it back.
		runtime.Gosched()
		now = e.clock.Now()
	}
}

// spinWait polls for the segment to hand a tier back for up to engineSpin from now, or d
// if that is sooner, yielding the processor between polls (runtime.Gosched), and reports
// whether it did. The runner that ends a segment wakes an engine parked on it; with
// another P idle, that readies the engine on an idle thread, which here cost the runner
// 1–11 µs of system call (a wake-up across vCPUs; the figure depends on the host) before
// the engine could run. An engine that polls is woken by no one: it runs on the other P,
// or waits in the global run queue until the runner yields its own.
//
// That wait has no bound of its own: a module that keeps the runner's P busy while
// ignoring its context (the other P asleep) would hold the engine until the runtime
// preempts it, 10 ms on. The engine's timer is no help there, as a channel timer is kept
// only while a goroutine blocks on it; so a timer with a function (always kept) falls
// due with it, d from now, when the engine would have woken had it parked: its firing
// takes an idle P, which then runs the engine from the run queue.
func (e *Engine) spinWait(seg *segment, now time.Time, d time.Duration) bool {
	if e.spinNet == nil {
		e.spinNet = e.clock.AfterFunc(d, func() {})
	} else {
		e.spinNet.Reset(d)
	}
	defer e.spinNet.Stop()
	_, _, ended, _ := poll(e.clock, seg.done, now, min(d, engineSpin))
	return ended
}

// safetyHealthy reports whether every safety module that was due succeeded: the ticks
// that count towards leaving emergency mode.
func safetyHealthy(tl *tickLines, mods []*modRT) bool {
	for _, rt := range mods {
		if !tl.recs[rt.idx].status.nominal() {
			return false
		}
	}
	return true
}

func (e *Engine) evalEmergency(st *state, id uint64, failed, healthy bool, reason string) {
	em := &e.em
	now := e.clock.Now()
	if !em.active {
		if failed {
			*em = emergencyState{active: true, since: id, reason: reason, latched: st.cfg.Emergency.Latch, endedTick: em.endedTick}
			e.emergencyEvent(faultsummary.EmergencyEvent{Entered: true, TickID: id, Reason: reason, Latched: em.latched, At: now})
		}
		return
	}
	if failed || !healthy {
		em.healthy = 0
		if failed && st.cfg.Emergency.Latch {
			// A reset acknowledges the emergency only for a safety tier that then stays
			// healthy: a failure after it latches the emergency again (README, "Emergency").
			em.latched = true
		}
		return
	}
	em.healthy++
	if !em.latched && em.healthy >= st.cfg.Emergency.RecoverAfter {
		em.active = false
		em.endedTick = id
		e.emergencyEvent(faultsummary.EmergencyEvent{Entered: false, TickID: id, Reason: em.reason, At: now})
	}
}

func (e *Engine) emergencyEvent(ev faultsummary.EmergencyEvent) {
	e.hub.Publish(faultsummary.Event{Type: faultsummary.EventEmergency, Emergency: &ev})
	for _, h := range e.hooks {
		if h.OnEmergency != nil {
			h.OnEmergency(ev)
		}
	}
}
