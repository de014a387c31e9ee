package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// moduleDurBounds are the upper bounds of cycled_module_duration_seconds's buckets, as
// durations: the observation compares the line's latency with them as integers.
var moduleDurBounds = [...]time.Duration{100 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond, time.Second}

// ModuleDurationBuckets are the buckets of cycled_module_duration_seconds: 100µs to 1s,
// few of them, because every module of every tick is observed (a module's run is
// in-process microseconds or a remote call of milliseconds up to a tier's budget).
var ModuleDurationBuckets = func() []float64 {
	b := make([]float64, len(moduleDurBounds))
	for i, d := range moduleDurBounds {
		b[i] = d.Seconds()
	}
	return b
}()

var moduleDurDesc = prometheus.NewDesc(namespace+"_module_duration_seconds",
	"Wall time of a module's run in a tick (all its attempts), by module and tier; a module that did not run is not observed.",
	[]string{"module", "tier"}, nil)

// moduleDur is one module's cycled_module_duration_seconds series. It is not a
// prometheus.Histogram: observing every module of every tick through one (a bucket search
// over float64 bounds and three atomic read-modify-writes) costs tens of nanoseconds a
// module, a sizeable share of a tick whose own cost per module is a few hundred. Its
// fields are plain integers written under Collectors.linesMu, which observeLines holds
// anyway, and copied under it at scrape time.
type moduleDur struct {
	module, tier string
	counts       [len(moduleDurBounds) + 1]uint64 // by bucket, not cumulative; the last is above the largest bound
	sum          time.Duration
}

// observe counts one run of duration d.
func (h *moduleDur) observe(d time.Duration) {
	i := 0
	for i < len(moduleDurBounds) && d > moduleDurBounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += d
}

// moduleDurFor returns the series of module in tier, made on first use; the caller holds
// linesMu. A module keeps its series when a reload moves it to another position.
func (c *Collectors) moduleDurFor(module, tier string) *moduleDur {
	k := [2]string{module, tier}
	h := c.durs[k]
	if h == nil {
		if c.durs == nil {
			c.durs = make(map[[2]string]*moduleDur)
		}
		h = &moduleDur{module: module, tier: tier}
		c.durs[k] = h
	}
	return h
}

// moduleDurCollector exposes the module duration series at scrape time.
type moduleDurCollector struct{ c *Collectors }

// Describe sends the family's descriptor.
func (mc moduleDurCollector) Describe(ch chan<- *prometheus.Desc) { ch <- moduleDurDesc }

// Collect copies the series under linesMu (a copy of plain integers, so that the tick's
// observer waits no longer than that) and builds the metrics after releasing it.
func (mc moduleDurCollector) Collect(ch chan<- prometheus.Metric) {
	c := mc.c
	c.linesMu.Lock()
	snap := make([]moduleDur, 0, len(c.durs))
	for _, h := range c.durs {
		snap = append(snap, *h)
	}
	c.linesMu.Unlock()
	for i := range snap {
		h := &snap[i]
		buckets := make(map[float64]uint64, len(moduleDurBounds))
		var n uint64
		for j, b := range ModuleDurationBuckets {
			n += h.counts[j]
			buckets[b] = n
		}
		n += h.counts[len(moduleDurBounds)]
		ch <- prometheus.MustNewConstHistogram(moduleDurDesc, n, h.sum.Seconds(), buckets, h.module, h.tier)
	}
}
