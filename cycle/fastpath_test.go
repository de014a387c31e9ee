package cycle

import (
	"slices"
	"testing"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// A module with no fact of its gate set is admitted without asking decide.Admit (see
// tierRun.gated): for every combination of the facts, whenever gated says there is none,
// Admit refuses nothing.
func TestAdmitWithoutFacts(t *testing.T) {
	for _, busy := range []bool{false, true} {
		for _, shed := range []bool{false, true} {
			for _, emOnly := range []bool{false, true} {
				for _, em := range []bool{false, true} {
					for every := range 4 {
						for tick := uint64(1); tick <= 6; tick++ {
							spec := tiers.ModuleSpec{Every: every, Emergency: emOnly}
							rt := &modRT{spec: &spec, policy: decide.Policy{EmergencyOnly: emOnly}, gated: gatedBy(&spec)}
							tr := &tierRun{tick: tick, emergency: em, shedding: shed}
							g := decide.Gate{Tick: tick, Every: every, EmergencyOnly: emOnly, Emergency: em, Busy: busy, Shed: shed}
							if !tr.gated(rt, busy) && decide.Admit(g) != decide.NotRefused {
								t.Errorf("%+v: not gated, but Admit refuses (%d)", g, decide.Admit(g))
							}
						}
					}
				}
			}
		}
	}
}

// A line's plainRun is exactly decide's plain run: the outcome Outcome{Attempts: 1}, whose
// verdict PlainVerdict is Judge's under every policy.
func TestPlainRun(t *testing.T) {
	plain := lineRec{attempts: 1}
	variants := []func(*lineRec){
		func(*lineRec) {},
		func(r *lineRec) { r.refusal = decide.BreakerOpen },
		func(r *lineRec) { r.refusal = decide.StillBusy },
		func(r *lineRec) { r.late = decide.Abandoned },
		func(r *lineRec) { r.late = decide.Unstarted },
		func(r *lineRec) { r.attempts = 0 },
		func(r *lineRec) { r.attempts = 2 },
		func(r *lineRec) { r.kind = fault.KindTransient },
		func(r *lineRec) { r.flags |= lineFailed },
		func(r *lineRec) { r.flags |= lineProbe },
		func(r *lineRec) { r.flags |= lineLive | lineDerived },
		func(r *lineRec) { r.latency, r.seq, r.written = 5, 6, 7 },
	}
	for i, v := range variants {
		r := plain
		v(&r)
		if got, want := r.plainRun(), r.outcome() == (decide.Outcome{Attempts: 1}); got != want {
			t.Errorf("variant %d (%+v): plainRun %v, outcome is the plain run %v", i, r, got, want)
		}
	}
	for _, p := range []decide.Policy{{}, {Policy: tiers.FailFast, Safety: true}, {Policy: tiers.Abort}, {OnOpen: tiers.Fail}} {
		if v := decide.Judge(decide.Outcome{Attempts: 1}, p); v != decide.PlainVerdict() {
			t.Errorf("policy %+v: Judge on the plain run %+v, PlainVerdict %+v", p, v, decide.PlainVerdict())
		}
	}
	if v := decide.PlainVerdict(); v.Breaker != decide.Success || !v.Plain(1) || plainStatus != v.Status {
		t.Errorf("PlainVerdict %+v: want a success to commit, plain, status %v", v, plainStatus)
	}
}

// The tick's lines answer for all of them what reading them one by one answers: the
// positions of the lines that are not plain (AppendNotPlain), and whether every status
// is nominal (AllNominal, for statuses written through judged; the plain run's status is
// nominal).
func TestLinesAllAtOnce(t *testing.T) {
	l := &tickLines{recs: make([]lineRec, 6)}
	for i := range l.recs {
		l.recs[i] = lineRec{attempts: 1, status: plainStatus, flags: lineLive}
	}
	l.recs[1].flags |= lineDerived
	l.recs[3].attempts = 2
	l.judged(&l.recs[4], decide.NotDue)
	if !l.AllNominal() || !plainStatus.Nominal() {
		t.Fatal("nominal statuses only: AllNominal false")
	}
	var want []int32
	for i := range l.recs {
		if !l.Plain(i) {
			want = append(want, int32(i))
		}
	}
	if got := l.AppendNotPlain(nil); !slices.Equal(got, want) || len(want) != 3 {
		t.Fatalf("AppendNotPlain %v, Plain line by line %v", got, want)
	}
	l.judged(&l.recs[5], decide.Open)
	if l.AllNominal() {
		t.Fatal("a line open: AllNominal true")
	}
}
