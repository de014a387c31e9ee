package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/tiers"
)

// TestTracingCost measures the daemon at 100 Hz with N=500 builtin modules, with tracing
// off, on at the default sampling (parentbased_traceidratio 0.01), on for every tick
// (always_on), or sampling none (always_off: what the hook costs), exporting to a receiver in the test: the daemon's CPU per tick and the
// start lag's p99, over $TRACING_BENCH seconds per window, the variants alternating for
// $TRACING_ROUNDS rounds (default 3); medians (BENCHMARKS.md, "Tracing and module
// histograms"). Skipped unless TRACING_BENCH is set.
func TestTracingCost(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("TRACING_BENCH"))
	if secs == 0 {
		t.Skip("set TRACING_BENCH=<seconds per window>")
	}
	rounds, _ := strconv.Atoi(os.Getenv("TRACING_ROUNDS"))
	if rounds == 0 {
		rounds = 3
	}
	rc := newOTLPReceiver(t)
	var b strings.Builder
	b.WriteString("cycle: {period: 10ms, history: 4000}\nhttp: {addr: 127.0.0.1:0}\nmodules:\n")
	seeds := tiers.SeedTiers()
	for i := range 500 {
		fmt.Fprintf(&b, "  - {name: m%d, tier: %s, builtin: {value: 1}}\n", i, seeds[i%len(seeds)].Name)
	}
	b.WriteString("state_dir: " + t.TempDir() + "\n")
	cfg := write(t, "cycled.yaml", b.String())
	variants := []struct {
		name string
		env  []string
	}{
		{"off", nil},
		{"on, always_off", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL, "OTEL_TRACES_SAMPLER=always_off"}},
		{"on, default sampling", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL}},
		{"on, always_on", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL, "OTEL_TRACES_SAMPLER=always_on"}},
	}
	cpu := make([][]float64, len(variants)) // µs of daemon CPU per tick
	p99 := make([][]float64, len(variants)) // ms
	for round := range rounds {
		for i, v := range variants {
			d := start(t, v.env, "--config", cfg)
			first := untilTick(t, d, waitTick(t, d, 0)+200) // two seconds to settle
			c0, t0 := procTreeCPU(d.cmd.Process.Pid), time.Now()
			last := untilTick(t, d, first+uint64(secs*100))
			c1 := procTreeCPU(d.cmd.Process.Pid)
			var r lagRun
			lags := windowLags(t, d, first, last, &r)
			cpu[i] = append(cpu[i], (c1-c0)/float64(last-first)*1e6)
			p99[i] = append(p99[i], lags[min(len(lags)-1, len(lags)*99/100)])
			t.Logf("round %d, %s: %.0f µs CPU/tick, p99 start lag %.3f ms, %d ticks in %v", round, v.name,
				cpu[i][len(cpu[i])-1], p99[i][len(p99[i])-1], last-first, time.Since(t0).Round(time.Millisecond))
			if code, _ := d.stop(); code != 0 {
				t.Fatalf("exit %d", code)
			}
		}
	}
	for i, v := range variants {
		fmt.Printf("TRACING %-22s CPU/tick median %.0f µs %v, p99 start lag median %.3f ms %s\n", v.name,
			median(cpu[i]), roundAll(cpu[i]), median(p99[i]), fmtMs(p99[i]))
	}
	fmt.Printf("TRACING spans received: %d\n", len(rc.all()))
}

func roundAll(v []float64) []float64 {
	out := slices.Clone(v)
	for i := range out {
		out[i] = float64(int(out[i] + 0.5))
	}
	return out
}
