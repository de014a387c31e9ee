package cycle_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// Check every summary of an engine with the invariant checker, then break one on purpose.
func ExampleNewChecker() {
	cfg := cycle.Config{Tiers: []tiers.Tier{
		{Name: "safety", Budget: time.Second},
		{Name: "planning", Budget: time.Second, MaxAttempts: 3},
	}}
	regs := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: tiers.ModuleFunc(
			func(context.Context, *tiers.Input) (any, error) { return "clear", nil })},
		{Spec: tiers.ModuleSpec{Name: "planner", Tier: "planning"}, Module: tiers.ModuleFunc(
			func(_ context.Context, in *tiers.Input) (any, error) {
				if in.Attempt() == 1 {
					return nil, fault.Transient(errors.New("warming up"))
				}
				return "go", nil
			})},
	}
	c, err := cycle.NewChecker(cfg, regs)
	if err != nil {
		panic(err)
	}
	e, err := cycle.New(cfg, regs)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	for range 3 {
		s, err := e.Tick(context.Background())
		if err != nil {
			panic(err)
		}
		c.Check(s)
	}
	fmt.Println("violations:", c.Err())

	s, _ := e.Tick(context.Background())
	delete(s.RetryCounts, "planner") // a summary that lies about the planner's retry
	for _, v := range c.Check(s) {
		fmt.Println(v)
	}
	// Output:
	// violations: <nil>
	// tick 4: retry_counts: module "planner": retried after 2 attempts, retry_counts has 0 (present false), want 1
}
