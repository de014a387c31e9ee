package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/daemon/metrics"
	"github.com/cycled/cycled/faultsummary"
)

// durLines are testLines that also tell each line's latency without building it, as the
// engine's lines do.
type durLines struct{ testLines }

func (l durLines) Latency(i int) time.Duration {
	return time.Duration(l.ms[i].LatencyMs * float64(time.Millisecond))
}

// TestModuleDurations checks cycled_module_duration_seconds: every run of a module is
// observed under its module and tier with its latency (a plain success of unchanged lines
// too, which is counted without building its line), a module that did not run (no
// attempt) is not, and a module keeps its series when a reload moves it.
func TestModuleDurations(t *testing.T) {
	line := func(name, tier string, st faultsummary.Status, attempts int, ms float64) faultsummary.Module {
		return faultsummary.Module{Name: name, Tier: tier, Status: st, Attempts: attempts, LatencyMs: ms, CircuitState: "closed",
			Served: faultsummary.Served{Key: name + ".result", Source: blackboard.Live}}
	}
	id1, id2 := new(int), new(int)
	ticks := []struct {
		id    *int
		lines []faultsummary.Module
	}{
		{id1, []faultsummary.Module{line("a", "work", faultsummary.StatusOK, 1, 0.05), line("b", "work", faultsummary.StatusFailed, 2, 30)}},
		{id1, []faultsummary.Module{line("a", "work", faultsummary.StatusOK, 1, 0.2), line("b", "work", faultsummary.StatusOpen, 0, 0)}},
		{id1, []faultsummary.Module{line("a", "work", faultsummary.StatusOK, 1, 2), line("b", "work", faultsummary.StatusOK, 1, 7)}},
		{id2, []faultsummary.Module{line("b", "work", faultsummary.StatusOK, 1, 2000), line("a", "work", faultsummary.StatusOK, 1, 0.05)}},
	}
	for _, producer := range []bool{false, true} {
		t.Run(fmt.Sprintf("producer=%v", producer), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c := metrics.New(reg)
			for _, tk := range ticks {
				s := &faultsummary.Summary{}
				if producer {
					s.SetLines(durLines{testLines{ms: tk.lines, id: tk.id}})
				} else {
					s.SetModules(tk.lines)
				}
				c.Hooks().OnTick(s)
			}
			for _, want := range []struct {
				module  string
				count   uint64
				sum     float64
				buckets []uint64 // cumulative, by ModuleDurationBuckets
			}{
				{"a", 4, 0.0023, []uint64{2, 3, 3, 4, 4, 4, 4, 4}},
				{"b", 3, 2.037, []uint64{0, 0, 0, 0, 1, 2, 2, 2}},
			} {
				h := histogram(t, reg, "cycled_module_duration_seconds", map[string]string{"module": want.module, "tier": "work"})
				if h == nil {
					t.Fatalf("no histogram for %s", want.module)
				}
				if h.GetSampleCount() != want.count || diff(h.GetSampleSum(), want.sum) > 1e-9 {
					t.Errorf("%s: count %d sum %v, want %d %v", want.module, h.GetSampleCount(), h.GetSampleSum(), want.count, want.sum)
				}
				for i, b := range h.GetBucket() {
					if b.GetUpperBound() != metrics.ModuleDurationBuckets[i] || b.GetCumulativeCount() != want.buckets[i] {
						t.Errorf("%s: bucket %v = %d, want %v = %d", want.module, b.GetUpperBound(), b.GetCumulativeCount(),
							metrics.ModuleDurationBuckets[i], want.buckets[i])
					}
				}
			}
		})
	}
}

// TestModuleDurationsFromTheEngine checks that the engine's summaries feed the histogram:
// one observation per module per tick.
func TestModuleDurationsFromTheEngine(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := metrics.New(reg)
	e := newFlatEngine(t, 3)
	for range 5 {
		s, err := e.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Hooks().OnTick(s)
	}
	for i := range 3 {
		h := histogram(t, reg, "cycled_module_duration_seconds", map[string]string{"module": fmt.Sprintf("m%d", i), "tier": "work"})
		if h == nil || h.GetSampleCount() != 5 || h.GetSampleSum() <= 0 {
			t.Errorf("m%d: %v", i, h)
		}
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

// histogram returns the histogram of family name with labels, nil if absent.
func histogram(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m.GetHistogram()
		}
	}
	return nil
}
