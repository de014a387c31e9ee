package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/tools/sim"
)

// benchSim runs cfg for ticks ticks b.N times and reports the virtual time simulated per
// second of real time (x-realtime) and the real time per simulated tick.
func benchSim(b *testing.B, cfg *config.Config, ticks int) {
	b.ReportAllocs()
	var virtual time.Duration
	start := time.Now()
	for range b.N {
		rep, err := sim.Run(context.Background(), sim.Options{Config: cfg, Ticks: ticks, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		virtual += rep.End.Sub(rep.Start)
	}
	real := time.Since(start)
	b.ReportMetric(virtual.Seconds()/real.Seconds(), "x-realtime")
	b.ReportMetric(float64(real.Nanoseconds())/float64(b.N*ticks), "ns/tick")
}

// BenchmarkSimDemo10Min simulates ten minutes of the demo at 10 Hz (6000 ticks).
func BenchmarkSimDemo10Min(b *testing.B) {
	cfg, err := config.Demo()
	if err != nil {
		b.Fatal(err)
	}
	benchSim(b, cfg, 6000)
}

// BenchmarkSim1000Modules100Hz simulates one minute of 1000 modules at 100 Hz (6000
// ticks): five tiers of 200 modules, most of them taking virtual time.
func BenchmarkSim1000Modules100Hz(b *testing.B) {
	cfg, err := config.Load(config.WithData([]byte(wideConfig(1000)), "wide"), config.WithoutEnv())
	if err != nil {
		b.Fatal(err)
	}
	benchSim(b, cfg, 6000)
}

// wideConfig is n builtin modules at 100 Hz in five tiers of 1.5ms budgets: a quarter
// answer at once, the rest take 100µs-1ms, and one in fifty fails now and then.
func wideConfig(n int) string {
	var s strings.Builder
	s.WriteString("cycle: {period: 10ms}\ntiers:\n")
	names := []string{"safety", "knowledge", "perception", "planning", "execution"}
	for _, t := range names {
		fmt.Fprintf(&s, "  - {name: %s, budget: 1500us, max_attempts: 2}\n", t)
	}
	s.WriteString("modules:\n")
	for i := range n {
		lat := "100us-1ms"
		if i%4 == 0 {
			lat = "0s"
		}
		fail := 0.0
		if i%50 == 7 && i%5 != 0 {
			fail = 0.05
		}
		fmt.Fprintf(&s, "  - {name: m%04d, tier: %s, builtin: {value: %d, latency: %s, fail_rate: %g}}\n", i, names[i%5], i, lat, fail)
	}
	return s.String()
}
