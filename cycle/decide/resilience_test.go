package decide

import (
	"testing"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// The bulkhead's rules: admission after the breaker, the wait within the
// tier's budget, and the verdict on a rejected module for every on_reject and policy.
func TestBulkheadRules(t *testing.T) {
	if AdmitBulkhead(true) != NotRefused || AdmitBulkhead(false) != BulkheadFull {
		t.Error("AdmitBulkhead: a permit runs, none is a refusal")
	}
	for _, c := range []struct {
		name       string
		wait, left time.Duration
		want       time.Duration
	}{
		{"no wait configured", 0, time.Second, 0},
		{"wait within the budget", 5 * time.Millisecond, 40 * time.Millisecond, 5 * time.Millisecond},
		{"wait capped at the deadline", 50 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond},
		{"deadline passed: no wait", 50 * time.Millisecond, -time.Millisecond, 0},
	} {
		if got := BulkheadWait(c.wait, c.left); got != c.want {
			t.Errorf("%s: BulkheadWait(%v, %v) = %v, want %v", c.name, c.wait, c.left, got, c.want)
		}
	}
	rejected := Outcome{Refusal: BulkheadFull}
	rejectFail := Policy{Policy: tiers.Degrade, OnReject: tiers.Fail}
	ctl := fault.KindControl
	for _, c := range []struct {
		name string
		p    Policy
		want Verdict
	}{
		{"bypass: last-known-good, not a failure, nothing on the breaker", degrade, Verdict{Status: Rejected, Serve: Stale}},
		{"on_reject fail", rejectFail, Verdict{Status: Rejected, Cause: CauseRejectFail, Kind: ctl, Serve: Stale, Failure: true}},
		{"on_reject fail, fail_fast: the tier fails", Policy{Policy: tiers.FailFast, OnReject: tiers.Fail},
			Verdict{Status: Rejected, Cause: CauseRejectFail, Kind: ctl, Serve: Stale, Failure: true, FailsTier: true}},
		{"on_reject fail, abort: the tick stops", Policy{Policy: tiers.Abort, OnReject: tiers.Fail},
			Verdict{Status: Rejected, Cause: CauseRejectFail, Kind: ctl, Serve: Stale, Failure: true, Aborts: true}},
		{"safety tier: a check not made fails closed", safety,
			Verdict{Status: Rejected, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"on_open fail does not apply to a rejection", openFail, Verdict{Status: Rejected, Serve: Stale}},
	} {
		if got := Judge(rejected, c.p); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	if Rejected.Nominal() || Rejected.Public() != "rejected" || CauseRejectFail.Err() == nil {
		t.Error("rejected is a published degradation with an error under on_reject: fail")
	}
}

// One row per rule of the retry-amplification budget.
func TestRetryAllowed(t *testing.T) {
	for _, c := range []struct {
		name string
		s    retrybudget.RatioSettings
		w    RatioWindow
		want bool
	}{
		{"no first attempt, no minimum: refused", retrybudget.RatioSettings{Ratio: 1}, RatioWindow{}, false},
		{"the minimum per tick is always allowed", retrybudget.RatioSettings{MinPerTick: 2}, RatioWindow{Retries: 50, TickRetries: 1}, true},
		{"minimum used up, ratio 0: refused", retrybudget.RatioSettings{MinPerTick: 2}, RatioWindow{Firsts: 100, TickRetries: 2}, false},
		{"within the ratio", retrybudget.RatioSettings{Ratio: 0.2}, RatioWindow{Firsts: 10, Retries: 1}, true},
		{"the retry that reaches the ratio", retrybudget.RatioSettings{Ratio: 0.2}, RatioWindow{Firsts: 10, Retries: 1, TickRetries: 1}, true},
		{"the retry past the ratio", retrybudget.RatioSettings{Ratio: 0.2}, RatioWindow{Firsts: 10, Retries: 2, TickRetries: 2}, false},
		{"earlier ticks' retries count", retrybudget.RatioSettings{Ratio: 0.5, MinPerTick: 1}, RatioWindow{Firsts: 10, Retries: 5, TickRetries: 1}, false},
		{"ratio above 1 allows more retries than firsts", retrybudget.RatioSettings{Ratio: 3}, RatioWindow{Firsts: 2, Retries: 5}, true},
	} {
		if got := RetryAllowed(c.s, c.w); got != c.want {
			t.Errorf("%s: RetryAllowed(%+v, %+v) = %v, want %v", c.name, c.s, c.w, got, c.want)
		}
	}
}
