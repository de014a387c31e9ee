package check_test

import (
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
)

// Cases of the rules of load shedding, startup and asynchronous modules.
func init() {
	shedding := func(c *check.Config) { c.Shedding = true }
	startup := func(c *check.Config) { c.Startup = true }
	async := func(c *check.Config) { c.Async = []string{"bg"} }
	ruleCases = append(ruleCases,
		ruleCase{rule: check.RuleShed, name: "shed without shedding", build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) { s.Shed = &faultsummary.ShedState{Level: 1, Modules: []string{}, Reason: "r", SinceTick: 1} }))
		}},
		ruleCase{rule: check.RuleShed, name: "safety module shed", cfg: cfgs(shedding), build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) {
				line(s, "guard").Status = faultsummary.StatusShed
				s.Shed = &faultsummary.ShedState{Level: 1, Modules: []string{"guard"}, Reason: "r", SinceTick: 1}
			}))
		}},
		ruleCase{rule: check.RuleShed, name: "shed line not listed", cfg: cfgs(shedding), build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) { line(s, "a").Status = faultsummary.StatusShed }))
		}},
		ruleCase{rule: check.RuleStarting, name: "starting without startup", build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) {
				s.CycleState = faultsummary.CycleStarting
				s.Startup = &faultsummary.StartupState{Pending: []string{"guard"}}
			}))
		}},
		ruleCase{rule: check.RuleStarting, name: "starting again after startup ended", cfg: cfgs(startup), build: func(q *seq, bad bool) {
			q.tick(nil, nil)
			q.tick(nil, when(bad, func(s S) {
				s.CycleState = faultsummary.CycleStarting
				s.Startup = &faultsummary.StartupState{Pending: []string{"guard"}}
			}))
		}},
		ruleCase{rule: check.RuleAsync, name: "async run of a module that is not async", cfg: cfgs(async), build: func(q *seq, bad bool) {
			name := "bg"
			if bad {
				name = "a"
			}
			q.tick(nil, nil)
			q.tick(nil, func(s S) {
				s.Async = []faultsummary.AsyncRun{{Name: name, OriginTick: 1, Status: faultsummary.StatusOK}}
			})
		}},
		ruleCase{rule: check.RuleAsync, name: "async run reported in its own tick", cfg: cfgs(async), build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) {
				s.Async = []faultsummary.AsyncRun{{Name: "bg", OriginTick: 1, Status: faultsummary.StatusOK}}
			}))
		}},
	)
}

func cfgs(fs ...func(*check.Config)) []func(*check.Config) { return fs }
