package cycle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cycled/cycled/faultsummary"
)

// BenchmarkReloadStormStartLag runs a cycle of 500 trivial modules on a 5 ms period, with
// no reload and with 50 reloads a second that change the period and a module's spec, and
// reports the start lag's 99th percentile (p99-lag-ms) and maximum (max-lag-ms) over b.N
// ticks, and the median and 99th percentile of the ticks that applied a reload at their
// start (p50-applying-ms, p99-applying-ms). Results: BENCHMARKS.md,
// BenchmarkReloadStormStartLag.
func BenchmarkReloadStormStartLag(b *testing.B) {
	for _, c := range []struct {
		name    string
		reloads int // a second
	}{{"reloads=0", 0}, {"reloads=50", 50}} {
		b.Run(c.name, func(b *testing.B) { benchReloadLag(b, c.reloads) })
	}
}

func benchReloadLag(b *testing.B, perSecond int) {
	const n, period = 500, 5 * time.Millisecond
	var mu sync.Mutex
	var lags, applying []float64
	var gen uint64 // the generation of the last tick
	done := make(chan struct{})
	hook := Hooks{OnTick: func(s *faultsummary.Summary) {
		mu.Lock()
		defer mu.Unlock()
		if len(lags) < b.N {
			lags = append(lags, s.StartLagMs)
			if s.Generation != gen && len(lags) > 1 {
				applying = append(applying, s.StartLagMs)
			}
			gen = s.Generation
			if len(lags) == b.N {
				close(done)
			}
		}
	}}
	mods := benchModules(n, false)
	cfg := Config{Tiers: benchTiers(), Period: period, History: 16}
	e, err := New(cfg, mods, WithHooks(hook))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	if perSecond > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); reloadStorm(ctx, b, e, cfg, mods, perSecond) }()
	}
	b.ResetTimer()
	go func() { _ = e.Run(ctx) }()
	<-done
	b.StopTimer()
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lags)
	b.ReportMetric(lags[len(lags)*99/100], "p99-lag-ms")
	b.ReportMetric(lags[len(lags)-1], "max-lag-ms")
	if len(applying) > 0 {
		slices.Sort(applying)
		b.ReportMetric(applying[len(applying)/2], "p50-applying-ms")
		b.ReportMetric(applying[len(applying)*99/100], "p99-applying-ms")
	}
}

// reloadStorm reloads e perSecond times a second until ctx ends, alternating the period
// between cfg's and a millisecond more and the first module's max_attempts between 1 and 2.
func reloadStorm(ctx context.Context, b *testing.B, e *Engine, cfg Config, mods []Registration, perSecond int) {
	t := time.NewTicker(time.Second / time.Duration(perSecond))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, ms := cfg, slices.Clone(mods)
		if i%2 == 1 {
			c.Period += time.Millisecond
			ms[0].Spec.MaxAttempts = 2
		}
		if err := e.Reload(c, ms); err != nil {
			b.Error(err)
			return
		}
	}
}
