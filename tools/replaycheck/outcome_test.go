package replaycheck

import (
	"testing"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// A line written from an outcome, as the engine writes it, reads back as an outcome with
// the same verdict: one row per kind of outcome.
func TestOutcomeOfRoundTrip(t *testing.T) {
	tr, ctl, can := fault.KindTransient, fault.KindControl, fault.KindCanceled
	for _, c := range []struct {
		name        string
		o           decide.Outcome
		p           decide.Policy
		tierSkipped bool
	}{
		{"ok", decide.Outcome{Attempts: 1}, decide.Policy{Policy: tiers.Degrade}, false},
		{"retried", decide.Outcome{Attempts: 3}, decide.Policy{Policy: tiers.Degrade}, false},
		{"failed", decide.Outcome{Attempts: 2, Kind: tr, Failed: true}, decide.Policy{Policy: tiers.FailFast}, false},
		{"control", decide.Outcome{Attempts: 1, Kind: ctl, Failed: true}, decide.Policy{Policy: tiers.Degrade}, false},
		{"canceled", decide.Outcome{Attempts: 1, Kind: can, Failed: true}, decide.Policy{Policy: tiers.Abort}, false},
		{"probe ok", decide.Outcome{Attempts: 1, Probe: true}, decide.Policy{Policy: tiers.Degrade}, false},
		{"probe failed", decide.Outcome{Attempts: 1, Kind: tr, Failed: true, Probe: true}, decide.Policy{Policy: tiers.Degrade}, false},
		{"abandoned", decide.Outcome{Late: decide.Abandoned, Attempts: 1}, decide.Policy{Policy: tiers.FailFast}, false},
		{"unstarted", decide.Outcome{Late: decide.Unstarted, Kind: tr, Failed: true}, decide.Policy{Policy: tiers.Degrade}, false},
		{"tick cancelled", decide.Outcome{Late: decide.Unstarted, Kind: can, Failed: true}, decide.Policy{Policy: tiers.Degrade, Safety: true}, false},
		{"busy", decide.Outcome{Refusal: decide.StillBusy}, decide.Policy{Policy: tiers.Degrade}, false},
		{"open", decide.Outcome{Refusal: decide.BreakerOpen}, decide.Policy{Policy: tiers.Degrade}, false},
		{"open, on_open fail", decide.Outcome{Refusal: decide.BreakerOpen}, decide.Policy{Policy: tiers.Degrade, OnOpen: tiers.Fail}, false},
		{"not due", decide.Outcome{Refusal: decide.NotDueTick}, decide.Policy{Policy: tiers.Degrade}, false},
		{"emergency-only", decide.Outcome{Refusal: decide.EmergencyOnly}, decide.Policy{Policy: tiers.Degrade}, false},
		{"tier skipped", decide.Outcome{Refusal: decide.TierSkipped}, decide.Policy{Policy: tiers.Degrade}, true},
		// A bulkhead's rejection, bypassed or failing.
		{"rejected", decide.Outcome{Refusal: decide.BulkheadFull}, decide.Policy{Policy: tiers.Degrade}, false},
		{"rejected, on_reject fail", decide.Outcome{Refusal: decide.BulkheadFull}, decide.Policy{Policy: tiers.FailFast, OnReject: tiers.Fail}, false},
	} {
		want := decide.Judge(c.o, c.p)
		m := faultsummary.Module{Status: want.Status.Public(), Attempts: c.o.Attempts, FaultKind: want.Kind.String()}
		if want.Kind == fault.KindNone {
			m.FaultKind = "none"
		}
		if err := want.Cause.Err(); err != nil {
			m.Error = err.Error()
		} else if want.Cause == decide.CauseRun {
			m.Error = "the module's error"
		}
		if got := decide.Judge(OutcomeOf(&m, c.tierSkipped), c.p); got != want {
			t.Errorf("%s: line %+v\n got %+v\nwant %+v", c.name, m, got, want)
		}
		if m.Status == faultsummary.StatusRejected && onRejectOf(&m) != c.p.OnReject {
			t.Errorf("%s: on_reject read back as %s, want %s", c.name, onRejectOf(&m), c.p.OnReject)
		}
	}
}

// The recorded rules, not the tick, decide a module's policy: a failed line recorded as
// degrading its tier is a difference once the rules of its run say abort.
func TestRecordedRulesBeatInference(t *testing.T) {
	s := &faultsummary.Summary{TickID: 7, RunID: "r", Generation: 2, Finish: faultsummary.Completed,
		OverallSeverity: faultsummary.Degraded, Tiers: []faultsummary.Tier{{Index: 0, Name: "safety", Status: faultsummary.TierOK},
			{Index: 1, Name: "planning", Status: faultsummary.TierDegraded}}}
	s.SetModules([]faultsummary.Module{{Name: "p", Tier: "planning", TierIndex: 1, Status: faultsummary.StatusFailed,
		Attempts: 1, FaultKind: "transient", Error: "down"}})
	abort := recorder.Rules{Generation: 2, RecoverAfter: 3, Modules: map[string]recorder.ModuleRules{"p": {Policy: tiers.Abort, TierIndex: 1}}}
	for _, c := range []struct {
		name  string
		rules []recordedRules
		diffs int
	}{
		{"inferred: degrade", nil, 0},
		{"recorded: abort", []recordedRules{{tick: 1, run: "r", rules: abort}}, 1},
		{"recorded for another run", []recordedRules{{tick: 1, run: "other", rules: abort}}, 0},
		{"recorded after the tick", []recordedRules{{tick: 8, run: "r", rules: abort}}, 0},
	} {
		ch := New()
		ch.recorded = c.rules
		diffs := ch.Tick(s)
		if len(diffs) != c.diffs || (c.diffs > 0 && (diffs[0].Field != "finish" || diffs[0].Recomputed != "short_circuited")) {
			t.Errorf("%s: %v", c.name, diffs)
		}
	}
}
