// Command embed shows cycled embedded in a Go program: an engine with three tiers, a custom
// in-process module with state (odometry) next to function modules, run tick by tick in
// step mode, with a one-line summary per tick.
//
// Tick 2 shows a transient failure retried within the tier budget; tick 3 an odometry
// that fails every attempt, so that the planner reads its last-known-good value, tagged
// stale, and its own output is tagged derived_from_stale.
//
//	go run ./examples/embed
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

func main() {
	if err := run(context.Background(), os.Stdout, 4); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// odometry is a custom module with state: the distance travelled, one unit per tick. The
// engine never runs one module twice at once, so its state needs no lock.
type odometry struct {
	pos int
}

// Run is tiers.Module. It fails transiently on the first attempt of tick 2 (retried within
// the budget) and on every attempt of tick 3 (the tick goes on with the last good value).
func (o *odometry) Run(ctx context.Context, in *tiers.Input) (any, error) {
	switch {
	case in.TickID() == 2 && in.Attempt() == 1:
		return nil, fault.Transient(errors.New("wheel encoder busy"))
	case in.TickID() == 3:
		return nil, fault.Transient(errors.New("wheel encoder offline"))
	}
	o.pos++
	return o.pos, nil
}

// run builds the engine, runs ticks ticks in step mode and writes a summary line per tick.
func run(ctx context.Context, w io.Writer, ticks int) error {
	bo := retrybudget.Backoff{Base: time.Millisecond, Factor: 2, Max: 5 * time.Millisecond}
	cfg := cycle.Config{
		Period: 0, // step mode: a tick runs when Tick is called
		Tiers: []tiers.Tier{
			{Name: "safety", Budget: 20 * time.Millisecond, MaxAttempts: 1, Backoff: bo},
			{Name: "perception", Budget: 50 * time.Millisecond, MaxAttempts: 2, Backoff: bo},
			{Name: "planning", Budget: 50 * time.Millisecond, MaxAttempts: 2, Backoff: bo},
		},
	}
	guard := tiers.ModuleFunc(func(ctx context.Context, in *tiers.Input) (any, error) {
		return "clear", nil
	})
	planner := tiers.ModuleFunc(func(ctx context.Context, in *tiers.Input) (any, error) {
		e, _ := in.Get("odometry.result") // the entry: value, source, stale, age
		if e.Source == blackboard.None {
			return nil, fault.Transient(errors.New("no position yet"))
		}
		return fmt.Sprintf("advance from %v", e.Value), nil
	})
	e, err := cycle.New(cfg, []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: guard},
		{Spec: tiers.ModuleSpec{Name: "odometry", Tier: "perception"}, Module: &odometry{}},
		{Spec: tiers.ModuleSpec{Name: "planner", Tier: "planning", Reads: []string{"odometry.result"}}, Module: planner},
	})
	if err != nil {
		return err // a *tiers.ValidationError lists every problem with its path
	}
	defer e.Close()

	for range ticks {
		s, err := e.Tick(ctx)
		if err != nil {
			return err
		}
		odo, _ := s.Module("odometry")
		plan, _ := s.Module("planner")
		fmt.Fprintf(w, "tick %d %s/%s: odometry %s after %d attempt(s), serves %s %v (stale %v); planner %q (derived_from_stale %v)\n",
			s.TickID, s.Finish, s.OverallSeverity, odo.Status, odo.Attempts, odo.Served.Source, odo.Served.Value,
			odo.Served.Stale, plan.Served.Value, plan.Served.DerivedFromStale)
	}
	fmt.Fprintln(w, "blackboard:")
	for _, en := range e.Blackboard() {
		fmt.Fprintf(w, "  %s = %v (%s, tick %d)\n", en.Key, en.Value, en.Source, en.TickID)
	}
	return nil
}
