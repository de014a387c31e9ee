package cycle

import (
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/faultsummary"
)

// This file applies the verdicts of package decide: what a module's outcome means is
// decided there; here it is written to the breaker, last-known-good, the blackboard and
// the summary. The mechanism (worker.go) calls these and decides nothing itself.

// commit writes a success: breaker, last-known-good, blackboard, and the line's live value.
func (w *worker) commit(tr *tierRun, rt *modRT, ln *lineRec, end time.Time) {
	r := &w.res
	rt.br.Success(w.permit)
	seq := rt.lslot.PutValue(r.value, rt.name, tr.tick, end)
	tr.e.board.SetLive(rt.bslot, rt.lslot, tr.tier, r.readStale)
	ln.seq, ln.written, ln.flags = seq, end.UnixNano(), ln.flags|lineLive
	if r.readStale {
		ln.flags |= lineDerived
	}
	if r.value != nil {
		tr.l.vals[rt.idx] = r.value
	}
}

// skipTier records every module of tier ti as skipped (decide.SkipTier said so).
func (e *Engine) skipTier(st *state, ti int, s *faultsummary.Summary, tl *tickLines, tickStart time.Time, reason string) {
	s.Tiers[ti].Status = faultsummary.TierSkipped
	s.Tiers[ti].Reason = reason
	for _, rt := range st.tierMods[ti] {
		ln := tl.init(rt)
		ln.refusal = decide.Admit(decide.Gate{TierSkipped: true, EmergencyOnly: rt.spec.Emergency, Emergency: e.em.Active})
		v := decide.Judge(ln.outcome(), rt.policy)
		ln.status = v.Status
		e.serve(s, tl, rt, ti, tickStart, v.Serve)
	}
}

// serve fills the served entry of a module that produced no value this tick as the
// verdict says (anything but decide.Live), lists its key in degraded_keys unless it is
// decide.Kept, and writes the entry on the board.
func (e *Engine) serve(s *faultsummary.Summary, tl *tickLines, rt *modRT, ti int, tickStart time.Time, how decide.Serve) {
	ent := blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None}
	if how != decide.Nothing {
		if lg, ok := blackboard.FromLastGood(rt.lslot.Get(tickStart)); ok {
			ent = lg
		}
		if how == decide.Kept && ent.Source == blackboard.LastGood {
			ent.Stale = false
		}
	}
	tl.serveEntry(int(rt.idx), faultsummary.Served{Key: rt.key, Source: ent.Source, Stale: ent.Stale, Expired: ent.Expired,
		AgeMs: blackboard.Millis(ent.Age), Value: ent.Value, Written: ent.Written, WrittenTick: ent.TickID, Seq: ent.Seq})
	// A module that had nothing to do (not due, emergency-only outside emergency) is not a
	// degradation, also when its last value has expired meanwhile: the served entry says
	// expired, degraded_keys does not list it.
	if how != decide.Kept {
		switch {
		case ent.Expired:
			s.DegradedKeys = append(s.DegradedKeys, tl.st.degradedKey(rt, true))
		case ent.Source == blackboard.LastGood:
			s.DegradedKeys = append(s.DegradedKeys, rt.key)
		default:
			s.DegradedKeys = append(s.DegradedKeys, tl.st.degradedKey(rt, false))
		}
	}
	e.board.Set(rt.bslot, ti, ent)
}

// settleModule applies the verdict on module j of tr, an exception, and adds it to out.
func (tr *tierRun) settleModule(out *tierOutcome, j int, tEnd time.Time) {
	e, seg := tr.e, tr.seg
	s, tl := seg.s, seg.tl
	rt := tr.mods[j]
	ln := &tl.recs[rt.idx]
	v := decide.Judge(ln.outcome(), rt.policy)
	ln.status, ln.kind, ln.cause = v.Status, v.Kind, v.Cause
	var errText string
	if err := ln.err(rt); err != nil {
		errText = err.Error()
		tl.extra(int(rt.idx)).err = errText
	}
	if ln.attempts > 1 {
		if s.RetryCounts == nil {
			s.RetryCounts = make(map[string]int)
		}
		s.RetryCounts[rt.name] = int(ln.attempts) - 1
	}
	tr.record(rt, ln, v)
	if v.Serve != decide.Live {
		e.serve(s, tl, rt, tr.tier, seg.tickStart, v.Serve)
	}
	if ln.late == decide.Abandoned {
		// It ignored its context: abandoned, its late result discarded.
		ln.latency = tEnd.Sub(tr.start)
		e.emit(event{kind: evAbandon, module: rt.name, tick: tr.tick})
	}
	if v.SafetyFailure && !out.SafetyFailed {
		out.safetyReason = rt.name + ": " + string(v.Status.Public())
		if errText != "" {
			out.safetyReason += ": " + errText
		}
	}
	out.Add(v, j)
}

// record puts the verdict's breaker event on the module's breaker. A success was recorded
// by the run that committed it; a module refused at admission holds no permit, and a busy
// one asks for a permit to record its failure.
func (tr *tierRun) record(rt *modRT, ln *lineRec, v decide.Verdict) {
	switch {
	case v.Breaker == decide.Success:
	case ln.refusal == decide.StillBusy && v.Breaker == decide.Failure:
		if p := rt.br.Acquire(); p.Allowed() {
			rt.br.Failure(p, v.Kind)
		} else {
			rt.br.Release(p)
		}
	case ln.refusal != decide.NotRefused:
	case v.Breaker == decide.Failure:
		rt.br.Failure(rt.w.permit, v.Kind)
	default:
		rt.br.Release(rt.w.permit)
	}
}
