package check_test

import (
	"slices"
	"sort"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/tiers"
)

// The hand-made sequences of the rule tables: two tiers, safety (guard) and work (a),
// plus whatever a case adds.
func baseConfig() check.Config {
	return check.Config{
		Tiers: []check.Tier{{Name: "safety", Budget: 50 * time.Millisecond}, {Name: "work", Budget: 100 * time.Millisecond}},
		Modules: []check.Module{
			{Name: "guard", Tier: 0, Key: "guard.result", Breaker: "guard", Policy: tiers.FailFast, Every: 1, MaxAttempts: 1, TTL: time.Second},
			{Name: "a", Tier: 1, Key: "a.result", Breaker: "a", Policy: tiers.Degrade, Every: 1, MaxAttempts: 3, TTL: time.Second},
		},
		Breakers: map[string]breaker.Settings{
			"guard": {Name: "guard", FailureThreshold: 2, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1, TripOn: fault.AllFaults},
			"a":     {Name: "a", FailureThreshold: 2, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 2, TripOn: fault.AllFaults},
		},
		Emergency: check.Emergency{SkipTiers: []string{"work"}, RecoverAfter: 2},
	}
}

// out is a module's outcome in a hand-made tick; the zero value is ok.
type out struct {
	st       faultsummary.Status
	kind     string
	attempts int
	circuit  string // breaker state after the tick; "" keeps the previous one
}

// seq builds a sequence of consistent summaries: tick k starts gap after tick k−1 and
// every tier that runs takes 1ms (or its budget when a module timed out).
type seq struct {
	cfg  check.Config
	t0   time.Time
	at   time.Time
	gap  time.Duration
	id   uint64
	prod map[string][2]time.Time
	em   faultsummary.Emergency
	br   map[string]string
	ss   []*faultsummary.Summary
}

