package modules_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// ExampleBuiltin shows a builtin module whose first attempt of every tick fails with a
// transient fault, then how an operator switches its faults at runtime with the body of
// POST /modules/{name}/faults.
func ExampleBuiltin() {
	b, err := modules.NewBuiltin(modules.Settings{
		Value:  map[string]any{"recalled": 3},
		Faults: modules.Faults{FailAttempts: 1},
	})
	if err != nil {
		panic(err)
	}
	in := tiers.NewInput(nil, tiers.ModuleSpec{Name: "memory_recall"}, 1)
	in.Begin(1, time.Now().Add(200*time.Millisecond))
	for attempt := 1; attempt <= 2; attempt++ {
		in.SetAttempt(attempt)
		v, err := b.Run(context.Background(), in)
		fmt.Printf("attempt %d: value=%v kind=%v\n", attempt, v, fault.Classify(err))
	}

	f, err := modules.ApplyFaultsJSON(b, []byte(`{"fail_ticks": [[5, 9]], "fail_kind": "downstream"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println("fail_ticks now", f.FailTicks, "kind", f.FailKind)
	// Output:
	// attempt 1: value=<nil> kind=transient
	// attempt 2: value=map[recalled:3] kind=none
	// fail_ticks now [[5 9]] kind downstream
}
