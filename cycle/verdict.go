package cycle

import (
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
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
		tl.judged(ln, v.Status)
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
	rt := tr.mods[j]
	ln := &tr.seg.tl.recs[rt.idx]
	if k := tr.seg.st.keptLine(rt); k != nil && k.repeats(rt, ln) {
		tr.settleKept(out, rt, ln, k, j)
		return
	}
	tr.settleFull(out, rt, ln, j, tEnd)
}

// settleFull judges module j of tr, rt with line ln, applies the verdict and adds it to
// out.
func (tr *tierRun) settleFull(out *tierOutcome, rt *modRT, ln *lineRec, j int, tEnd time.Time) {
	e, seg := tr.e, tr.seg
	s, tl := seg.s, seg.tl
	o := ln.outcome()
	o.Starting = tr.tier == 0 && e.guard.startup.Starting // never kept: keep wants a bare refusal
	v := decide.Judge(o, rt.policy)
	ln.kind, ln.cause = v.Kind, v.Cause
	tl.judged(ln, v.Status)
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
	seg.st.keep(rt, o, v, errText, s.DegradedKeys)
}

// keptLine is what settling a refused module found, kept for the ticks after it while
// nothing it depends on changes: the same outcome (the same refusal), under the same
// policy (a reload makes new runtimes, without it), and a key never written, which
// serves nothing and does not age. Such a module (a breaker that stays open on a module
// that never had a value, one not due, shed or rejected tick after tick) is then settled
// without judging it again, looking its key up or making its served entry: only its line
// and its board entry for the tick are written.
type keptLine struct {
	rt      *modRT // the runtime it was found under
	out     decide.Outcome
	v       decide.Verdict
	errText string
	deg     string // its entry in degraded_keys; "": not listed
}

// keptLine returns what st keeps of rt's last settling (nil: nothing).
func (st *state) keptLine(rt *modRT) *keptLine {
	if st.kept == nil {
		return nil
	}
	return st.kept[rt.idx]
}

// keep keeps what settling rt found (o judged v, errText; keys is degraded_keys after
// it), if it may be kept: a refusal other than busy (whose facts change with every tick
// it stays busy) that records nothing on the breaker and fails no safety check, on a key
// never written. Otherwise it keeps nothing: the next tick settles rt in full. Unwritten
// is asked after serving, so that a write meanwhile is seen: a key unwritten now was
// unwritten when it was served (nothing).
func (st *state) keep(rt *modRT, o decide.Outcome, v decide.Verdict, errText string, keys []string) {
	if o != (decide.Outcome{Refusal: o.Refusal}) || o.Refusal == decide.NotRefused || o.Refusal == decide.StillBusy || v.Serve == decide.Live ||
		v.Breaker != decide.Release || v.SafetyFailure || !rt.lslot.Unwritten() {
		if st.kept != nil {
			st.kept[rt.idx] = nil
		}
		return
	}
	if st.kept == nil {
		st.kept = make([]*keptLine, len(st.lines))
	}
	k := st.kept[rt.idx]
	if k == nil || k.rt != rt || k.out != o {
		k = &keptLine{rt: rt, out: o, v: v, errText: errText}
		st.kept[rt.idx] = k
	}
	k.deg = ""
	if v.Serve != decide.Kept {
		k.deg = keys[len(keys)-1]
	}
}

// repeats reports whether k may settle line ln of rt: k was found under rt, ln is a
// refusal with no other fact (the outcome k was judged on), and rt's key is still
// unwritten.
func (k *keptLine) repeats(rt *modRT, ln *lineRec) bool {
	return k.rt == rt && ln.refusal == k.out.Refusal && ln.late == decide.InTime && ln.attempts == 0 &&
		ln.kind == fault.KindNone && ln.flags == 0 && rt.lslot.Unwritten()
}

// settleKept settles module j of tr, rt, as the tick before did: k says how.
func (tr *tierRun) settleKept(out *tierOutcome, rt *modRT, ln *lineRec, k *keptLine, j int) {
	s, tl := tr.seg.s, tr.seg.tl
	ln.kind, ln.cause = k.v.Kind, k.v.Cause
	tl.judged(ln, k.v.Status)
	x := tl.extra(int(rt.idx))
	x.err, x.hasServed = k.errText, true // served nothing (see tickLines.serveEntry)
	if k.deg != "" {
		s.DegradedKeys = append(s.DegradedKeys, k.deg)
	}
	tr.e.board.Set(rt.bslot, tr.tier, blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None})
	out.Add(k.v, j)
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
