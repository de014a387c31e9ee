package decide

import (
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// Status is a module's status in one tick as a small number (the engine keeps one per
// module per tick in a record without pointers). Every value but None is published.
type Status uint8

// The module statuses. None is a line no one decided yet; it is never published.
const (
	None Status = iota
	OK
	Retried
	Failed
	TimedOut
	Busy
	Open
	ProbeOK
	ProbeFailed
	Skipped
	NotDue
	numStatuses
)

var statusNames = [numStatuses]faultsummary.Status{"", faultsummary.StatusOK, faultsummary.StatusRetried,
	faultsummary.StatusFailed, faultsummary.StatusTimedOut, faultsummary.StatusBusy, faultsummary.StatusOpen,
	faultsummary.StatusProbeOK, faultsummary.StatusProbeFailed, faultsummary.StatusSkipped,
	faultsummary.StatusNotDue}

// Public returns the status as the summary names it ("" for None).
func (s Status) Public() faultsummary.Status { return statusNames[s] }

// Nominal reports whether the status is not a degradation of its tier (see
// faultsummary.Status.Nominal, the one definition).
func (s Status) Nominal() bool { return s != None && statusNames[s].Nominal() }

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
}

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
	CauseBusy
	CauseAbandoned
	CauseOpenFail
	CauseUnstarted
	CauseTickCanceled
)

// causeError is the error reported for a module the engine did not run to its end.
type causeError string

func (e causeError) Error() string { return string(e) }

var causeErrors = [...]error{CauseNone: nil, CauseRun: nil,
	CauseBusy:         causeError("still running from an earlier tick (ignored its context)"),
	CauseAbandoned:    causeError("still running at the tier deadline: abandoned, its late result discarded"),
	CauseOpenFail:     causeError("circuit breaker is open (on_open: fail)"),
	CauseUnstarted:    causeError("not started before the tier deadline"),
	CauseTickCanceled: causeError("not started: the tick was cancelled"),
}

// Err returns the error of a cause other than CauseRun (nil for CauseNone and CauseRun).
func (c Cause) Err() error { return causeErrors[c] }

// Policy is what a module's configuration says about its outcome.
type Policy struct {
	Policy        tiers.Policy // the effective error policy
	OnOpen        tiers.OnOpen
	Safety        bool // the module is in the safety tier (tier 0)
	EmergencyOnly bool
}

// Gate is what admission looks at, before the breaker is asked.
type Gate struct {
	Tick          uint64
	Every         int  // run on tick ids divisible by it (≤ 1: every tick)
	EmergencyOnly bool // the module runs only in emergency mode
	Emergency     bool // emergency mode is active this tick
	TierSkipped   bool // the module's tier does not run this tick
	Busy          bool // a run of an earlier tick has not returned
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
