// Package advise proposes per-tier budgets and max_attempts and per-breaker cooldowns
// for a configuration, from what a simulation of it shows, and checks every proposal by
// simulating the advised configuration against the same data: the same scenario, seed and
// length (the same latencies and failures, drawn from the same random streams). A proposal
// that the re-simulation does not show to help is dropped.
//
// The objective: a tier exhausts its budget in at most MaxExhaustion of the ticks it runs
// (default 0.1%), and the p99 tick duration stays under the period. A configuration that
// meets it gets no proposal: advise never tightens a budget that works.
package advise

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/tools/sim"
)

// Objective is what the advice aims at.
type Objective struct {
	// MaxExhaustion is the share of its ticks in which a tier may exhaust its budget.
	// Zero means 0.001.
	MaxExhaustion float64
}

func (o Objective) withDefaults() Objective {
	if o.MaxExhaustion <= 0 {
		o.MaxExhaustion = 0.001
	}
	return o
}

// String states the objective for a person.
func (o Objective) String() string {
	return fmt.Sprintf("every tier exhausts its budget in at most %.2g%% of the ticks it runs; p99 tick duration under the period",
		100*o.withDefaults().MaxExhaustion)
}

// Proposal is one change of the configuration.
type Proposal struct {
	// Path is the configuration key changed ("tiers[1].budget").
	Path string `json:"path"`
	// From and To are its value before and after.
	From string `json:"from"`
	To   string `json:"to"`
	// Why says what the simulation showed.
	Why string `json:"why"`
	// Effect is the effect the re-simulation predicts.
	Effect string `json:"effect"`
}

// Advice is the result: the proposals, the patch that applies them, and the reports of
// the simulation before and of the re-simulation after.
//
// Advice is only what meets the objective: when no change the search could check meets
// it, Proposals and Patch are empty, Met is false, and the best configuration found is
// under BestFound, apart, so that it never reads as advice.
type Advice struct {
	Objective string      `json:"objective"`
	Proposals []Proposal  `json:"proposals"`
	Patch     string      `json:"patch"`
	Met       bool        `json:"objective_met"` // the advised configuration meets the objective
	BestFound *BestFound  `json:"best_found,omitempty"`
	Warnings  []string    `json:"warnings"`
	Before    *sim.Report `json:"before"`
	After     *sim.Report `json:"after"` // the re-simulation of the advice, else of the best found

	tuned *config.Config
}

// BestFound is the closest the search came to an objective it could not meet: changes and
// their patch that are not advice.
type BestFound struct {
	Proposals []Proposal `json:"proposals"`
	Patch     string     `json:"patch"`
	Warnings  []string   `json:"warnings"` // of the best found configuration
}

// Config returns the advised configuration, else the best one found.
func (a *Advice) Config() *config.Config { return a.tuned }

// DropBestFound forgets the best found of an objective not met, and the re-simulation of
// it: After becomes Before, as nothing is advised.
func (a *Advice) DropBestFound() {
	if a.BestFound != nil {
		a.BestFound, a.After = nil, a.Before
	}
}

// maxSteps bounds the re-simulations of a budget search.
const maxSteps = 12

// Advise simulates o, proposes changes that meet obj, and checks them by re-simulation.
func Advise(ctx context.Context, o sim.Options, obj Objective) (*Advice, error) {
	obj = obj.withDefaults()
	before, err := sim.Run(ctx, o)
	if err != nil {
		return nil, err
	}
	a := &Advice{Objective: obj.String(), Proposals: []Proposal{}, Warnings: []string{}, Before: before}
	t := &tuner{ctx: ctx, o: o, obj: obj, cfg: clone(o.Config), cur: before}
	if err := t.budgets(a); err != nil {
		return nil, err
	}
	if err := t.attempts(a); err != nil {
		return nil, err
	}
	if err := t.cooldowns(a); err != nil {
		return nil, err
	}
	a.After, a.tuned = t.cur, t.cfg
	a.Met = meets(t.cur, obj, t.cfg.Cycle.Period)
	a.Patch = patch(o.Config, t.cfg)
	if len(a.Proposals) > 0 {
		a.Warnings = append(a.Warnings, budgetWarnings(t.cfg)...)
	}
	if !a.Met && len(a.Proposals) > 0 {
		a.BestFound = &BestFound{Proposals: a.Proposals, Patch: strings.Replace(a.Patch, patchHeader, bestFoundHeader, 1), Warnings: a.Warnings}
		a.Proposals, a.Patch, a.Warnings = []Proposal{}, "", []string{}
	}
	return a, nil
}

// tuner holds the configuration being tuned and its latest simulation.
type tuner struct {
	ctx context.Context
	o   sim.Options
	obj Objective
	cfg *config.Config
	cur *sim.Report
}

// simulate runs cfg on the same scenario, seed and length.
func (t *tuner) simulate(cfg *config.Config) (*sim.Report, error) {
	o := t.o
	o.Config = cfg
	o.Summaries, o.Attach = nil, nil
	return sim.Run(t.ctx, o)
}

// clone copies what advise changes: tiers and breakers.
func clone(c *config.Config) *config.Config {
	n := *c
	n.Tiers = append([]config.TierConfig(nil), c.Tiers...)
	n.Breakers = maps.Clone(c.Breakers)
	return &n
}

func exhaustion(t sim.TierReport) float64 {
	if t.Ran == 0 {
		return 0
	}
	return float64(t.Exhaustions) / float64(t.Ran)
}

func meets(r *sim.Report, obj Objective, period time.Duration) bool {
	for _, t := range r.Tiers {
		if exhaustion(t) > obj.MaxExhaustion {
			return false
		}
	}
	return period == 0 || r.TickP99Ms <= float64(period)/float64(time.Millisecond)
}

func tierReport(r *sim.Report, name string) (sim.TierReport, bool) {
	for _, t := range r.Tiers {
		if t.Name == name {
			return t, true
		}
	}
	return sim.TierReport{}, false
}
