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

// A two-tier cycle: a safety check, then a planner that reads the check's result and fails
// transiently on its first attempt.
func Example() {
	ts := []tiers.Tier{
		{Name: "safety", Budget: 20 * time.Millisecond, MaxAttempts: 1},
		{Name: "planning", Budget: 50 * time.Millisecond, MaxAttempts: 3},
	}
	guard := tiers.ModuleFunc(func(ctx context.Context, in *tiers.Input) (any, error) {
		return "clear", nil
	})
	planner := tiers.ModuleFunc(func(ctx context.Context, in *tiers.Input) (any, error) {
		if in.Attempt() == 1 {
			return nil, fault.Transient(errors.New("planner warming up"))
		}
		return fmt.Sprintf("go (path %v)", in.Value("guard.result")), nil
	})
	e, err := cycle.New(cycle.Config{Tiers: ts}, []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: guard},
		{Spec: tiers.ModuleSpec{Name: "planner", Tier: "planning", Reads: []string{"guard.result"}}, Module: planner},
	})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	s, err := e.Tick(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("tick", s.TickID, s.Finish, s.OverallSeverity)
	for _, m := range s.Modules() {
		fmt.Printf("%s/%s: %s after %d attempt(s), serves %s\n", m.Tier, m.Name, m.Status, m.Attempts, m.Served.Source)
	}
	fmt.Println("retries:", s.RetryCounts)
	for _, b := range e.Blackboard() {
		fmt.Printf("%s = %v\n", b.Key, b.Value)
	}
	// Output:
	// tick 1 completed ok
	// safety/guard: ok after 1 attempt(s), serves live
	// planning/planner: retried after 2 attempt(s), serves live
	// retries: map[planner:1]
	// guard.result = clear
	// planner.result = go (path clear)
}
