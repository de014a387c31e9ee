package faultsummary_test

import (
	"encoding/json"
	"fmt"

	"github.com/cycled/cycled/faultsummary"
)

// A summary's module lines: all of them with Modules, one at a time with NumModules and
// ModuleAt (which build nothing for a summary the engine keeps compact), by name with
// Module. The JSON carries them under "modules".
func ExampleSummary_Modules() {
	s := &faultsummary.Summary{TickID: 7, Finish: faultsummary.Completed}
	s.SetModules([]faultsummary.Module{
		{Name: "guard", Tier: "safety", Status: faultsummary.StatusOK, Attempts: 1},
		{Name: "planner", Tier: "planning", TierIndex: 1, Status: faultsummary.StatusFailed, Attempts: 3,
			FaultKind: "transient", Error: "timeout"},
	})
	s.Normalize()
	s.OverallSeverity = s.ComputeSeverity()

	for i := range s.NumModules() {
		m := s.ModuleAt(i)
		fmt.Printf("%s/%s: %s after %d attempt(s)\n", m.Tier, m.Name, m.Status, m.Attempts)
	}
	if m, ok := s.Module("planner"); ok {
		fmt.Println("planner:", m.FaultKind, m.Error)
	}
	fmt.Println("severity:", s.OverallSeverity, "lines:", len(s.Modules()))

	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var back faultsummary.Summary
	if err := json.Unmarshal(b, &back); err != nil {
		panic(err)
	}
	fmt.Println("decoded:", back.TickID, back.NumModules(), back.ModuleAt(1).Status)
	// Output:
	// safety/guard: ok after 1 attempt(s)
	// planning/planner: failed after 3 attempt(s)
	// planner: transient timeout
	// severity: degraded lines: 2
	// decoded: 7 2 failed
}
