package cycle

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/internal/ktimer"
)

// Tick runs one tick now and returns its summary. It is refused with ErrNotStepMode while
// the scheduler runs on a period, and with ErrNotAdmitted when the gate refuses it.
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
	if s := e.tickLocked(ctx, e.clock.Now()); s != nil {
		return s, nil
	}
	return nil, ErrNotAdmitted
}

// ResetEmergency is the operator reset of a latched emergency: from the next tick on,
// emergency mode ends after recover_after healthy ticks.
func (e *Engine) ResetEmergency() { e.resetReq.Store(true) }

// Emergency returns the emergency state as of the latest tick, as the tick's summary
// carries it.
func (e *Engine) Emergency() faultsummary.Emergency {
	if p := e.emView.Load(); p != nil {
		return p.Emergency
	}
	return faultsummary.Emergency{}
}

// EmergencyStatus returns the emergency episode as of the latest tick (the current one,
// else the last one), and the one before it.
func (e *Engine) EmergencyStatus() faultsummary.EmergencyStatus {
	p := e.emView.Load()
	if p == nil {
		return faultsummary.EmergencyStatus{}
	}
	st := *p
	if st.Active {
		st.EndedTick = 0 // that of the previous episode, under Previous
	}
	return st
}

// tickLocked runs one tick scheduled at scheduled; the caller holds tickMu.
func (e *Engine) tickLocked(ctx context.Context, scheduled time.Time) *faultsummary.Summary {
	e.applyPending()
	st := e.active
	start := e.clock.Now()
	id, epoch, ok := e.admit(start)
	if !ok {
		return nil // refused by the gate: nothing started
	}
	e.nextID = id
	e.curTick.Store(id)
	e.board.Begin(id, start)
	if r := st.resil; r != nil {
		r.begin(start)
	}
	transitionsBefore := e.circ.ver.Load()
	if e.resetReq.Swap(false) {
		e.em = e.em.Reset()
	}
	s, tl := e.newSummary(st, id, scheduled, start)
	e.beginGuards(st, s)
	if e.async.forSt != st {
		e.syncAsync(st)
	}
	if e.async.ctx != nil {
		e.collectAsync(s)
	}
	s.Epoch = epoch
	e.runTiers(ctx, st, s, tl)
	end := e.clock.Now()
	s.FinishedAt = end
	s.WallMs = blackboard.Millis(end.Sub(start))
	if p := st.cfg.Period; p > 0 && end.Sub(scheduled) > p {
		s.Overrun = true
	}
	e.endGuards(st, s, end)
	s.EmergencyMode = e.em.Active
	s.Emergency = faultsummary.Emergency{Active: e.em.Active, SinceTick: e.em.Since, Reason: e.em.Reason,
		Latched: e.em.Active && e.em.Latched, HealthyTicks: e.em.Healthy, EndedTick: e.em.EndedTick}
	e.emView.Store(&faultsummary.EmergencyStatus{Emergency: s.Emergency, Previous: e.emPrev})
	e.circuits(st, s, tl, transitionsBefore)
	if r := st.resil; r != nil {
		s.RetryBudgetExhausted = r.exhausted()
	}
	e.lastExtras, e.lastServed, e.lastDegraded = len(tl.ex), len(tl.fb), len(s.DegradedKeys)
	tl.ex, s.DegradedKeys = e.extras.settle(tl.ex), e.keys.settle(s.DegradedKeys)
	s.Normalize()
	s.OverallSeverity = s.ComputeSeverity()
	e.publishTick(st, s, tl)
	e.startAsync(id)
	if e.running.Load() {
		e.lines.request(len(st.lines)) // for the next scheduled tick, off its critical path
	}
	return s
}

// newSummary returns the summary of tick id, its tiers named, and its module lines.
func (e *Engine) newSummary(st *state, id uint64, scheduled, start time.Time) (*faultsummary.Summary, *tickLines) {
	s := &faultsummary.Summary{
		Schema:            faultsummary.Schema,
		TickID:            id,
		ScheduledAt:       scheduled,
		StartedAt:         start,
		SkippedGridPoints: e.pendingGap,
		Finish:            faultsummary.Completed,
		Tiers:             make([]faultsummary.Tier, len(st.cfg.Tiers)),
	}
	tl := newTickLines(st, id, start, e.lines.take(len(st.lines)), e.lastExtras, e.lastServed)
	tl.ex = e.extras.start()
	if s.DegradedKeys = e.keys.start(); s.DegradedKeys == nil && e.lastDegraded > 0 {
		// Failing modules tend to fail again: one allocation instead of a growing list.
		s.DegradedKeys = make([]string, 0, e.lastDegraded)
	}
	s.SetLines(tl)
	e.lines.keep(tl)
	e.pendingGap = 0
	if lag := start.Sub(scheduled); lag > 0 {
		s.StartLagMs = blackboard.Millis(lag)
	}
	for ti := range st.cfg.Tiers {
		tier := &st.cfg.Tiers[ti]
		ts := &s.Tiers[ti]
		ts.Index, ts.Name, ts.BudgetMs = ti, tier.Name, blackboard.Millis(tier.Budget)
	}
	return s, tl
}

