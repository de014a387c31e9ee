package replaycheck

import (
	"testing"

	"github.com/cycled/cycled/cycle/decide"
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
	}
}
