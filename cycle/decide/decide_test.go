package decide

import (
	"testing"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// One row per admission rule.
func TestAdmit(t *testing.T) {
	for _, c := range []struct {
		name string
		g    Gate
		want Refusal
	}{
		{"due every tick", Gate{Tick: 7}, NotRefused},
		{"every 2, due", Gate{Tick: 8, Every: 2}, NotRefused},
		{"every 2, not due", Gate{Tick: 7, Every: 2}, NotDueTick},
		{"busy", Gate{Tick: 7, Busy: true}, StillBusy},
		{"not due beats busy", Gate{Tick: 7, Every: 2, Busy: true}, NotDueTick},
		{"emergency-only outside emergency", Gate{Tick: 7, EmergencyOnly: true}, EmergencyOnly},
		{"emergency-only in emergency", Gate{Tick: 7, EmergencyOnly: true, Emergency: true}, NotRefused},
		{"tier skipped", Gate{Tick: 7, TierSkipped: true}, TierSkipped},
		{"tier skipped, emergency-only outside emergency", Gate{Tick: 7, TierSkipped: true, EmergencyOnly: true}, EmergencyOnly},
		{"tier skipped beats busy", Gate{Tick: 7, TierSkipped: true, Busy: true}, TierSkipped},
	} {
		if got := Admit(c.g); got != c.want {
			t.Errorf("%s: Admit = %d, want %d", c.name, got, c.want)
		}
	}
	if AdmitBreaker(true) != NotRefused || AdmitBreaker(false) != BreakerOpen {
		t.Error("AdmitBreaker: a refusal is open, a permit runs")
	}
}

var (
	degrade   = Policy{Policy: tiers.Degrade}
	failFast  = Policy{Policy: tiers.FailFast}
	abort     = Policy{Policy: tiers.Abort}
	openFail  = Policy{Policy: tiers.Degrade, OnOpen: tiers.Fail}
	safety    = Policy{Policy: tiers.FailFast, Safety: true}
	safetyAbt = Policy{Policy: tiers.Abort, Safety: true}
)

func ran(attempts int, kind fault.Kind) Outcome {
	return Outcome{Attempts: attempts, Kind: kind, Failed: kind != fault.KindNone}
}

// One row per rule of a module's outcome: every status, every error policy.
// starting returns o judged while the cycle is starting.
func starting(o Outcome) Outcome { o.Starting = true; return o }

func TestJudge(t *testing.T) {
	tr, ctl, can := fault.KindTransient, fault.KindControl, fault.KindCanceled
	for _, c := range []struct {
		name string
		o    Outcome
		p    Policy
		want Verdict
	}{
		{"ok", ran(1, 0), degrade, Verdict{Status: OK, Breaker: Success, Serve: Live}},
		{"retried", ran(3, 0), degrade, Verdict{Status: Retried, Breaker: Success, Serve: Live}},
		{"probe ok", Outcome{Attempts: 1, Probe: true}, degrade, Verdict{Status: ProbeOK, Breaker: Success, Serve: Live}},
		{"failed, degrade", ran(2, tr), degrade,
			Verdict{Status: Failed, Cause: CauseRun, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true}},
		{"failed, fail_fast", ran(1, fault.KindInternal), failFast,
			Verdict{Status: Failed, Cause: CauseRun, Kind: fault.KindInternal, Breaker: Failure, Serve: Stale, Failure: true, FailsTier: true}},
		{"failed, abort: no breaker failure", ran(1, tr), abort,
			Verdict{Status: Failed, Cause: CauseRun, Kind: tr, Serve: Stale, Aborts: true}},
		{"failed in the safety tier: fail closed", ran(1, tr), safety,
			Verdict{Status: Failed, Cause: CauseRun, Kind: tr, Breaker: Failure, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"failed in the safety tier while starting: counted, no breaker failure", starting(ran(1, tr)), safety,
			Verdict{Status: Failed, Cause: CauseRun, Kind: tr, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"timed out in the safety tier while starting: no breaker failure", starting(Outcome{Late: Abandoned, Attempts: 1}), safety,
			Verdict{Status: TimedOut, Cause: CauseAbandoned, Kind: tr, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"busy in the safety tier while starting: no breaker failure", starting(Outcome{Refusal: StillBusy}), safety,
			Verdict{Status: Busy, Cause: CauseBusy, Kind: tr, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"ok in the safety tier while starting: the success is recorded", starting(ran(1, 0)), safety,
			Verdict{Status: OK, Breaker: Success, Serve: Live}},
		{"failed in another tier while starting: recorded as ever", starting(ran(1, tr)), degrade,
			Verdict{Status: Failed, Cause: CauseRun, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true}},
		{"failed in the safety tier, abort: no emergency", ran(1, tr), safetyAbt,
			Verdict{Status: Failed, Cause: CauseRun, Kind: tr, Serve: Nothing, Aborts: true}},
		{"probe failed", Outcome{Attempts: 1, Kind: tr, Failed: true, Probe: true}, degrade,
			Verdict{Status: ProbeFailed, Cause: CauseRun, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true}},
		{"control kind: ok, not a fault", ran(1, ctl), failFast, Verdict{Status: OK, Cause: CauseRun, Kind: ctl, Serve: Kept}},
		{"canceled: not the module's fault", ran(1, can), failFast, Verdict{Status: Failed, Cause: CauseRun, Kind: can, Serve: Stale}},
		{"canceled, abort", ran(1, can), abort, Verdict{Status: Failed, Cause: CauseRun, Kind: can, Serve: Stale, Aborts: true}},
		{"timed out (abandoned)", Outcome{Late: Abandoned, Attempts: 1}, failFast,
			Verdict{Status: TimedOut, Cause: CauseAbandoned, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true, FailsTier: true}},
		{"timed out (abandoned), abort", Outcome{Late: Abandoned, Attempts: 1}, abort,
			Verdict{Status: TimedOut, Cause: CauseAbandoned, Kind: tr, Serve: Stale, Aborts: true}},
		{"never started", Outcome{Late: Unstarted, Kind: tr, Failed: true}, degrade,
			Verdict{Status: TimedOut, Cause: CauseUnstarted, Kind: tr, Serve: Stale, Failure: true}},
		{"never started, abort: nothing", Outcome{Late: Unstarted, Kind: tr, Failed: true}, abort,
			Verdict{Status: TimedOut, Cause: CauseUnstarted, Kind: tr, Serve: Stale}},
		{"never started, the tick cancelled", Outcome{Late: Unstarted, Kind: can, Failed: true}, safety,
			Verdict{Status: Failed, Cause: CauseTickCanceled, Kind: can, Serve: Nothing}},
		{"busy", Outcome{Refusal: StillBusy}, degrade,
			Verdict{Status: Busy, Cause: CauseBusy, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true}},
		{"busy, abort: aborts, nothing on the breaker", Outcome{Refusal: StillBusy}, abort,
			Verdict{Status: Busy, Cause: CauseBusy, Kind: tr, Serve: Stale, Failure: true, Aborts: true}},
		{"busy, its run at its deadline's grace: not said to ignore its context", Outcome{Refusal: StillBusy, Overdue: IgnoreGrace}, degrade,
			Verdict{Status: Busy, Cause: CauseBusy, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true}},
		{"busy, its run past its deadline's grace: ignored its context", Outcome{Refusal: StillBusy, Overdue: IgnoreGrace + 1}, degrade,
			Verdict{Status: Busy, Cause: CauseBusyIgnored, Kind: tr, Breaker: Failure, Serve: Stale, Failure: true}},
		{"busy, abort, ignored its context", Outcome{Refusal: StillBusy, Overdue: time.Second}, abort,
			Verdict{Status: Busy, Cause: CauseBusyIgnored, Kind: tr, Serve: Stale, Failure: true, Aborts: true}},
		{"busy in the safety tier", Outcome{Refusal: StillBusy}, safety,
			Verdict{Status: Busy, Cause: CauseBusy, Kind: tr, Breaker: Failure, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"open, bypass", Outcome{Refusal: BreakerOpen}, degrade, Verdict{Status: Open, Serve: Stale}},
		{"open, on_open fail", Outcome{Refusal: BreakerOpen}, openFail,
			Verdict{Status: Open, Cause: CauseOpenFail, Kind: ctl, Serve: Stale, Failure: true}},
		{"open in the safety tier: a standing failure", Outcome{Refusal: BreakerOpen}, safety,
			Verdict{Status: Open, Serve: Nothing, Failure: true, FailsTier: true, SafetyFailure: true}},
		{"not due", Outcome{Refusal: NotDueTick}, safety, Verdict{Status: NotDue, Serve: Kept}},
		{"emergency-only outside emergency", Outcome{Refusal: EmergencyOnly}, degrade, Verdict{Status: Skipped, Serve: Kept}},
		{"worker stopped", Outcome{Refusal: Stopped}, degrade, Verdict{Status: Skipped, Serve: Kept}},
		{"tier skipped", Outcome{Refusal: TierSkipped}, failFast, Verdict{Status: Skipped, Serve: Stale}},
	} {
		if got := Judge(c.o, c.p); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		if got := judgeAll(c.o, c.p); got != c.want {
			t.Errorf("%s (rule by rule):\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// Every status has a public name, and Nominal agrees with faultsummary's definition.
func TestStatusNames(t *testing.T) {
	nominal := map[Status]bool{OK: true, Retried: true, ProbeOK: true, NotDue: true, Skipped: true}
	for _, row := range faultsummary.Statuses() {
		s := row.Code
		if s.Public() == "" {
			t.Errorf("status %d has no name", s)
		}
		if s.Nominal() != nominal[s] {
			t.Errorf("%s: Nominal %v", s.Public(), s.Nominal())
		}
		if !s.Public().Valid() || s.Public().Failing() == nominal[s] {
			t.Errorf("%s: Valid %v Failing %v", s.Public(), s.Public().Valid(), s.Public().Failing())
		}
	}
	if None.Nominal() || None.Public() != "" {
		t.Error("None is neither nominal nor published")
	}
	for c := CauseBusy; c <= CauseTickCanceled; c++ {
		if c.Err() == nil || c.ErrSince(1) == nil {
			t.Errorf("cause %d has no error", c)
		}
	}
}

// A busy line says what is known: the tick its outstanding run started in, and that it
// ignored its context only when that is the cause.
func TestBusyErrors(t *testing.T) {
	for _, c := range []struct {
		c     Cause
		since uint64
		want  string
	}{
		{CauseBusy, 7, "still running from tick 7"},
		{CauseBusyIgnored, 12, "still running from tick 12 (ignored its context)"},
		{CauseAbandoned, 3, CauseAbandoned.Err().Error()},
	} {
		if got := c.c.ErrSince(c.since).Error(); got != c.want {
			t.Errorf("cause %d since %d: %q, want %q", c.c, c.since, got, c.want)
		}
	}
	if CauseRun.ErrSince(1) != nil || CauseNone.ErrSince(1) != nil {
		t.Error("CauseRun and CauseNone have no error of their own")
	}
}

// One row per rule of a tier's result.
func TestTierResult(t *testing.T) {
	ok := Verdict{Status: OK}
	for _, c := range []struct {
		name      string
		vs        []Verdict
		status    faultsummary.TierStatus
		healthy   bool
		decisive  bool
		finish    faultsummary.Finish
		stop      bool
		abortBy   int
		safetyBy  int
		safetyIdx bool
	}{
		{name: "all ok", vs: []Verdict{ok, ok}, status: faultsummary.TierOK, healthy: true, finish: faultsummary.Completed},
		{name: "not due and skipped are nominal", vs: []Verdict{{Status: NotDue}, {Status: Skipped}}, status: faultsummary.TierOK, healthy: true, finish: faultsummary.Completed},
		{name: "a degraded module", vs: []Verdict{ok, {Status: Failed}}, status: faultsummary.TierDegraded, finish: faultsummary.Completed},
		{name: "fail_fast fails the tier and the tick", vs: []Verdict{{Status: Failed, FailsTier: true}}, status: faultsummary.TierFailed,
			decisive: true, finish: faultsummary.Failed, stop: true},
		{name: "abort short-circuits, the last one names it", vs: []Verdict{{Status: Failed, Aborts: true}, ok, {Status: Busy, Aborts: true}},
			status: faultsummary.TierDegraded, decisive: true, finish: faultsummary.ShortCircuited, stop: true, abortBy: 2},
		{name: "a safety failure, the first one names it", vs: []Verdict{ok, {Status: Open, SafetyFailure: true}, {Status: Failed, SafetyFailure: true}},
			status: faultsummary.TierDegraded, decisive: true, finish: faultsummary.Completed, safetyBy: 1, safetyIdx: true},
	} {
		var r TierResult
		for i, v := range c.vs {
			r.Add(v, i)
		}
		ti := 1
		if c.safetyIdx {
			ti = 0
		}
		fin, stop := r.Stop(ti)
		if r.Status() != c.status || r.Healthy() != c.healthy || r.Decisive() != c.decisive || fin != c.finish || stop != c.stop ||
			(r.Aborted && r.AbortBy != c.abortBy) || (r.SafetyFailed && r.SafetyBy != c.safetyBy) {
			t.Errorf("%s: %+v: status %s healthy %v decisive %v finish %s stop %v", c.name, r, r.Status(), r.Healthy(), r.Decisive(), fin, stop)
		}
	}
	// A failed safety tier does not fail the tick: emergency mode follows.
	if fin, stop := (TierResult{Failed: true, SafetyFailed: true}).Stop(0); stop || fin != faultsummary.Completed {
		t.Error("a failed safety tier stopped the tick")
	}
}

func TestSkipTier(t *testing.T) {
	for _, c := range []struct {
		stop           string
		emergency      bool
		skippedInEmerg bool
		reason         string
		skip           bool
	}{
		{"", false, true, "", false},
		{"", true, false, "", false},
		{"", true, true, "emergency mode", true},
		{"tier x failed", false, false, "tier x failed", true},
		{"short-circuited by m", true, true, "short-circuited by m", true},
	} {
		if r, s := SkipTier(c.stop, c.emergency, c.skippedInEmerg); r != c.reason || s != c.skip {
			t.Errorf("SkipTier(%q, %v, %v) = %q, %v", c.stop, c.emergency, c.skippedInEmerg, r, s)
		}
	}
}

// One row per emergency transition.
func TestEmergencyNext(t *testing.T) {
	plain := EmergencyConfig{RecoverAfter: 3}
	latch := EmergencyConfig{Latch: true, RecoverAfter: 2}
	fail := SafetyTick{Tick: 10, Failed: true, Reason: "s: failed"}
	healthy := SafetyTick{Tick: 10, Healthy: true}
	unhealthy := SafetyTick{Tick: 10}
	active := Emergency{Active: true, Since: 4, Reason: "r", Healthy: 1, EndedTick: 2}
	for _, c := range []struct {
		name   string
		s      Emergency
		t      SafetyTick
		c      EmergencyConfig
		want   Emergency
		change Change
	}{
		{"calm stays calm", Emergency{EndedTick: 2}, healthy, plain, Emergency{EndedTick: 2}, NoChange},
		{"calm, unhealthy but not failed", Emergency{}, unhealthy, plain, Emergency{}, NoChange},
		{"a failure enters", Emergency{EndedTick: 2, Reason: "old"}, fail, plain,
			Emergency{Active: true, Since: 10, Reason: "s: failed", EndedTick: 2}, Entered},
		{"a failure enters latched", Emergency{}, fail, latch, Emergency{Active: true, Since: 10, Reason: "s: failed", Latched: true}, Entered},
		{"a healthy tick counts", active, healthy, plain, Emergency{Active: true, Since: 4, Reason: "r", Healthy: 2, EndedTick: 2}, NoChange},
		{"enough healthy ticks leave", active, SafetyTick{Tick: 11, Healthy: true}, EmergencyConfig{RecoverAfter: 2},
			Emergency{Since: 4, Reason: "r", Healthy: 2, EndedTick: 11}, Left},
		{"an unhealthy tick restarts the count", active, unhealthy, plain, Emergency{Active: true, Since: 4, Reason: "r", EndedTick: 2}, NoChange},
		{"a failure restarts the count", active, fail, plain, Emergency{Active: true, Since: 4, Reason: "r", EndedTick: 2}, NoChange},
		{"a failure latches again", active, fail, latch, Emergency{Active: true, Since: 4, Reason: "r", Latched: true, EndedTick: 2}, NoChange},
		{"latched: healthy ticks count but do not leave", Emergency{Active: true, Latched: true, Healthy: 5}, healthy, latch,
			Emergency{Active: true, Latched: true, Healthy: 6}, NoChange},
	} {
		got, ch := c.s.Next(c.t, c.c)
		if got != c.want || ch != c.change {
			t.Errorf("%s:\n got %+v %d\nwant %+v %d", c.name, got, ch, c.want, c.change)
		}
	}
}

func TestEmergencyReset(t *testing.T) {
	for _, c := range []struct {
		name    string
		s, want Emergency
	}{
		{"latched: unlatched, count restarts", Emergency{Active: true, Latched: true, Healthy: 4}, Emergency{Active: true}},
		{"not latched: unchanged", Emergency{Active: true, Healthy: 1}, Emergency{Active: true, Healthy: 1}},
		{"calm: unchanged", Emergency{EndedTick: 3}, Emergency{EndedTick: 3}},
	} {
		if got := c.s.Reset(); got != c.want {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

// One row per overrun rule: a tick in time, one that overran, one that overran far.
func TestOverrunNext(t *testing.T) {
	o := time.Unix(1000, 0)
	p := 10 * time.Millisecond
	g := Grid{Origin: o, Period: p, K: 4} // the tick just run was due at o+40ms
	at := func(ms int) time.Time { return o.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name    string
		o       Overrun
		end     time.Time
		next    time.Time
		skipped int
	}{
		{"skip, in time", OverrunSkip, at(45), at(50), 0},
		{"skip, ended on the next point", OverrunSkip, at(50), at(50), 0},
		{"skip, overran three points", OverrunSkip, at(72), at(80), 3},
		{"catch_up, in time", OverrunCatchUp, at(45), at(50), 0},
		{"catch_up, behind within the cap", OverrunCatchUp, at(72), at(50), 0},
		{"catch_up, behind past the cap", OverrunCatchUp, at(95), at(70), 2},
		{"delay, in time", OverrunDelay, at(45), at(55), 0},
		{"delay, overran", OverrunDelay, at(72), at(82), 0},
	} {
		ng, skipped := c.o.Next(g, c.end, 3)
		if !ng.At().Equal(c.next) || skipped != c.skipped || ng.Period != p {
			t.Errorf("%s: next %v skipped %d, want %v %d", c.name, ng.At().Sub(o), skipped, c.next.Sub(o), c.skipped)
		}
	}
}

func TestOverrunNames(t *testing.T) {
	for o := Overrun(0); o.Valid(); o++ {
		var back Overrun
		b, _ := o.MarshalText()
		if err := back.UnmarshalText(b); err != nil || back != o {
			t.Errorf("%s does not round-trip: %v", o, err)
		}
	}
	var o Overrun
	if err := o.UnmarshalText([]byte("sometimes")); err == nil {
		t.Error("an unknown policy was accepted")
	}
	if err := o.UnmarshalText(nil); err != nil || o != OverrunSkip {
		t.Error("empty is skip")
	}
	if Overrun(9).Valid() || Overrun(9).String() != "overrun(9)" {
		t.Error("an unknown policy is not valid")
	}
}
