// Package replaycheck re-runs the decision core (package cycle/decide) over the module
// outcomes a flight recorder kept, with the rules of the running version, and lists every
// recorded field the rules would now decide differently: a module's status and the source
// served for its key, each tier's status, the tick's finish and overall severity, and the
// emergency state. It is what "cycled replay --check" prints; see docs/decisions.md,
// "Replay check".
//
// It reads recorded summaries only: no engine, no goroutine, no clock. What the recorder
// does not keep (the error policy of a module, the emergency configuration) is inferred
// from the recorded tick or given as an option; docs/decisions.md lists what cannot be
// compared.
package replaycheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// Diff is one recorded field that the current rules decide differently.
type Diff struct {
	TickID     uint64 `json:"tick_id"`
	Module     string `json:"module,omitempty"` // empty for a tier's or the tick's field
	Field      string `json:"field"`
	Recorded   string `json:"recorded"`
	Recomputed string `json:"recomputed"`
}

// String returns the difference as one line a person reads.
func (d Diff) String() string {
	where := ""
	if d.Module != "" {
		where = " " + d.Module
	}
	return fmt.Sprintf("tick %d%s %s: recorded %q, now %q", d.TickID, where, d.Field, d.Recorded, d.Recomputed)
}

// PolicyFunc returns the policy of module line m of recorded tick s.
type PolicyFunc func(s *faultsummary.Summary, m *faultsummary.Module) decide.Policy

// Option changes a Checker's rules or what it assumes of the configuration.
type Option func(*Checker)

// WithJudge replaces decide.Judge (the rule to check against; tests use it to change one
// rule).
func WithJudge(f func(decide.Outcome, decide.Policy) decide.Verdict) Option {
	return func(c *Checker) { c.judge = f }
}

// WithStatusOf replaces decide.StatusOf: the verdict's status is then f's.
func WithStatusOf(f func(decide.Outcome) decide.Status) Option {
	return func(c *Checker) { c.statusOf = f }
}

// WithPolicy replaces the recorded (or inferred, see InferPolicy) error policy of the
// modules.
func WithPolicy(f PolicyFunc) Option { return func(c *Checker) { c.policy = f } }

// WithEmergency sets the emergency configuration the ticks ran with. Without it, the
// configuration is read from the recorded transitions (see Checker.emergencyConfig).
func WithEmergency(cfg decide.EmergencyConfig) Option {
	return func(c *Checker) { c.em, c.emSet = cfg, true }
}

// Checker recomputes recorded ticks in order. The zero value is not usable: use New.
type Checker struct {
	judge    func(decide.Outcome, decide.Policy) decide.Verdict
	statusOf func(decide.Outcome) decide.Status
	policy   PolicyFunc
	em       decide.EmergencyConfig
	emSet    bool
	recorded []recordedRules       // the rules recorded (Check reads them)
	rules    *recorder.Rules       // those of the tick being checked; nil: none recorded
	prev     *faultsummary.Summary // the tick checked before, if it is the one before
}

// New returns a Checker with the current version's rules, changed by opts.
func New(opts ...Option) *Checker {
	c := &Checker{judge: decide.Judge, em: decide.EmergencyConfig{RecoverAfter: 3}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Check reads the recorded ticks from..to (0: no bound) oldest first and returns every
// difference, and how many ticks were checked.
func Check(ctx context.Context, rd *sqlite.Reader, from, to uint64, opts ...Option) ([]Diff, int, error) {
	c := New(opts...)
	var err error
	if c.recorded, err = loadRules(ctx, rd); err != nil {
		return nil, 0, err
	}
	var diffs []Diff
	n := 0
	after := uint64(0)
	if from > 0 {
		after = from - 1
	}
	for {
		page, err := rd.Ticks(ctx, recorder.Query{After: after, Before: bound(to), Limit: 500, Ascending: true})
		if err != nil {
			return diffs, n, err
		}
		for _, t := range page {
			var s faultsummary.Summary
			if err := s.UnmarshalJSON(t.JSON); err != nil {
				return diffs, n, fmt.Errorf("replay check: decode tick %d: %w", t.ID, err)
			}
			diffs = append(diffs, c.Tick(&s)...)
			n++
			after = t.ID
		}
		if len(page) < 500 {
			return diffs, n, nil
		}
	}
}

// bound is the exclusive upper bound of a Query for the last id to (0: none).
func bound(to uint64) uint64 {
	if to == 0 {
		return 0
	}
	return to + 1
}

// onRejectOf returns the on_reject of module line m as the line shows it: fail when it was
// rejected with the on_reject: fail error (the recorder keeps no on_reject; a line not
// rejected does not depend on it).
func onRejectOf(m *faultsummary.Module) tiers.OnOpen {
	if m.Status == faultsummary.StatusRejected && m.Error == decide.CauseRejectFail.Err().Error() {
		return tiers.Fail
	}
	return tiers.Bypass
}

// InferPolicy is the PolicyFunc used for a module whose policy the database does not
// record (one written before the recorder kept the rules): it is read from the tick: a module whose tier failed while it failed is
// fail_fast, the module a short-circuited tick names is abort, any other is degrade; an
// open line with the on_open error is on_open fail; tier 0 is the safety tier.
func InferPolicy(s *faultsummary.Summary, m *faultsummary.Module) decide.Policy {
	p := decide.Policy{Policy: tiers.Degrade, Safety: m.TierIndex == 0}
	if m.Status == faultsummary.StatusOpen && m.Error == decide.CauseOpenFail.Err().Error() {
		p.OnOpen = tiers.Fail
	}
	p.OnReject = onRejectOf(m)
	for _, t := range s.Tiers {
		if t.Reason == "short-circuited by "+m.Name {
			p.Policy = tiers.Abort
			return p
		}
	}
	if m.TierIndex < len(s.Tiers) && s.Tiers[m.TierIndex].Status == faultsummary.TierFailed && m.Status.Failing() {
		p.Policy = tiers.FailFast
	}
	return p
}

// served returns the source a verdict's Serve implies, and whether it is derivable ("" if
// it is any source but a live one).
func served(sv decide.Serve, got blackboard.Source) (want string, differs bool) {
	switch sv {
	case decide.Live:
		return blackboard.Live.String(), got != blackboard.Live
	case decide.Nothing:
		return blackboard.None.String(), got != blackboard.None
	}
	return "not live", got == blackboard.Live
}

// emergencyFields returns the compared fields of an emergency state.
func emergencyFields(active bool, e faultsummary.Emergency) [][2]string {
	return [][2]string{{"emergency_mode", fmt.Sprint(active)}, {"emergency.active", fmt.Sprint(e.Active)},
		{"emergency.since_tick", fmt.Sprint(e.SinceTick)}, {"emergency.reason", e.Reason},
		{"emergency.latched", fmt.Sprint(e.Latched)}, {"emergency.healthy_ticks", fmt.Sprint(e.HealthyTicks)},
		{"emergency.ended_tick", fmt.Sprint(e.EndedTick)}}
}

// isCause reports whether a line's error is the one cause c gives.
func isCause(m *faultsummary.Module, c decide.Cause) bool {
	return m.Error != "" && strings.EqualFold(m.Error, c.Err().Error())
}