// runTiers runs the tiers of the tick in order, skipping those decide.SkipTier names, and
// moves the emergency state machine on the safety tier's result.
func (e *Engine) runTiers(ctx context.Context, st *state, s *faultsummary.Summary, tl *tickLines) {
	var stop string // why the rest of the tick is skipped, once it is
	for ti := 0; ti < len(st.cfg.Tiers); ti++ {
		if reason, skip := decide.SkipTier(stop, e.em.Active, st.skip[ti]); skip {
			e.skipTier(st, ti, s, tl, s.StartedAt, reason)
			continue
		}
		// The runners may go through clean tiers on their own (see segment): ti is then
		// the tier that ended the segment, the first one with work left here.
		var out tierOutcome
		out, ti = e.runTier(ctx, st, ti, s.TickID, s.StartedAt, s, tl)
		switch {
		case ti == 0 && e.guard.startup.Starting:
			stop = e.evalStartup(st, s, tl, out) // no emergency while starting
		case ti == 0:
			e.evalEmergency(st, s.TickID, out)
		}
		if fin, ok := out.Stop(ti); ok {
			s.Finish = fin
			stop = "tier " + st.cfg.Tiers[ti].Name + " failed"
			if out.Aborted {
				stop = "short-circuited by " + st.tierMods[ti][out.AbortBy].name
			}
		}
	}
}

// circuits sets the circuits after this tick: the summary's lists, and each line's state.
// Lines carry the state seen at admission; if any breaker moved during the tick (a
// failure, a probe, a shared breaker) they are read again here. Lines and lists come from
// one snapshot of the breakers not closed, so that a breaker half-opened meanwhile by a
// reader (GET /breakers) cannot make them disagree.
func (e *Engine) circuits(st *state, s *faultsummary.Summary, tl *tickLines, transitionsBefore uint64) {
	ver, snap, open, half := e.circ.snapshot()
	s.OpenCircuits, s.HalfOpenCircuits = open, half
	tl.kver = st.keptVer
	if tl.steady = ver == transitionsBefore; tl.steady {
		return
	}
	for i := range tl.recs {
		if stt, ok := snap[st.lines[i].breakerName()]; ok {
			tl.recs[i].circuit = stt
		} else {
			tl.recs[i].circuit = breaker.Closed
		}
	}
}

// publishTick appends the summary to the history and publishes it, after its module
// events.
func (e *Engine) publishTick(st *state, s *faultsummary.Summary, tl *tickLines) {
	s.RunID, s.Generation = e.ident.RunID, st.version
	if e.ident.Annotate != nil {
		e.ident.Annotate(s)
	}
	e.history.Append(s)
	e.emit(event{kind: evTick, tick: s.TickID, summary: s, st: st, lines: tl})
}

// tierOutcome is a settled tier's result, with the reason a safety failure gives.
type tierOutcome struct {
	decide.TierResult
	safetyReason string
}

