package cycle

import (
	"context"
	"runtime"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
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

// errBusy and errAbandoned are the errors reported for modules that did not return in time.
type statusError string

func (e statusError) Error() string { return string(e) }

const (
	errBusy      statusError = "still running from an earlier tick (ignored its context)"
	errAbandoned statusError = "abandoned at the tier deadline (ignored its context)"
	errOpenFail  statusError = "circuit breaker is open (on_open: fail)"
	errUnstarted statusError = "not started before the tier deadline"
)

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
	if e.resetReq.Swap(false) && e.em.active {
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
		Modules:           make([]faultsummary.Module, 0, len(st.lines)),
	}
	e.pendingGap = 0
	if lag := start.Sub(scheduled); lag > 0 {
		s.StartLagMs = blackboard.Millis(lag)
	}
	stop := false
	var stopReason string
	for ti := range st.cfg.Tiers {
		tier := &st.cfg.Tiers[ti]
		ts := &s.Tiers[ti]
		ts.Index, ts.Name, ts.BudgetMs = ti, tier.Name, blackboard.Millis(tier.Budget)
		switch {
		case stop:
			e.skipTier(st, ti, s, start, stopReason)
		case e.em.active && st.skip[ti]:
			e.skipTier(st, ti, s, start, "emergency mode")
		default:
			out := e.runTier(ctx, st, ti, id, start, s)
			if ti == 0 {
				e.evalEmergency(st, id, out.safetyFailed, out.safetyReason)
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

	// Circuits after this tick, each breaker once.
	e.stamp++
	for i := range s.Modules {
		m := &s.Modules[i]
		rt := st.lines[i]
		if rt.br == nil {
			continue
		}
		stt := rt.br.Peek()
		m.CircuitState = stt.String()
		if rt.brStamp == e.stamp {
			continue
		}
		rt.brStamp = e.stamp
		switch stt {
		case breaker.Open:
			s.OpenCircuits = appendOnce(s.OpenCircuits, rt.brName)
		case breaker.HalfOpen:
			s.HalfOpenCircuits = appendOnce(s.HalfOpenCircuits, rt.brName)
		}
	}
	s.Normalize()
	s.OverallSeverity = s.ComputeSeverity()

	e.history.Append(s)
	for i := range s.Modules {
		st.lines[i].lastStat.Store(&s.Modules[i])
	}
	e.hub.Publish(faultsummary.Event{Type: faultsummary.EventTick, Summary: s})
	for _, h := range e.hooks {
		if h.OnModule != nil {
			for i := range s.Modules {
				m := &s.Modules[i]
				h.OnModule(ModuleEvent{TickID: id, Module: m.Name, Tier: m.Tier, Status: m.Status, Attempts: m.Attempts,
					Latency: time.Duration(m.LatencyMs * float64(time.Millisecond)), Kind: e.kinds[i], Err: e.errs[i]})
			}
		}
		if h.OnTick != nil {
			h.OnTick(s)
		}
	}
	return s
}

func appendOnce(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

// line fills the summary line of a module (lines are in plan order, so its index is fixed).
func (e *Engine) line(s *faultsummary.Summary, rt *modRT, tierName string) (*faultsummary.Module, int) {
	i := rt.idx
	s.Modules = s.Modules[:i+1]
	s.Modules[i] = faultsummary.Module{Name: rt.name, Tier: tierName, TierIndex: rt.planned.TierIndex,
		Breaker: rt.brName, Served: faultsummary.Served{Key: rt.key}}
	e.kinds[i] = fault.KindNone
	e.errs[i] = nil
	return &s.Modules[i], i
}

func (e *Engine) skipTier(st *state, ti int, s *faultsummary.Summary, tickStart time.Time, reason string) {
	s.Tiers[ti].Status = faultsummary.TierSkipped
	s.Tiers[ti].Reason = reason
	name := st.cfg.Tiers[ti].Name
	for _, rt := range st.tierMods[ti] {
		ln, _ := e.line(s, rt, name)
		ln.Status = faultsummary.StatusSkipped
		// An emergency-only module outside emergency mode is not a degradation.
		e.serveFallback(s, ln, rt, ti, tickStart, !(rt.spec.Emergency && !e.em.active), false)
	}
}

// serveFallback fills the served entry of a module that produced no value this tick and
// writes it on the board. degraded tags it stale and lists it in degraded_keys; failed in
// the safety tier serves nothing (fail closed).
func (e *Engine) serveFallback(s *faultsummary.Summary, ln *faultsummary.Module, rt *modRT, ti int, tickStart time.Time, degraded, failed bool) {
	var ent blackboard.Entry
	if ti == 0 && failed {
		ent = blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None}
	} else {
		var ok bool
		ent, ok = blackboard.FromLastGood(e.lg.Get(rt.key, tickStart))
		if !ok {
			ent = blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None}
		}
		if !degraded && ent.Source == blackboard.LastGood {
			ent.Stale = false
		}
	}
	ln.UsingFallback = ent.Source == blackboard.LastGood
	ln.Served = faultsummary.Served{Key: rt.key, Source: ent.Source, Stale: ent.Stale, Expired: ent.Expired,
		AgeMs: blackboard.Millis(ent.Age), Value: ent.Value, Written: ent.Written, WrittenTick: ent.TickID, Seq: ent.Seq}
	if degraded || ent.Expired {
		switch {
		case ent.Expired:
			s.DegradedKeys = append(s.DegradedKeys, rt.key+" (expired)")
		case ent.Source == blackboard.LastGood:
			s.DegradedKeys = append(s.DegradedKeys, rt.key)
		case failed || degraded:
			s.DegradedKeys = append(s.DegradedKeys, rt.key+" (none)")
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

func (e *Engine) runTier(ctx context.Context, st *state, ti int, id uint64, tickStart time.Time, s *faultsummary.Summary) tierOutcome {
	tier := &st.cfg.Tiers[ti]
	mods := st.tierMods[ti]
	var out tierOutcome
	ts := &s.Tiers[ti]
	tStart := e.clock.Now()
	deadline := tStart.Add(tier.Budget)
	tctx, cancel := e.clock.WithDeadline(ctx, deadline)
	tr := &tierRun{tick: id, ctx: tctx, deadline: deadline, backoff: tier.Backoff, retry: tier.Retryable,
		done: make(chan struct{}), tier: ti}
	tr.pending.Store(1) // held until every module is dispatched
	base := len(s.Modules)
	inline := make([]*worker, 0, len(mods))

	// Admission and dispatch.
	for _, rt := range mods {
		ln, i := e.line(s, rt, tier.Name)
		switch {
		case rt.spec.Emergency && !e.em.active:
			ln.Status = faultsummary.StatusSkipped
		case id%uint64(rt.spec.EveryN()) != 0:
			ln.Status = faultsummary.StatusNotDue
		case rt.w.running.Load():
			ln.Status = faultsummary.StatusBusy
			if p := rt.br.Acquire(); p.Allowed() {
				rt.br.Failure(p, fault.KindTransient)
			}
			e.kinds[i], e.errs[i] = fault.KindTransient, errBusy
		default:
			p := rt.br.Acquire()
			if !p.Allowed() {
				ln.Status = faultsummary.StatusOpen
				if rt.spec.OnOpen == tiers.Fail {
					e.kinds[i], e.errs[i] = fault.KindControl, errOpenFail
				}
				continue
			}
			e.permits[i] = p
			rt.w.permit = p
			rt.w.phase.Store(phaseRunning)
			tr.pending.Add(1)
			rt.w.running.Store(true)
			rt.w.unstarted = false
			ln.Status = "" // running
			if rt.w.isFast() {
				rt.w.retire()
				inline = append(inline, rt.w)
			} else {
				rt.w.dispatch(tr)
			}
		}
	}
	tr.inline = inline
	if len(inline) > 0 {
		e.pool.wake(tr, min(len(inline), runtime.GOMAXPROCS(0)))
	}
	tr.finish(1)

	// Wait for every admitted module or the deadline, whichever is first.
	timedOut := !e.wait(st, tr, deadline)
	for _, w := range inline[tr.closeClaims():] {
		// Never claimed before the deadline: it did not run at all.
		w.unstarted = true
		w.phase.Store(phaseIdle)
		w.running.Store(false)
	}
	cancel()
	tEnd := e.clock.Now()

	// Outcomes, once per module.
	for i := base; i < len(s.Modules); i++ {
		ln := &s.Modules[i]
		rt := st.lines[i]
		var failedNow bool
		switch ln.Status {
		case faultsummary.StatusSkipped, faultsummary.StatusNotDue:
			e.serveFallback(s, ln, rt, ti, tickStart, false, false)
			continue
		case faultsummary.StatusBusy:
			failedNow = true
			ln.FaultKind = fault.KindTransient.String()
			ln.Error = errBusy.Error()
			e.serveFallback(s, ln, rt, ti, tickStart, true, true)
		case faultsummary.StatusOpen:
			failedNow = rt.spec.OnOpen == tiers.Fail || ti == 0
			if e.errs[i] != nil {
				ln.Error = e.errs[i].Error()
			}
			e.serveFallback(s, ln, rt, ti, tickStart, true, true)
		default: // admitted
			p := e.permits[i]
			probe := p.Kind() == breaker.Probe
			w := rt.w
			if w.unstarted {
				// The runners were all stuck: the module was admitted but never started.
				ln.Status = faultsummary.StatusTimedOut
				ln.LatencyMs = 0
				ln.FaultKind = fault.KindTransient.String()
				ln.Error = errUnstarted.Error()
				e.kinds[i], e.errs[i] = fault.KindTransient, errUnstarted
				rt.br.Release(p)
				failedNow = rt.planned.Policy != tiers.Abort
				e.serveFallback(s, ln, rt, ti, tickStart, true, true)
				break
			}
			if !w.settle() {
				// Abandoned: the module ignored its context. Its late result is discarded.
				ln.Status = faultsummary.StatusTimedOut
				ln.Attempts = int(w.attempts.Load())
				ln.LatencyMs = blackboard.Millis(tEnd.Sub(tStart))
				ln.FaultKind = fault.KindTransient.String()
				ln.Error = errAbandoned.Error()
				e.kinds[i], e.errs[i] = fault.KindTransient, errAbandoned
				rt.br.Failure(p, fault.KindTransient)
				failedNow = rt.planned.Policy != tiers.Abort
				if rt.planned.Policy == tiers.Abort {
					out.abort, out.abortBy = true, rt.name
				}
				e.serveFallback(s, ln, rt, ti, tickStart, true, true)
				for _, h := range e.hooks {
					if h.OnAbandon != nil {
						h.OnAbandon(rt.name, id)
					}
				}
				break
			}
			r := &w.res
			ln.Attempts = r.res.Attempts
			ln.LatencyMs = blackboard.Millis(r.end.Sub(r.start))
			if r.res.Attempts > 1 {
				if s.RetryCounts == nil {
					s.RetryCounts = make(map[string]int)
				}
				s.RetryCounts[rt.name] = r.res.Attempts - 1
			}
			if r.res.BudgetExhausted {
				ts.BudgetExhausted = true
			}
			kind := r.res.Kind
			e.kinds[i], e.errs[i] = kind, r.res.Err
			switch {
			case r.res.Err == nil:
				ln.Status = faultsummary.StatusOK
				if probe {
					ln.Status = faultsummary.StatusProbeOK
				} else if r.res.Attempts > 1 {
					ln.Status = faultsummary.StatusRetried
				}
				// The worker committed it (breaker, last-known-good, blackboard).
				ln.Served = faultsummary.Served{Key: rt.key, Source: blackboard.Live, DerivedFromStale: r.readStale,
					Value: r.value, Written: r.end, WrittenTick: id, Seq: r.seq}
			case kind == fault.KindControl:
				// Nothing to do this tick: not a fault.
				ln.Status = faultsummary.StatusOK
				ln.FaultKind = kind.String()
				rt.br.Release(p)
				e.serveFallback(s, ln, rt, ti, tickStart, false, false)
			default:
				ln.Status = faultsummary.StatusFailed
				if probe {
					ln.Status = faultsummary.StatusProbeFailed
				}
				ln.FaultKind = kind.String()
				ln.Error = r.res.Err.Error()
				switch {
				case rt.planned.Policy == tiers.Abort:
					rt.br.Release(p)
					out.abort, out.abortBy = true, rt.name
				case kind == fault.KindCanceled:
					rt.br.Release(p)
				default:
					rt.br.Failure(p, kind)
					failedNow = true
				}
				e.serveFallback(s, ln, rt, ti, tickStart, true, true)
			}
		}
		if failedNow {
			if ln.FaultKind == "" && e.kinds[i] != fault.KindNone {
				ln.FaultKind = e.kinds[i].String()
			}
			switch rt.planned.Policy {
			case tiers.FailFast:
				out.failed = true
			case tiers.Abort:
				out.abort, out.abortBy = true, rt.name
			}
			if ti == 0 && rt.planned.Policy != tiers.Abort && !out.safetyFailed {
				out.safetyFailed = true
				out.safetyReason = rt.name + ": " + string(ln.Status)
				if ln.Error != "" {
					out.safetyReason += ": " + ln.Error
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
		for i := base; i < len(s.Modules); i++ {
			switch s.Modules[i].Status {
			case faultsummary.StatusOK, faultsummary.StatusRetried, faultsummary.StatusProbeOK, faultsummary.StatusNotDue, faultsummary.StatusSkipped:
			default:
				ts.Status = faultsummary.TierDegraded
			}
		}
	}
	return out
}

// wait blocks until every admitted module of tr has finished (true) or the deadline
// passes (false). While fast modules are still unclaimed it checks every stallCheck that
// the tier makes progress, and wakes more runners when it does not (a fast module blocked).
func (e *Engine) wait(st *state, tr *tierRun, deadline time.Time) bool {
	precise := st.cfg.Timing == Precise && e.realClock
	lastProgress := tr.progress.Load()
	for {
		d := deadline.Sub(e.clock.Now())
		if precise {
			d -= st.cfg.PreciseMargin
		}
		unclaimed := int64(len(tr.inline)) - tr.next.Load()
		stall := unclaimed > 0 && d > stallCheck
		if stall {
			d = stallCheck
		}
		if d <= 0 {
			break
		}
		if e.timer == nil {
			e.timer = e.clock.NewTimer(d)
		} else {
			e.timer.Reset(d)
		}
		select {
		case <-tr.done:
			if !e.timer.Stop() {
				select {
				case <-e.timer.C():
				default:
				}
			}
			return true
		case <-e.timer.C():
		}
		if stall {
			if p := tr.progress.Load(); p == lastProgress {
				if u := int64(len(tr.inline)) - tr.next.Load(); u > 0 {
					e.pool.wake(tr, int(min(u, 64)))
				}
			} else {
				lastProgress = p
			}
		}
	}
	if precise {
		for e.clock.Now().Before(deadline) {
			select {
			case <-tr.done:
				return true
			default:
			}
			runtime.Gosched()
		}
	}
	select {
	case <-tr.done:
		return true
	default:
		return false
	}
}

func (e *Engine) evalEmergency(st *state, id uint64, failed bool, reason string) {
	em := &e.em
	now := e.clock.Now()
	if !em.active {
		if failed {
			*em = emergencyState{active: true, since: id, reason: reason, latched: st.cfg.Emergency.Latch, endedTick: em.endedTick}
			e.emergencyEvent(faultsummary.EmergencyEvent{Entered: true, TickID: id, Reason: reason, Latched: em.latched, At: now})
		}
		return
	}
	if failed {
		em.healthy = 0
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
