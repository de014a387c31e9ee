package cycle

import (
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
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
// An exception marked keptExc was settled as the tick before by the runner that refused
// it (see keptInline): only what the tier lists in order is left.
func (tr *tierRun) settleModule(out *tierOutcome, j int32, tEnd time.Time) {
	if j&keptExc != 0 {
		j &^= keptExc
		tr.listKept(out, tr.seg.st.kept[tr.mods[j].idx], int(j))
		return
	}
	rt := tr.mods[j]
	ln := &tr.seg.tl.recs[rt.idx]
	if k := tr.seg.st.keptLine(rt); k != nil && k.repeats(rt, ln) {
		tr.applyKept(rt, ln, k)
		tr.listKept(out, k, int(j))
		return
	}
	tr.settleFull(out, rt, ln, int(j), tEnd)
}

// settleFull judges module j of tr, rt with line ln, applies the verdict and adds it to
// out.
func (tr *tierRun) settleFull(out *tierOutcome, rt *modRT, ln *lineRec, j int, tEnd time.Time) {
	e, seg := tr.e, tr.seg
	s, tl := seg.s, seg.tl
	o := ln.outcome()
	o.Starting = tr.tier == 0 && seg.starting // never kept: keep wants a bare refusal
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
	seg.st.keep(rt, ln, o, v, s.DegradedKeys)
}

// keptLine is what settling a refused module found, kept for the ticks after it while
// nothing it depends on changes: the same outcome (the same refusal), under the same
// policy (a reload makes new runtimes, without it), and a key never written, which
// serves nothing and does not age. Such a module (a breaker that stays open on a module
// that never had a value, one not due, shed or rejected tick after tick) is then settled
// without judging it again, looking its key up or making its served entry: the runner
// that refuses it writes its line and its board entry for the tick (keptInline), and the
// tier's settling lists its degraded key and adds its verdict (listKept), or repeats
// those of the tick before for the whole tier (keptTier).
//
// A kept line needs no extras: it serves nothing and its error is its cause's
// (lineNothing). Every change to what is kept (a keptLine made, dropped, or listed
// differently; the circuit its lines show) adds to state.keptVer, so that equal versions
// at the end of two ticks mean their kept lines are the same (see tickLines.SameNotPlain).
type keptLine struct {
	rt      *modRT // the runtime it was found under
	out     decide.Outcome
	v       decide.Verdict
	deg     string        // its entry in degraded_keys; "": not listed
	circuit breaker.State // the circuit its last kept line showed; written by whoever settles it
}

// keptLine returns what st keeps of rt's last settling (nil: nothing).
func (st *state) keptLine(rt *modRT) *keptLine {
	if st.kept == nil {
		return nil
	}
	return st.kept[rt.idx]
}

// keep keeps what settling rt found (o judged v, on line ln; keys is degraded_keys after
// it), if it may be kept: a refusal other than busy (whose facts change with every tick
// it stays busy) that records nothing on the breaker and fails no safety check, on a key
// never written, whose error is its cause's alone. Otherwise it keeps nothing: the next
// tick settles rt in full. Unwritten is asked after serving, so that a write meanwhile is
// seen: a key unwritten now was unwritten when it was served (nothing).
func (st *state) keep(rt *modRT, ln *lineRec, o decide.Outcome, v decide.Verdict, keys []string) {
	if o != (decide.Outcome{Refusal: o.Refusal}) || o.Refusal == decide.NotRefused || o.Refusal == decide.StillBusy || v.Serve == decide.Live ||
		v.Breaker != decide.Release || v.SafetyFailure || v.Cause == decide.CauseRun || !rt.lslot.Unwritten() {
		if st.kept != nil && st.kept[rt.idx] != nil {
			st.kept[rt.idx] = nil
			st.keptVer++
		}
		return
	}
	if st.kept == nil {
		st.kept = make([]*keptLine, len(st.lines))
	}
	deg := ""
	if v.Serve != decide.Kept {
		deg = keys[len(keys)-1]
	}
	k := st.kept[rt.idx]
	if k == nil || k.rt != rt || k.out != o || k.deg != deg || k.circuit != ln.circuit {
		st.kept[rt.idx] = &keptLine{rt: rt, out: o, v: v, deg: deg, circuit: ln.circuit}
		st.keptVer++
	}
}

// repeats reports whether k may settle line ln of rt: k was found under rt, ln is a
// refusal with no other fact (the outcome k was judged on), and rt's key is still
// unwritten.
func (k *keptLine) repeats(rt *modRT, ln *lineRec) bool {
	return k.rt == rt && ln.refusal == k.out.Refusal && ln.late == decide.InTime && ln.attempts == 0 &&
		ln.kind == fault.KindNone && ln.flags == 0 && rt.lslot.Unwritten()
}

// keptInline settles module rt, refused with line ln, as the tick before did if k says
// how and its circuit is the one k saw, and reports whether it did. The runner that
// refused it calls it, with the module's data at hand; the tier's settling then lists it
// (listKept). It writes only what belongs to rt, so runners call it for their modules at
// once; a circuit that moved is left to the settling, which counts the change.
func (tr *tierRun) keptInline(rt *modRT, ln *lineRec) bool {
	k := tr.seg.st.keptLine(rt)
	if k == nil || ln.circuit != k.circuit || !k.repeats(rt, ln) {
		return false
	}
	tr.writeKept(rt, ln, k)
	return true
}

// applyKept is keptInline for the goroutine that settles the tier.
func (tr *tierRun) applyKept(rt *modRT, ln *lineRec, k *keptLine) {
	if ln.circuit != k.circuit {
		k.circuit = ln.circuit
		tr.seg.st.keptVer++
	}
	tr.writeKept(rt, ln, k)
}

// writeKept writes line ln of rt as k says, and rt's board entry for the tick (nothing).
func (tr *tierRun) writeKept(rt *modRT, ln *lineRec, k *keptLine) {
	ln.kind, ln.cause, ln.flags = k.v.Kind, k.v.Cause, lineNothing
	tr.l.judged(ln, k.v.Status)
	tr.e.board.Set(rt.bslot, tr.tier, blackboard.Entry{Key: rt.key, Module: rt.name, Source: blackboard.None})
}

// listKept adds the verdict of kept module j to out and its degraded key to the summary.
func (tr *tierRun) listKept(out *tierOutcome, k *keptLine, j int) {
	if k.deg != "" {
		tr.seg.s.DegradedKeys = append(tr.seg.s.DegradedKeys, k.deg)
	}
	out.Add(k.v, j)
	tr.seg.tl.keptN++
}

// keptTier is what settling a tier whose exceptions were all kept modules found (see
// settleKeptTier): the next run of the tier with the same exceptions, nothing kept having
// changed meanwhile, adds the same verdicts and lists the same degraded keys.
type keptTier struct {
	set []uint64 // the exceptions, one bit per module of the tier (nil: none found yet)
	n   int      // how many
	ver uint64   // state.keptVer when they were listed
	res decide.TierResult
	deg []string // the degraded keys they listed, in order
}

// same reports whether exc, unsorted, are the exceptions kt holds, all marked keptExc.
func (kt *keptTier) same(exc []int32) bool {
	if kt.set == nil || len(exc) != kt.n {
		return false
	}
	for _, j := range exc {
		if j&keptExc == 0 {
			return false
		}
		if j &^= keptExc; kt.set[j/64]&(1<<(j%64)) == 0 {
			return false
		}
	}
	return true
}

// settleKeptTier settles exc, tr's exceptions as the runners left them, if every one of
// them is a kept module's (keptExc), and reports whether it did: as the tier's run before
// did, when its exceptions were the same and nothing kept changed since, without sorting
// them or reading a module's data; else in order, one by one, remembering what they added
// for the next run.
func (tr *tierRun) settleKeptTier(out *tierOutcome, exc []int32) bool {
	if len(exc) == 0 {
		return false
	}
	st, s := tr.seg.st, tr.seg.s
	if st.keptTiers == nil {
		for _, j := range exc {
			if j&keptExc == 0 {
				return false
			}
		}
		st.keptTiers = make([]keptTier, len(st.cfg.Tiers))
	}
	kt, ver := &st.keptTiers[tr.tier], st.keptVer
	if kt.ver == ver && kt.same(exc) {
		out.TierResult = kt.res
		s.DegradedKeys = append(s.DegradedKeys, kt.deg...)
		tr.seg.tl.keptN += len(exc)
		return true
	}
	for _, j := range exc {
		if j&keptExc == 0 {
			return false
		}
	}
	sortExceptions(exc)
	d := len(s.DegradedKeys)
	if words := (len(tr.mods) + 63) / 64; len(kt.set) != words {
		kt.set = make([]uint64, words)
	} else {
		clear(kt.set)
	}
	for _, j := range exc {
		tr.settleModule(out, j, time.Time{})
		j &^= keptExc
		kt.set[j/64] |= 1 << (j % 64)
	}
	kt.n, kt.ver, kt.res = len(exc), ver, out.TierResult
	kt.deg = append(kt.deg[:0], s.DegradedKeys[d:]...)
	return true
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
