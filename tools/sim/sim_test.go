package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/sim"
)

// runDemo simulates the embedded demo and returns its summaries (JSON lines) and report.
func runDemo(t testing.TB, ticks int, seed uint64, sc *sim.Scenario) ([]byte, *sim.Report) {
	t.Helper()
	cfg, err := config.Demo()
	if err != nil {
		t.Fatal(err)
	}
	if sc != nil {
		if err := sc.Check(cfg); err != nil {
			t.Fatal(err)
		}
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	rep, err := sim.Run(context.Background(), sim.Options{Config: cfg, Scenario: sc, Ticks: ticks, Seed: seed,
		Summaries: func(s *faultsummary.Summary) error { return enc.Encode(s) }})
	if err != nil {
		t.Fatal(err)
	}
	return lines.Bytes(), rep
}
