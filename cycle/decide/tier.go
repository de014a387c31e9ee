package decide

import "github.com/cycled/cycled/faultsummary"

// TierResult is what a tier's verdicts make of the tier. The zero value is a tier in which
// nothing went wrong; Add each verdict that is not plain (see Verdict.Plain), in the
// modules' order.
type TierResult struct {
	Failed       bool // a fail_fast module failed
	Aborted      bool // an abort module stopped the tick
	AbortBy      int  // the index of the last module that aborted
	SafetyFailed bool // a safety module failed: emergency mode
	SafetyBy     int  // the index of the first safety module that failed
	Degraded     bool // some module's status is not nominal
}

// Add takes the verdict of module i into the result.
func (r *TierResult) Add(v Verdict, i int) {
	if v.FailsTier {
		r.Failed = true
	}
	if v.Aborts {
		r.Aborted, r.AbortBy = true, i
	}
	if v.SafetyFailure && !r.SafetyFailed {
		r.SafetyFailed, r.SafetyBy = true, i
	}
	if !v.Status.Nominal() {
		r.Degraded = true
	}
}

// Status returns the tier's status in the summary.
func (r TierResult) Status() faultsummary.TierStatus {
	switch {
	case r.Failed:
		return faultsummary.TierFailed
	case r.Degraded:
		return faultsummary.TierDegraded
	}
	return faultsummary.TierOK
}

// Healthy reports whether every module of the tier is nominal: for the safety tier, a
// tick that counts towards leaving emergency mode.
func (r TierResult) Healthy() bool { return !r.Failed && !r.Degraded }

// Decisive reports whether the engine must decide what follows the tier (stop the tick,
// enter emergency mode) rather than the next tier just starting.
func (r TierResult) Decisive() bool { return r.Failed || r.Aborted || r.SafetyFailed }

// Stop returns how the tick ends if the tier at index ti stops it: an abort
// short-circuits it, a failed tier after the safety tier fails it (a failed safety tier
// enters emergency mode instead, see Emergency.Next).
func (r TierResult) Stop(ti int) (faultsummary.Finish, bool) {
	switch {
	case r.Aborted:
		return faultsummary.ShortCircuited, true
	case r.Failed && ti > 0:
		return faultsummary.Failed, true
	}
	return faultsummary.Completed, false
}

// SkipTier reports whether a tier is skipped, and why: the tick stopped earlier
// (stopReason set), or emergency mode skips it.
func SkipTier(stopReason string, emergency, skippedInEmergency bool) (string, bool) {
	switch {
	case stopReason != "":
		return stopReason, true
	case emergency && skippedInEmergency:
		return "emergency mode", true
	}
	return "", false
}