func newSeq(muts ...func(*check.Config)) *seq {
	cfg := baseConfig()
	for _, m := range muts {
		m(&cfg)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return &seq{cfg: cfg, t0: t0, at: t0, gap: 100 * time.Millisecond, prod: map[string][2]time.Time{}, br: map[string]string{}}
}

func (q *seq) mod(name string) check.Module {
	for _, m := range q.cfg.Modules {
		if m.Name == name {
			return m
		}
	}
	panic("no module " + name)
}

// skip advances the clock by d (on top of the gap of the next tick).
func (q *seq) wait(d time.Duration) { q.at = q.at.Add(d) }

func failing(st faultsummary.Status) bool {
	switch st {
	case faultsummary.StatusFailed, faultsummary.StatusTimedOut, faultsummary.StatusBusy, faultsummary.StatusOpen, faultsummary.StatusProbeFailed:
		return true
	case faultsummary.StatusRejected:
		return true
	}
	return false
}

func nominal(st faultsummary.Status) bool { return !failing(st) }

// failedNow mirrors the engine's notion of a module failure for its error policy.
func failedNow(st faultsummary.Status, kind string, m check.Module) bool {
	switch st {
	case faultsummary.StatusBusy:
		return true
	case faultsummary.StatusOpen:
		return m.OnOpen == tiers.Fail || m.Tier == 0
	case faultsummary.StatusRejected:
		return m.OnReject == tiers.Fail || m.Tier == 0
	case faultsummary.StatusTimedOut:
		return m.Policy != tiers.Abort
	case faultsummary.StatusFailed, faultsummary.StatusProbeFailed:
		return m.Policy != tiers.Abort && kind != "canceled"
	}
	return false
}

// tick appends the next summary: every module ok unless outs says otherwise; edit (may be
// nil) then changes it, to break a rule.
func (q *seq) tick(outs map[string]out, edit func(*faultsummary.Summary)) *faultsummary.Summary {
	q.id++
	if q.id > 1 || len(q.ss) > 0 {
		q.at = q.at.Add(q.gap)
	}
	start := q.at
	s := &faultsummary.Summary{Schema: faultsummary.Schema, TickID: q.id, ScheduledAt: start, StartedAt: start,
		Finish: faultsummary.Completed, RetryCounts: map[string]int{}}
	var lines []faultsummary.Module
	prevEm := q.em.Active
	skip := map[int]bool{}
	for _, n := range q.cfg.Emergency.SkipTiers {
		for i, t := range q.cfg.Tiers {
			if t.Name == n {
				skip[i] = true
			}
		}
	}
	stopped := false
	var elapsed time.Duration
	for ti, t := range q.cfg.Tiers {
		tl := faultsummary.Tier{Index: ti, Name: t.Name, BudgetMs: ms(t.Budget)}
		emNow := q.em.Active
		if ti == 0 {
			emNow = prevEm
		}
		runs := !stopped && !(ti > 0 && q.em.Active && skip[ti])
		var failed, degraded, timedOut, abort bool
		for _, m := range q.cfg.Modules {
			if m.Tier != ti {
				continue
			}
			o := outs[m.Name]
			ln := faultsummary.Module{Name: m.Name, Tier: t.Name, TierIndex: ti, Breaker: m.Breaker, Served: faultsummary.Served{Key: m.Key}}
			switch {
			case !runs:
				ln.Status = faultsummary.StatusSkipped
			case m.EmergencyOnly && !emNow:
				ln.Status = faultsummary.StatusSkipped
			case q.id%uint64(m.Every) != 0:
				ln.Status = faultsummary.StatusNotDue
			case o.st == "":
				ln.Status = faultsummary.StatusOK
			default:
				ln.Status = o.st
			}
			switch ln.Status {
			case faultsummary.StatusOK:
				ln.Attempts, ln.LatencyMs = 1, 1
				ln.FaultKind = o.kind // "" or control
			case faultsummary.StatusRetried:
				ln.Attempts, ln.LatencyMs = max(o.attempts, 2), 1
			case faultsummary.StatusFailed, faultsummary.StatusProbeFailed, faultsummary.StatusProbeOK:
				ln.Attempts, ln.LatencyMs = max(o.attempts, 1), 1
				if ln.Status != faultsummary.StatusProbeOK {
					ln.FaultKind = o.kind
					if ln.FaultKind == "" {
						ln.FaultKind = "transient"
					}
				}
			case faultsummary.StatusTimedOut:
				ln.Attempts, ln.LatencyMs, ln.FaultKind = max(o.attempts, 1), ms(t.Budget), "transient"
				timedOut = true
			case faultsummary.StatusBusy:
				ln.FaultKind = "transient"
			}
			if ln.Attempts > 1 {
				s.RetryCounts[m.Name] = ln.Attempts - 1
			}
			if o.circuit != "" && runs {
				q.br[m.Breaker] = o.circuit
			}
			if runs {
				if m.Policy == tiers.FailFast && failedNow(ln.Status, ln.FaultKind, m) {
					failed = true
				}
				if m.Policy == tiers.Abort && failing(ln.Status) && (ln.Status != faultsummary.StatusOpen || m.OnOpen == tiers.Fail || ti == 0) {
					abort = true
				}
				if !nominal(ln.Status) {
					degraded = true
				}
				if ti == 0 && m.Policy != tiers.Abort && failedNow(ln.Status, ln.FaultKind, m) {
					tl.Reason = "safety failure"
				}
			}
			lines = append(lines, ln)
		}
		switch {
		case !runs:
			tl.Status = faultsummary.TierSkipped
		case failed:
			tl.Status = faultsummary.TierFailed
		case degraded:
			tl.Status = faultsummary.TierDegraded
		default:
			tl.Status = faultsummary.TierOK
		}
		if runs {
			d := time.Millisecond
			if timedOut {
				d = t.Budget
				tl.BudgetExhausted = true
				s.BudgetViolations = append(s.BudgetViolations, t.Name)
			}
			tl.ElapsedMs = ms(d)
			elapsed += d
		}
		if ti == 0 {
			q.emergency(tl.Reason != "")
			tl.Reason = ""
		}
		if runs && abort {
			stopped = true
			s.Finish = faultsummary.ShortCircuited
		} else if runs && failed && ti > 0 {
			stopped = true
			s.Finish = faultsummary.Failed
		}
		s.Tiers = append(s.Tiers, tl)
	}
	s.SetModules(lines)
	s.FinishedAt = start.Add(elapsed)
	s.WallMs = ms(elapsed)
	s.EmergencyMode = q.em.Active
	s.Emergency = q.em
	// Served entries, degraded keys, circuits.
	for i := range s.Modules() {
		ln := &s.Modules()[i]
		m := q.mod(ln.Name)
		ln.CircuitState = q.br[m.Breaker]
		if ln.CircuitState == "" {
			ln.CircuitState = "closed"
		}
		produced := ln.Status == faultsummary.StatusRetried || ln.Status == faultsummary.StatusProbeOK ||
			(ln.Status == faultsummary.StatusOK && ln.FaultKind != "control")
		if produced {
			ln.Served.Source = blackboard.Live
			continue
		}
		deg := failing(ln.Status) || (ln.Status == faultsummary.StatusSkipped && s.Tiers[ln.TierIndex].Status == faultsummary.TierSkipped &&
			!(m.EmergencyOnly && !s.EmergencyMode))
		p, ok := q.prod[m.Name]
		switch {
		case m.Tier == 0 && deg:
		case !ok:
		default:
			age := start.Sub(p[1])
			ln.Served.AgeMs = ms(age)
			if age >= m.TTL {
				ln.Served.Expired = true
			} else {
				ln.Served.Source = blackboard.LastGood
				ln.Served.Stale = deg
				ln.UsingFallback = true
			}
		}
		switch {
		case ln.Served.Expired:
			s.DegradedKeys = append(s.DegradedKeys, m.Key+" (expired)")
		case !deg:
		case ln.Served.Source == blackboard.LastGood:
			s.DegradedKeys = append(s.DegradedKeys, m.Key)
		default:
			s.DegradedKeys = append(s.DegradedKeys, m.Key+" (none)")
		}
	}
	for _, ln := range s.Modules() {
		if ln.Served.Source == blackboard.Live {
			q.prod[ln.Name] = [2]time.Time{start, s.FinishedAt}
		}
	}
	seen := map[string]bool{}
	for _, ln := range s.Modules() {
		if seen[ln.Breaker] {
			continue
		}
		seen[ln.Breaker] = true
		switch ln.CircuitState {
		case "open":
			s.OpenCircuits = append(s.OpenCircuits, ln.Breaker)
		case "half_open":
			s.HalfOpenCircuits = append(s.HalfOpenCircuits, ln.Breaker)
		}
	}
	sort.Strings(s.OpenCircuits)
	sort.Strings(s.HalfOpenCircuits)
	s.Normalize()
	s.OverallSeverity = s.ComputeSeverity()
	q.at = s.FinishedAt
	if edit != nil {
		edit(s)
	}
	q.ss = append(q.ss, s)
	return s
}

// emergency steps the emergency state like the engine does after the safety tier.
func (q *seq) emergency(failed bool) {
	em := &q.em
	switch {
	case !em.Active && failed:
		*em = faultsummary.Emergency{Active: true, SinceTick: q.id, Reason: "safety failure", Latched: q.cfg.Emergency.Latch, EndedTick: em.EndedTick}
	case !em.Active:
	case failed:
		em.HealthyTicks = 0
	default:
		em.HealthyTicks++
		if !em.Latched && em.HealthyTicks >= q.cfg.Emergency.RecoverAfter {
			em.Active = false
			em.EndedTick = q.id
		}
	}
}

// resetEmergency is the engine's operator reset, consumed by the next tick.
func (q *seq) resetEmergency() {
	if q.em.Active && q.em.Latched {
		q.em.Latched, q.em.HealthyTicks = false, 0
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// line returns a pointer to the named module's line.
func line(s *faultsummary.Summary, name string) *faultsummary.Module {
	for i := range s.Modules() {
		if s.Modules()[i].Name == name {
			return &s.Modules()[i]
		}
	}
	panic("no line " + name)
}

func rulesOf(vs []check.Violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v.Rule) {
			out = append(out, v.Rule)
		}
	}
	return out
}
