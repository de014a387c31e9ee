package decide

import (
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// BreakerEvent is what a module's outcome records on its breaker, once per tick.
type BreakerEvent uint8

// The breaker events.
const (
	// Release records nothing: a permit held is given back.
	Release BreakerEvent = iota
	// Success records a success under the module's permit.
	Success
	// Failure records one failure of the verdict's Kind (a busy module, which holds no
	// permit, asks for one first; a refusal then records nothing).
	Failure
)

// Serve is what the blackboard serves for the module's key after its tier.
type Serve uint8

// What is served.
const (
	// Live: the value the module produced this tick.
	Live Serve = iota
	// Kept: the last-known-good value as it is, untagged; the module had nothing to do,
	// which is not a degradation.
	Kept
	// Stale: the last-known-good value tagged stale (nothing once expired), and the key
	// listed as degraded.
	Stale
	// Nothing: the safety tier fails closed: no fallback for a check that did not pass;
	// the key listed as degraded.
	Nothing
)

// Verdict is what one module's outcome means for the tick.
type Verdict struct {
	Status  Status
	Cause   Cause      // which error the line reports
	Kind    fault.Kind // the fault kind the line reports (and a Failure records)
	Breaker BreakerEvent
	Serve   Serve
	// Failure: the outcome counts as the module's failure for its error policy.
	Failure bool
	// FailsTier: the tier fails (fail_fast); Aborts: the rest of the tick stops cleanly
	// (abort); SafetyFailure: a safety module failed, which enters emergency mode.
	FailsTier, Aborts, SafetyFailure bool
}

// plainRun is the outcome of most runs, a success after one attempt, and plainVerdict the
// verdict on it (made by judgeAll like any other, whatever the policy: a success fails
// nothing): Judge answers it without going through the rules, as it is asked once per
// module per tick on the runners' path.
var (
	plainRun     = Outcome{Attempts: 1}
	plainVerdict = judgeAll(plainRun, Policy{})
)

// Judge returns the verdict on outcome o of a module configured as p.
func Judge(o Outcome, p Policy) Verdict {
	if o == plainRun {
		return plainVerdict
	}
	return judgeAll(o, p)
}

// judgeAll returns the verdict on outcome o of a module configured as p, rule by rule.
func judgeAll(o Outcome, p Policy) Verdict {
	v := judge(o, p)
	v.Status = StatusOf(o)
	if v.Serve == Stale && p.Safety && o.Refusal != TierSkipped {
		v.Serve = Nothing
	}
	if v.Failure {
		switch p.Policy {
		case tiers.FailFast:
			v.FailsTier = true
		case tiers.Abort:
			v.Aborts = true
		}
		v.SafetyFailure = p.Safety && p.Policy != tiers.Abort
	}
	return v
}

// judge returns the verdict's cause, kind, breaker event, serve and failure (Judge fills
// in the rest).
func judge(o Outcome, p Policy) Verdict {
	switch o.Refusal {
	case NotRefused:
		return judgeRun(o, p)
	case StillBusy:
		v := Verdict{Cause: CauseBusy, Kind: fault.KindTransient, Serve: Stale, Failure: true}
		if p.Policy != tiers.Abort { // an abort policy's failures record nothing on the breaker
			v.Breaker = Failure
		}
		return v
	case BreakerOpen:
		v := Verdict{Serve: Stale, Failure: p.OnOpen == tiers.Fail || p.Safety}
		if p.OnOpen == tiers.Fail {
			v.Cause, v.Kind = CauseOpenFail, fault.KindControl
		}
		return v
	case TierSkipped:
		return Verdict{Serve: Stale}
	}
	return Verdict{Serve: Kept} // not due, emergency-only, stopped: nothing to do
}

// judgeRun judges a module that was admitted.
func judgeRun(o Outcome, p Policy) Verdict {
	abort := p.Policy == tiers.Abort
	switch {
	case o.Late == Abandoned:
		// It ignored its context; its late result is discarded. Under abort it stops the
		// tick instead of failing.
		v := Verdict{Cause: CauseAbandoned, Kind: fault.KindTransient, Serve: Stale, Failure: !abort, Aborts: abort}
		if !abort {
			v.Breaker = Failure
		}
		return v
	case o.Late == Unstarted && o.Kind == fault.KindCanceled:
		return Verdict{Cause: CauseTickCanceled, Kind: fault.KindCanceled, Serve: Stale, Aborts: abort}
	case o.Late == Unstarted:
		// The runners were all stuck: not the module's failure, nothing on its breaker.
		return Verdict{Cause: CauseUnstarted, Kind: fault.KindTransient, Serve: Stale, Failure: !abort}
	case !o.Failed:
		return Verdict{Breaker: Success, Serve: Live}
	case o.Kind == fault.KindControl: // an expected short-circuit, not a fault
		return Verdict{Cause: CauseRun, Kind: o.Kind, Serve: Kept}
	case abort:
		return Verdict{Cause: CauseRun, Kind: o.Kind, Serve: Stale, Aborts: true}
	case o.Kind == fault.KindCanceled: // the tick was cancelled: not the module's fault
		return Verdict{Cause: CauseRun, Kind: o.Kind, Serve: Stale}
	}
	return Verdict{Cause: CauseRun, Kind: o.Kind, Breaker: Failure, Serve: Stale, Failure: true}
}

// Plain reports whether the verdict is a success after one attempt, which needs nothing
// done once its tier is over (no fallback, no retry count, no failure).
func (v Verdict) Plain(attempts int) bool { return v.Serve == Live && attempts <= 1 }
