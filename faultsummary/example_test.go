package faultsummary_test

import (
	"encoding/json"
	"fmt"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
)

// A summary's module lines: all of them with Modules, one at a time with NumModules and
// ModuleAt (or ModuleInto, see its example), by name with Module. The JSON carries them
// under "modules".
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

// Reading the lines of many summaries one at a time, as a metrics exporter does every tick:
// ModuleInto fills one Module of the caller's (ModuleAt would build each line of a
// summary the engine keeps compact on the heap), and PlainAt skips the plain successes
// (ok after one attempt, a live value, a closed circuit) without building them.
func ExampleSummary_ModuleInto() {
	s := &faultsummary.Summary{TickID: 8}
	s.SetModules([]faultsummary.Module{
		{Name: "guard", Tier: "safety", Status: faultsummary.StatusOK, Attempts: 1, CircuitState: "closed",
			Served: faultsummary.Served{Key: "guard.result", Source: blackboard.Live}},
		{Name: "planner", Tier: "planning", Status: faultsummary.StatusRetried, Attempts: 2, CircuitState: "closed",
			Served: faultsummary.Served{Key: "planner.result", Source: blackboard.Live}},
		{Name: "recall", Tier: "knowledge", Status: faultsummary.StatusFailed, Attempts: 1, CircuitState: "open",
			FaultKind: "transient", Error: "timeout", UsingFallback: true,
			Served: faultsummary.Served{Key: "recall.result", Source: blackboard.LastGood, Stale: true, AgeMs: 100}},
	})
	var m faultsummary.Module
	plain := 0
	for i := range s.NumModules() {
		if s.PlainAt(i) {
			plain++
			continue
		}
		s.ModuleInto(i, &m)
		fmt.Printf("%s: %s, %d attempt(s), served %s\n", m.Name, m.Status, m.Attempts, m.Served.Source)
	}
	fmt.Println("plain:", plain)
	// Output:
	// planner: retried, 2 attempt(s), served live
	// recall: failed, 1 attempt(s), served last_good
	// plain: 1
}