func (e *Engine) runTier(ctx context.Context, st *state, ti int, id uint64, tickStart time.Time, s *faultsummary.Summary, tl *tickLines) (tierOutcome, int) {
	seg := &segment{st: st, ctx: ctx, s: s, tl: tl, tick: id, tickStart: tickStart, emergency: e.em.Active, done: make(chan struct{}),
		starting: e.guard.startup.Starting, shed: e.guard.shedSet}
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
		// then finds the tier done, and the runner has no one to wake (BenchmarkTick N=5).
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

// settle judges the modules tr left as exceptions (failures, refusals, fallbacks, retries,
// late modules) and fills the tier's line. late are the modules the engine found still
// running or never started when it took the tier at its deadline (timedOut). The
// goroutine that closes the tier settles it: the one that finished its last module (a
// runner may then go on to the next tier, see tierRun.ended), or the engine when it takes
// the tier at its deadline. It returns the tier's outcome and the time the tier ended.
func (tr *tierRun) settle(late []int32, timedOut bool) (tierOutcome, time.Time) {
	var out tierOutcome
	s, ts := tr.seg.s, &tr.seg.s.Tiers[tr.tier]
	tr.ctx.stop()
	tEnd := tr.e.clock.Now()
	exc := tr.exceptions(late)
	if !tr.settleKeptTier(&out, exc) {
		sortExceptions(exc)
		for _, j := range exc {
			tr.settleModule(&out, j, tEnd)
		}
	}
	ts.ElapsedMs = blackboard.Millis(tEnd.Sub(tr.start))
	if timedOut || tr.budgetExhausted.Load() {
		ts.BudgetExhausted = true
		s.BudgetViolations = append(s.BudgetViolations, tr.seg.st.cfg.Tiers[tr.tier].Name)
	}
	ts.Status = out.Status()
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
// about; finishing the wait on a timerfd keeps a tier whose module ignores its context
// closer to its deadline (BENCHMARKS.md, "Deadline adherence"). It costs a system call to
// arm and one to disarm, and only waits that come within kernelMargin of their deadline
// pay them.
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
	if seg.emergency || seg.starting {
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
		d := seg.sleepFor(cur, now)
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
			if e.timerWait(seg, now, d, spin) {
				return seg.end, false
			}
			spin = false
			now = e.clock.Now()
			continue // the segment may have moved on to a later tier meanwhile
		}
		if precise && e.spinToDeadline(seg, cur) {
			return seg.end, false
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

// sleepFor returns how long the engine may sleep from now while cur is the segment's
// tier: until its deadline less the precise margin. A runner may go on to a later tier
// with an earlier deadline while the engine sleeps; such a tier starts after now, so its
// deadline is at least now plus its budget. Waking by then at the latest, the engine never
// sleeps past it.
func (seg *segment) sleepFor(cur *tierRun, now time.Time) time.Duration {
	d := cur.deadline.Sub(now) - seg.margin
	if b, ok := seg.minBudgetAfter(cur.tier); ok && d > b {
		d = b
	}
	return d
}

// timerWait waits on the engine's Go timer for d from now, spinning first if spin is set
// (see spinWait), and reports whether the segment handed a tier back meanwhile.
func (e *Engine) timerWait(seg *segment, now time.Time, d time.Duration, spin bool) bool {
	if e.timer == nil {
		e.timer = e.clock.NewTimer(d)
	} else {
		e.timer.Reset(d)
	}
	if spin && e.spinWait(seg, now, d) {
		e.timer.Stop() // a channel timer: nothing to drain since Go 1.23
		return true
	}
	select {
	case <-seg.done:
		if !e.timer.Stop() {
			select {
			case <-e.timer.C():
			default:
			}
		}
		return true
	case <-e.timer.C():
		return false
	}
}

// spinToDeadline yields the processor until cur's deadline while cur is the segment's
// tier (precise timing), and reports whether the segment handed a tier back meanwhile.
func (e *Engine) spinToDeadline(seg *segment, cur *tierRun) bool {
	for seg.cur.Load() == cur && e.clock.Now().Before(cur.deadline) {
		select {
		case <-seg.done:
			return true
		default:
		}
		runtime.Gosched()
	}
	return false
}

// spinWait polls for the segment to hand a tier back for up to engineSpin from now, or d
// if that is sooner, yielding the processor between polls (runtime.Gosched), and reports
// whether it did. The runner that ends a segment wakes an engine parked on it; with
// another P idle, that readies the engine on an idle thread, a system call on the runner's
// path before the engine can run. An engine that polls is woken by no one: it runs on the other P,
// or waits in the global run queue until the runner yields its own.
//
// That wait has no bound of its own: a module that keeps the runner's P busy while
// ignoring its context (the other P asleep) would hold the engine until the runtime
// preempts it. The engine's timer is no help there, as a channel timer is kept
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

// evalEmergency moves the emergency state machine on the safety tier's outcome.
func (e *Engine) evalEmergency(st *state, id uint64, out tierOutcome) {
	next, change := e.em.Next(decide.SafetyTick{Tick: id, Failed: out.SafetyFailed, Healthy: out.Healthy(),
		Reason: out.safetyReason}, decide.EmergencyConfig{Latch: st.cfg.Emergency.Latch, RecoverAfter: st.cfg.Emergency.RecoverAfter})
	if change == decide.Entered && e.em.Since != 0 {
		e.emPrev = &faultsummary.EmergencyEpisode{SinceTick: e.em.Since, EndedTick: e.em.EndedTick, Reason: e.em.Reason}
	}
	e.em = next
	switch change {
	case decide.Entered:
		e.emergencyEvent(faultsummary.EmergencyEvent{Entered: true, TickID: id, Reason: next.Reason, Latched: next.Latched, At: e.clock.Now()})
	case decide.Left:
		e.emergencyEvent(faultsummary.EmergencyEvent{Entered: false, TickID: id, Reason: next.Reason, At: e.clock.Now()})
	}
}

func (e *Engine) emergencyEvent(ev faultsummary.EmergencyEvent) {
	e.emit(event{kind: evEmergency, tick: ev.TickID, emergency: ev})
}

// repeated is a list that every tick builds anew (degraded_keys, the lines' extras) and
// that a steady state of failures or refusals repeats: a tick builds it in the buffer
// start returns, and settle publishes the list of the tick before instead when it came
// out the same, keeping the buffer for the next tick. A published list is never written
// again (summaries share it read-only, as they share the circuits' lists); only a list
// that changed costs an allocation.
type repeated[T comparable] struct {
	buf, last []T
}

// start returns the buffer to build the tick's list in (nil: none; append makes it).
func (r *repeated[T]) start() []T {
	if r.buf == nil {
		return nil
	}
	return r.buf[:0]
}

// settle returns the list to publish for cur, the tick's list (built from start).
func (r *repeated[T]) settle(cur []T) []T {
	if len(cur) == 0 {
		if cap(cur) > 0 {
			r.buf = cur
		}
		return nil
	}
	if slices.Equal(cur, r.last) {
		r.buf = cur
		return r.last
	}
	r.last, r.buf = cur, nil
	return cur
}
