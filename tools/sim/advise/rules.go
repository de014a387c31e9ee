package advise

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/sim"
)

// budgets raises the budget of every tier that exhausts it too often, by half again at a
// time, re-simulating each step, until the tier meets the objective.
func (t *tuner) budgets(a *Advice) error {
	orig := map[int]time.Duration{}
	for step := 0; step < maxSteps; step++ {
		cand := clone(t.cfg)
		raised := false
		for i, tc := range cand.Tiers {
			tr, ok := tierReport(t.cur, tc.Name)
			if !ok || exhaustion(tr) <= t.obj.MaxExhaustion {
				continue
			}
			if _, seen := orig[i]; !seen {
				orig[i] = tc.Budget
			}
			cand.Tiers[i].Budget = roundUp(time.Duration(float64(tc.Budget) * 1.5))
			raised = true
		}
		if !raised {
			break
		}
		r, err := t.simulate(cand)
		if err != nil {
			return err
		}
		t.cfg, t.cur = cand, r
	}
	for i, from := range orig {
		tc := t.cfg.Tiers[i]
		b, _ := tierReport(a.Before, tc.Name)
		n, _ := tierReport(t.cur, tc.Name)
		a.Proposals = append(a.Proposals, Proposal{Path: fmt.Sprintf("tiers[%d].budget", i), From: from.String(), To: tc.Budget.String(),
			Why:    fmt.Sprintf("tier %s exhausted its budget in %d of %d ticks (%.2f%%)", tc.Name, b.Exhaustions, b.Ran, 100*exhaustion(b)),
			Effect: fmt.Sprintf("re-simulated: %d exhaustions (%.2f%%), budget use p99 %.2f", n.Exhaustions, 100*exhaustion(n), n.UseP99)})
	}
	sortProposals(a.Proposals)
	return nil
}

// roundUp rounds d up to a whole millisecond (a tenth of one below 10ms).
func roundUp(d time.Duration) time.Duration {
	unit := time.Millisecond
	if d < 10*time.Millisecond {
		unit = 100 * time.Microsecond
	}
	return time.Duration(math.Ceil(float64(d)/float64(unit))) * unit
}

// attempts proposes one more attempt for a tier whose modules fail with retryable
// (transient) faults while the tier has budget to spare, and keeps it only if the
// re-simulation shows fewer failed modules and no new exhaustion.
func (t *tuner) attempts(a *Advice) error {
	for i, tc := range t.cfg.Tiers {
		if i == 0 {
			continue // the safety tier fails closed: more attempts would hide a failing check
		}
		tr, ok := tierReport(t.cur, tc.Name)
		if !ok || tr.UseP99 > 0.5 || transientFailures(t.cur, tc.Name) == 0 {
			continue
		}
		cand := clone(t.cfg)
		cand.Tiers[i].MaxAttempts = tc.MaxAttempts + 1
		r, err := t.simulate(cand)
		if err != nil {
			return err
		}
		nt, _ := tierReport(r, tc.Name)
		before, after := failed(t.cur, tc.Name), failed(r, tc.Name)
		if after >= before || exhaustion(nt) > t.obj.MaxExhaustion {
			continue // the failures are not the kind a retry cures
		}
		a.Proposals = append(a.Proposals, Proposal{Path: fmt.Sprintf("tiers[%d].max_attempts", i), From: fmt.Sprint(tc.MaxAttempts),
			To:     fmt.Sprint(tc.MaxAttempts + 1),
			Why:    fmt.Sprintf("tier %s: %d module runs failed with transient faults after every attempt, with budget to spare (use p99 %.2f)", tc.Name, before, tr.UseP99),
			Effect: fmt.Sprintf("re-simulated: %d failed runs instead of %d, budget use p99 %.2f", after, before, nt.UseP99)})
		t.cfg, t.cur = cand, r
	}
	return nil
}

func transientFailures(r *sim.Report, tier string) int {
	n := 0
	for _, m := range r.Modules {
		if m.Tier == tier {
			n += m.FaultKinds[fault.KindTransient.String()]
		}
	}
	return n
}

func failed(r *sim.Report, tier string) int {
	n := 0
	for _, m := range r.Modules {
		if m.Tier == tier {
			n += m.Statuses[string(faultsummary.StatusFailed)] + m.Statuses[string(faultsummary.StatusProbeFailed)]
		}
	}
	return n
}

// cooldowns doubles the cooldown of a named breaker whose probes fail (it closes and
// reopens, calling a downstream that is still out), and keeps the change only if the
// re-simulation shows fewer failed probes.
func (t *tuner) cooldowns(a *Advice) error {
	for _, name := range slices.Sorted(maps.Keys(t.cfg.Breakers)) {
		bc := t.cfg.Breakers[name]
		before := probesFailed(t.cur, t.cfg, name)
		if before == 0 || bc.Cooldown <= 0 {
			continue
		}
		cand := clone(t.cfg)
		nb := bc
		nb.Cooldown = 2 * bc.Cooldown
		cand.Breakers[name] = nb
		r, err := t.simulate(cand)
		if err != nil {
			return err
		}
		after := probesFailed(r, cand, name)
		if after >= before || !meets(r, t.obj, cand.Cycle.Period) && meets(t.cur, t.obj, t.cfg.Cycle.Period) {
			continue
		}
		a.Proposals = append(a.Proposals, Proposal{Path: fmt.Sprintf("breakers.%s.cooldown", name), From: bc.Cooldown.String(),
			To:     nb.Cooldown.String(),
			Why:    fmt.Sprintf("breaker %s: %d probes failed (the downstream was still out when it half-opened)", name, before),
			Effect: fmt.Sprintf("re-simulated: %d failed probes", after)})
		t.cfg, t.cur = cand, r
	}
	return nil
}

// probesFailed counts the failed probes of the modules that share breaker name.
func probesFailed(r *sim.Report, cfg *config.Config, name string) int {
	users := map[string]bool{}
	for _, m := range cfg.Modules {
		if m.Breaker == name {
			users[m.Name] = true
		}
	}
	n := 0
	for _, m := range r.Modules {
		if users[m.Name] {
			n += m.Statuses[string(faultsummary.StatusProbeFailed)]
		}
	}
	return n
}
