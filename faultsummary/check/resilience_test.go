package check_test

import (
	"testing"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/tiers"
)

const rejected = faultsummary.StatusRejected

// withBulkheadB adds module b of the work tier, naming bulkhead db.
func withBulkheadB(c *check.Config) {
	withModule(check.Module{Name: "b", Tier: 1, Key: "b.result", Breaker: "b", Policy: tiers.Degrade, Every: 1,
		MaxAttempts: 1, Bulkhead: "db"}, c.Breakers["a"])(c)
	bs := c.Breakers["a"]
	bs.Name = "b"
	c.Breakers["b"] = bs
}

// withWorkBudget gives the work tier a retry budget of ratio 0, one retry per tick.
func withWorkBudget(c *check.Config) {
	c.RetryBudgets = []check.RetryBudget{{Name: "work", Window: 2, MinPerTick: 1}}
	for i := range c.Modules {
		if c.Modules[i].Tier == 1 {
			c.Modules[i].RetryBudget = "work"
		}
	}
}

func init() {
	ruleCases = append(ruleCases,
		ruleCase{rule: check.RuleBulkhead, name: "rejected without a bulkhead", cfg: []func(*check.Config){withBulkheadB},
			build: func(q *seq, bad bool) {
				q.tick(nil, nil)
				if bad {
					q.tick(M{"a": {st: rejected}}, nil)
				} else {
					q.tick(M{"b": {st: rejected}}, nil)
				}
			}},
		ruleCase{rule: check.RuleStatusAttempts, name: "rejected made an attempt", cfg: []func(*check.Config){withBulkheadB},
			build: func(q *seq, bad bool) {
				q.tick(nil, nil)
				q.tick(M{"b": {st: rejected}}, when(bad, func(s S) { s.Modules()[2].Attempts = 1 }))
			}},
		ruleCase{rule: check.RuleBreakerOpen, name: "rejected moved its breaker", cfg: []func(*check.Config){withBulkheadB},
			build: func(q *seq, bad bool) {
				q.tick(nil, nil)
				q.tick(M{"b": {st: rejected}}, when(bad, func(s S) {
					s.Modules()[2].CircuitState = "open"
					s.OpenCircuits = []string{"b"}
				}))
			}},
		ruleCase{rule: check.RuleRetryBudget, name: "retries over the window's budget", cfg: []func(*check.Config){withWorkBudget},
			build: func(q *seq, bad bool) {
				q.tick(M{"a": {st: retried, attempts: 2}}, nil)
				if bad {
					q.tick(M{"a": {st: retried, attempts: 4}}, nil) // 3 retries > min 1, and 1 + 3 > 0 × 2 + 1
				} else {
					q.tick(M{"a": {st: retried, attempts: 2}}, func(s S) { s.RetryBudgetExhausted = []string{"work"} })
				}
			}},
		ruleCase{rule: check.RuleRetryBudget, name: "exhausted names an unknown budget", cfg: []func(*check.Config){withWorkBudget},
			build: func(q *seq, bad bool) {
				q.tick(nil, when(bad, func(s S) { s.RetryBudgetExhausted = []string{"llm"} }))
			}},
	)
}

// TestRejectedFailsUnderOnRejectFail: a rejected fail_fast module with on_reject fail
// fails its tier; with bypass it does not.
func TestRejectedFailsUnderOnRejectFail(t *testing.T) {
	for _, onReject := range []tiers.OnOpen{tiers.Bypass, tiers.Fail} {
		q := newSeq(withBulkheadB, func(c *check.Config) {
			c.Modules[2].Policy, c.Modules[2].OnReject = tiers.FailFast, onReject
		})
		q.tick(nil, nil)
		s := q.tick(M{"b": {st: rejected}}, nil)
		c := check.New(q.cfg)
		for _, x := range q.ss {
			c.Check(x)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("on_reject %s: %v", onReject, err)
		}
		if failed := s.Tiers[1].Status == faultsummary.TierFailed; failed != (onReject == tiers.Fail) {
			t.Fatalf("on_reject %s: tier %s", onReject, s.Tiers[1].Status)
		}
	}
}
