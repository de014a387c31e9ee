package decide

import (
	"strconv"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// Status is a module's status in one tick as a small number: the code of its row in the
// status table, faultsummary's, the one definition of what each status means (Public,
// Nominal, Ran, Produced read it). The engine keeps one per module per tick in a record
// without pointers. Every value but None is published.
type Status = faultsummary.StatusCode

// The module statuses, as StatusOf decides them. None is a line no one decided yet; it is
// never published.
const (
	None        = faultsummary.NoStatus
	OK          = faultsummary.CodeOK
	Retried     = faultsummary.CodeRetried
	Failed      = faultsummary.CodeFailed
	TimedOut    = faultsummary.CodeTimedOut
	Busy        = faultsummary.CodeBusy
	Open        = faultsummary.CodeOpen
	ProbeOK     = faultsummary.CodeProbeOK
	ProbeFailed = faultsummary.CodeProbeFailed
	Skipped     = faultsummary.CodeSkipped
	NotDue      = faultsummary.CodeNotDue
	Rejected    = faultsummary.CodeRejected
	Shed        = faultsummary.CodeShed // shed on overrun (see Shedding)
)

// Refusal is why a module was not run, decided at admission (see Admit), or NotRefused.
type Refusal uint8

// The refusals.
const (
	NotRefused    Refusal = iota
	EmergencyOnly         // an emergency-only module outside emergency mode
	NotDueTick            // a multi-rate module not due this tick
	StillBusy             // its run of an earlier tick has not returned
	BreakerOpen           // its breaker refused it
	TierSkipped           // its tier is skipped (emergency mode, or the tick stopped)
	Stopped               // the engine is closing: its worker no longer takes runs
	ShedLoad              // shed on overrun: a step of load shedding names it (see Shedding)
	BulkheadFull          // its bulkhead had no permit free (after its wait, if any)
)

// Late says how the tier's deadline caught a module that was admitted.
type Late uint8

// The ways of being late.
const (
	InTime    Late = iota // it returned before the deadline
	Abandoned             // still running at the deadline, or returned at or after it
	Unstarted             // never started before the deadline (or its tier's context ended first)
)

// Outcome is what the execution mechanism reports of one module in one tick: facts, no
// policy.
type Outcome struct {
	Refusal  Refusal
	Late     Late
	Attempts int
	Kind     fault.Kind // the final fault kind; fault.KindNone on success
	Failed   bool       // the run ended with an error
	Probe    bool       // it ran as a half-open probe
	// Starting: the cycle is starting (see Startup) and the module is in the safety tier.
	// Its failures are reported and counted by startup, but its breaker records none: a
	// sensor that fails its first ticks while warming up must not open its breaker, which
	// would keep it from ever succeeding and startup from ending but by its timeout.
	Starting bool
	// Overdue, for a StillBusy refusal: how long past its own deadline the outstanding run
	// of an earlier tick was when this tick's tier started (zero or less: not yet past it).
	Overdue time.Duration
}

// IgnoreGrace is how long a run may outlive its deadline before a module refused as busy
// is said to have ignored its context (CauseBusyIgnored): a module that honours its context
// still needs to see the cancellation, return and be scheduled, and in step mode the next
// tick starts at once. See docs/decisions.md.
const IgnoreGrace = 50 * time.Millisecond

// StatusOf returns the module's status for outcome o: the one place a status is decided.
func StatusOf(o Outcome) Status {
	switch o.Refusal {
	case NotRefused:
	case NotDueTick:
		return NotDue
	case StillBusy:
		return Busy
	case BreakerOpen:
		return Open
	case BulkheadFull:
		return Rejected

	case ShedLoad:
		return Shed
	default:
		return Skipped
	}
	switch {
	case o.Late == Abandoned:
		return TimedOut
	case o.Late == Unstarted:
		if o.Kind == fault.KindCanceled {
			return Failed // the tick was cancelled before it started
		}
		return TimedOut
	case !o.Failed && o.Probe:
		return ProbeOK
	case !o.Failed && o.Attempts > 1:
		return Retried
	case !o.Failed, o.Kind == fault.KindControl:
		return OK
	case o.Probe:
		return ProbeFailed
	}
	return Failed
}

// Cause names the error a line reports: the run's own (CauseRun), none, or one the engine
// gives a module it did not run to its end.
type Cause uint8

// The causes.
const (
	CauseNone Cause = iota
	CauseRun
	CauseBusy        // still running from an earlier tick, not yet past its deadline's grace
	CauseBusyIgnored // still running from an earlier tick, past its deadline by more than IgnoreGrace
	CauseAbandoned
	CauseOpenFail
	CauseUnstarted
	CauseTickCanceled
	CauseRejectFail
)

// causeError is the error reported for a module the engine did not run to its end.
type causeError string

func (e causeError) Error() string { return string(e) }

var causeErrors = [...]error{CauseNone: nil, CauseRun: nil,
	CauseBusy:         causeError("still running from an earlier tick"),
	CauseBusyIgnored:  causeError("still running from an earlier tick (ignored its context)"),
	CauseAbandoned:    causeError("still running at the tier deadline: abandoned, its late result discarded"),
	CauseOpenFail:     causeError("circuit breaker is open (on_open: fail)"),
	CauseUnstarted:    causeError("not started before the tier deadline"),
	CauseTickCanceled: causeError("not started: the tick was cancelled"),
	CauseRejectFail:   causeError("bulkhead is full (on_reject: fail)"),
}

// Err returns the error of a cause other than CauseRun (nil for CauseNone and CauseRun).
// A line refused as busy reports ErrSince instead, which names the tick.
func (c Cause) Err() error { return causeErrors[c] }

// ErrSince returns the error of cause c on a line whose module's outstanding run was
// admitted in tick since: for the busy causes it names that tick ("still running from
// tick 7"), for the others it is Err.
func (c Cause) ErrSince(since uint64) error {
	switch c {
	case CauseBusy:
		return causeError("still running from tick " + strconv.FormatUint(since, 10))
	case CauseBusyIgnored:
		return causeError("still running from tick " + strconv.FormatUint(since, 10) + " (ignored its context)")
	}
	return c.Err()
}

// Policy is what a module's configuration says about its outcome.
type Policy struct {
	Policy        tiers.Policy // the effective error policy
	OnOpen        tiers.OnOpen
	Safety        bool // the module is in the safety tier (tier 0)
	EmergencyOnly bool
	OnReject      tiers.OnOpen // what a refusal by the module's bulkhead means (bypass or fail)
}

// Gate is what admission looks at, before the breaker is asked.
type Gate struct {
	Tick          uint64
	Every         int  // run on tick ids divisible by it (≤ 1: every tick)
	EmergencyOnly bool // the module runs only in emergency mode
	Emergency     bool // emergency mode is active this tick
	TierSkipped   bool // the module's tier does not run this tick
	Busy          bool // a run of an earlier tick has not returned
	Shed          bool // load shedding sheds the module this tick (see Shedding.Sheds)
}

// Admit returns why the module is not run this tick, or NotRefused if its breaker is to
// be asked (AdmitBreaker). An emergency-only module outside emergency mode has nothing to
// do, which is not a degradation, also in a skipped tier.
func Admit(g Gate) Refusal {
	switch {
	case g.EmergencyOnly && !g.Emergency:
		return EmergencyOnly
	case g.TierSkipped:
		return TierSkipped
	case g.Every > 1 && g.Tick%uint64(g.Every) != 0:
		return NotDueTick
	case g.Shed:
		// Before busy: a shed module is not started, so an outstanding run of an earlier
		// tick is no failure of this one.
		return ShedLoad
	case g.Busy:
		return StillBusy
	}
	return NotRefused
}

// AdmitBreaker returns BreakerOpen if the breaker refused the module (allowed false: open,
// or half-open with every probe slot taken), NotRefused if it runs.
func AdmitBreaker(allowed bool) Refusal {
	if allowed {
		return NotRefused
	}
	return BreakerOpen
}

// AdmitBulkhead returns BulkheadFull if the module's bulkhead gave it no permit, NotRefused
// if it runs. The bulkhead is asked after the breaker: an open breaker refuses without
// taking a permit or counting a rejection, and a refused permit gives the breaker's back.
func AdmitBulkhead(acquired bool) Refusal {
	if acquired {
		return NotRefused
	}
	return BulkheadFull
}

// BulkheadWait returns how long a module may wait for a permit of its bulkhead: its
// bulkhead's wait, but never past its tier's deadline (left is the time to it). The wait
// comes out of the tier's budget: an attempt gets only what is left after it.
func BulkheadWait(wait, left time.Duration) time.Duration {
	return max(min(wait, left), 0)
}

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

// PlainVerdict returns the verdict on the plain run, a success after one attempt, in time
// and not as a probe (Outcome{Attempts: 1}): what Judge answers for it under any policy.
// The engine asks it once, not once per module per tick.
func PlainVerdict() Verdict { return plainVerdict }

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
	if o.Starting && p.Safety && v.Breaker == Failure {
		v.Breaker = Release
	}
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
		if o.Overdue > IgnoreGrace {
			v.Cause = CauseBusyIgnored
		}
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
	case BulkheadFull:
		// As for an open breaker: not run, nothing on the breaker (its permit is given
		// back), last-known-good served; a failure under on_reject: fail, and always in
		// the safety tier (a check not made is not passed).
		v := Verdict{Serve: Stale, Failure: p.OnReject == tiers.Fail || p.Safety}
		if p.OnReject == tiers.Fail {
			v.Cause, v.Kind = CauseRejectFail, fault.KindControl
		}
		return v
	case TierSkipped, ShedLoad:
		// Not run by the engine's choice: no failure, nothing on the breaker, the
		// last-known-good value served stale.
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
