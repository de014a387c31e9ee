// Package metrics exposes the engine as Prometheus metrics on a registry owned by the
// caller (no global registry, no init).
//
// Almost everything is derived from the tick summary (cycle.Hooks.OnTick), once per tick,
// so that the tick's hot path pays one hook call and a handful of atomic adds per module;
// breaker transitions, emergency changes and abandoned modules come from their own hooks.
// The breaker state gauge and the stream subscriber gauge are read from the engine at
// scrape time (Attach), so they are exact whenever Prometheus looks, including an open
// breaker whose cooldown has elapsed since the last tick.
//
// Families (all prefixed cycled_):
//
//	ticks_total{finish}                          counter
//	tick_duration_seconds                        histogram (1ms–1s buckets)
//	tick_start_lag_seconds                       histogram (10µs–100ms buckets)
//	tick_overruns_total                          counter
//	tick_skipped_grid_points_total               counter
//	last_tick_timestamp_seconds                  gauge (engine clock)
//	tier_duration_seconds{tier}                  histogram (tiers that ran)
//	tier_budget_exhausted_total{tier}            counter
//	module_runs_total{module,tier,status}        counter (one per module per tick)
//	module_attempts_total{module}                counter
//	module_duration_seconds{module,tier}         histogram (modules that ran; 100µs–1s, 8 buckets; moduledur.go)
//	modules_abandoned_total{module}              counter
//	breaker_state{breaker}                       gauge (0 closed, 1 open, 2 half-open; scrape time)
//	breaker_transitions_total{breaker,from,to}   counter
//	emergency_active                             gauge (0 or 1)
//	emergency_entries_total                      counter
//	last_good_served_total{key}                  counter (ticks a key was served stale)
//	last_good_expired_total{key}                 counter (ticks a key had outlived its TTL)
//	stream_subscribers                           gauge (scrape time)
//	bulkhead_in_flight{bulkhead}                 gauge (scrape time)
//	bulkhead_waiting{bulkhead}                   gauge (scrape time)
//	bulkhead_admitted_total{bulkhead}            counter (scrape time)
//	bulkhead_rejections_total{bulkhead}          counter (scrape time)
//	retry_budget_first_attempts_total{budget}    counter (scrape time)
//	retry_budget_retries_total{budget}           counter (scrape time)
//	retry_budget_refused_total{budget}           counter (scrape time)
//	retry_budget_exhausted_total{budget}         counter (ticks listing it in retry_budget_exhausted)
//	shed_steps_total{direction}, shed_level,     load shedding, startup and asynchronous
//	starting, startup_timeouts_total,            modules (see guardMetrics)
//	async_runs_total{module,status}
//
// Label values are bounded by the configuration (module, tier, breaker and key names).
// Series of a module removed at runtime stay until the process restarts.
package metrics

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
)

const namespace = "cycled"

// TickDurationBuckets are the buckets of cycled_tick_duration_seconds and
// cycled_tier_duration_seconds: 500µs to 1s, suited to tier budgets of tens to hundreds of
// milliseconds.
var TickDurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// StartLagBuckets are the buckets of cycled_tick_start_lag_seconds: 10µs to 100ms, fine at
// the low end where a healthy scheduler lives.
var StartLagBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1}

// Collectors holds the cycled metric families registered on one registry. Its hooks and
// its scrape-time collectors are safe for concurrent use.
type Collectors struct {
	reg *prometheus.Registry

	ticks         *prometheus.CounterVec
	tickDuration  prometheus.Histogram
	startLag      prometheus.Histogram
	overruns      prometheus.Counter
	skippedPoints prometheus.Counter
	lastTick      prometheus.Gauge

	tierDuration  *prometheus.HistogramVec
	tierExhausted *prometheus.CounterVec

	moduleRuns     *prometheus.CounterVec
	moduleAttempts *prometheus.CounterVec
	abandoned      *prometheus.CounterVec

	breakerTransitions *prometheus.CounterVec

	emergencyActive  prometheus.Gauge
	emergencyEntries prometheus.Counter

	lastGoodServed  *prometheus.CounterVec
	lastGoodExpired *prometheus.CounterVec
	retryExhausted  *prometheus.CounterVec

	linesMu sync.Mutex
	lines   []lineCounters           // guarded by linesMu; by position in the summaries' lines
	line    faultsummary.Module      // guarded by linesMu; the line being counted
	linesID any                      // guarded by linesMu; the LinesIdentity of the last tick's lines
	durs    map[[2]string]*moduleDur // guarded by linesMu; by module and tier

	engine atomic.Pointer[cycle.Engine]

	guard *guardMetrics // shedding, startup, async modules (guards.go)
}

// New creates the cycled families and registers them on reg, together with the Go runtime
// and process collectors (these two are skipped if reg already has them). A nil reg means
// a new private registry, available through Registry. New panics if a cycled family is
// already registered on reg: create one Collectors per registry.
func New(reg *prometheus.Registry) *Collectors {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c := &Collectors{reg: reg}
	c.ticks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "ticks_total",
		Help: "Ticks run, by how they finished (completed, short_circuited, failed)."}, []string{"finish"})
	c.tickDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "tick_duration_seconds",
		Help: "Wall time of a tick, from its start to its summary.", Buckets: TickDurationBuckets})
	c.startLag = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "tick_start_lag_seconds",
		Help: "Delay between a tick's grid point and its actual start.", Buckets: StartLagBuckets})
	c.overruns = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "tick_overruns_total",
		Help: "Ticks that ran past their period."})
	c.skippedPoints = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "tick_skipped_grid_points_total",
		Help: "Grid points skipped by the scheduler after overruns."})
	c.lastTick = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "last_tick_timestamp_seconds",
		Help: "Time (engine clock, Unix seconds) at which the latest tick finished."})
	c.tierDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "tier_duration_seconds",
		Help: "Wall time of a tier that ran, by tier.", Buckets: TickDurationBuckets}, []string{"tier"})
	c.tierExhausted = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "tier_budget_exhausted_total",
		Help: "Ticks in which a tier exhausted its budget, by tier."}, []string{"tier"})
	c.moduleRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "module_runs_total",
		Help: "Module outcomes, one per module per tick, by module, tier and status."}, []string{"module", "tier", "status"})
	c.moduleAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "module_attempts_total",
		Help: "Module attempts (first runs and retries), by module."}, []string{"module"})
	c.abandoned = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "modules_abandoned_total",
		Help: "Module runs abandoned at the tier deadline because they ignored their context, by module."}, []string{"module"})
	c.breakerTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "breaker_transitions_total",
		Help: "Circuit breaker state changes, by breaker and states."}, []string{"breaker", "from", "to"})
	c.emergencyActive = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "emergency_active",
		Help: "1 while emergency mode is active, else 0."})
	c.emergencyEntries = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "emergency_entries_total",
		Help: "Times emergency mode was entered."})
	c.lastGoodServed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "last_good_served_total",
		Help: "Ticks in which a key was served from last-known-good (stale), by key."}, []string{"key"})
	c.lastGoodExpired = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "last_good_expired_total",
		Help: "Ticks in which a key's last-known-good value had expired and nothing was served, by key."}, []string{"key"})

	c.retryExhausted = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "retry_budget_exhausted_total",
		Help: "Ticks in which the retry budget refused a retry."}, []string{"budget"})
	reg.MustRegister(c.ticks, c.tickDuration, c.startLag, c.overruns, c.skippedPoints, c.lastTick,
		c.tierDuration, c.tierExhausted, c.moduleRuns, c.moduleAttempts, moduleDurCollector{c}, c.abandoned, c.breakerTransitions,
		c.emergencyActive, c.emergencyEntries, c.lastGoodServed, c.lastGoodExpired, engineCollector{c},
		resilienceCollector{c}, c.retryExhausted)
	c.guard = newGuardMetrics(reg)
	for _, col := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(col); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
				panic(err)
			}
		}
	}
	return c
}

// Registry returns the registry the families are registered on.
func (c *Collectors) Registry() *prometheus.Registry { return c.reg }

// Hooks returns the observer hooks that feed the collectors; pass them to cycle.New with
// cycle.WithHooks. They never block.
func (c *Collectors) Hooks() cycle.Hooks {
	return c.guard.hooks(cycle.Hooks{
		OnTick:      c.observeTick,
		OnBreaker:   c.observeBreaker,
		OnEmergency: c.observeEmergency,
		OnAbandon:   c.observeAbandon,
	})
}

// Attach enables the scrape-time collectors that read e (breaker states, stream
// subscribers) and sets the emergency gauge from e's current state. Attaching another
// engine replaces the first.
func (c *Collectors) Attach(e *cycle.Engine) {
	c.engine.Store(e)
	if e != nil {
		c.emergencyActive.Set(boolValue(e.Emergency().Active))
	}
}

func (c *Collectors) observeTick(s *faultsummary.Summary) {
	c.ticks.WithLabelValues(string(s.Finish)).Inc()
	c.tickDuration.Observe(s.WallMs / 1e3)
	c.startLag.Observe(s.StartLagMs / 1e3)
	if s.Overrun {
		c.overruns.Inc()
	}
	if s.SkippedGridPoints > 0 {
		c.skippedPoints.Add(float64(s.SkippedGridPoints))
	}
	if !s.FinishedAt.IsZero() {
		c.lastTick.Set(float64(s.FinishedAt.UnixNano()) / 1e9)
	}
	c.emergencyActive.Set(boolValue(s.EmergencyMode))
	if s.CycleState != "" || s.Async != nil {
		c.guard.observeTick(s)
	}
	for i := range s.Tiers {
		t := &s.Tiers[i]
		if t.Status == faultsummary.TierSkipped {
			continue
		}
		c.tierDuration.WithLabelValues(t.Name).Observe(t.ElapsedMs / 1e3)
		if t.BudgetExhausted {
			c.tierExhausted.WithLabelValues(t.Name).Inc()
		}
	}
	c.observeLines(s)
	for _, name := range s.RetryBudgetExhausted {
		c.retryExhausted.WithLabelValues(name).Inc()
	}
}

// observeLines counts the module lines of s. It reads them one at a time into one Module
// (the engine keeps them compact: building all of them here would cost every tick the
// full line per module that keeping them compact saves), and counts each through the
// counters its position resolved the tick before: looking a child up by its label values
// hashes them and takes the family's lock, work on every line of every tick that the
// resolved counters leave out (BenchmarkOnTick). A plain success in lines of
// the same identity as the last tick's (the same modules in the same order) is not even
// read: it counts one ok run and one attempt and observes its latency. A line of a module
// that did not run (no attempt: refused, shed, open circuit) observes no duration.
func (c *Collectors) observeLines(s *faultsummary.Summary) {
	c.linesMu.Lock()
	defer c.linesMu.Unlock()
	n := s.NumModules()
	if len(c.lines) != n {
		c.lines = make([]lineCounters, n)
	}
	id := s.LinesIdentity()
	same := id != nil && id == c.linesID
	c.linesID = id
	m := &c.line
	lat := s.Latencies()
	for i := range n {
		lc := &c.lines[i]
		if same && lc.ok != nil && lc.attempts != nil && s.PlainAt(i) {
			lc.ok.Inc()
			lc.attempts.Inc()
			lc.dur.observe(lat.Latency(i))
			continue
		}
		s.ModuleInto(i, m)
		if lc.name != m.Name || lc.tier != m.Tier || lc.key != m.Served.Key {
			*lc = lineCounters{name: m.Name, tier: m.Tier, key: m.Served.Key} // a reload moved the modules
		}
		lc.runs(c, m.Status).Inc()
		if m.Attempts > 0 {
			if lc.attempts == nil {
				lc.attempts = c.moduleAttempts.WithLabelValues(m.Name)
			}
			lc.attempts.Add(float64(m.Attempts))
			if lc.dur == nil {
				lc.dur = c.moduleDurFor(m.Name, m.Tier)
			}
			lc.dur.observe(lat.Latency(i))
		}
		switch {
		case m.Served.Expired:
			if lc.expired == nil {
				lc.expired = c.lastGoodExpired.WithLabelValues(m.Served.Key)
			}
			lc.expired.Inc()
		case m.Served.Source == blackboard.LastGood && m.Served.Stale:
			if lc.served == nil {
				lc.served = c.lastGoodServed.WithLabelValues(m.Served.Key)
			}
			lc.served.Inc()
		}
	}
	*m = faultsummary.Module{} // keeps no value of the engine's alive until the next tick
}

// lineCounters are the counters of the module at one position of the summaries' lines,
// resolved on first use.
type lineCounters struct {
	name, tier, key string
	byStatus        []statusCounter    // the statuses the module has had, a few at most
	ok              prometheus.Counter // byStatus's for StatusOK
	attempts        prometheus.Counter
	dur             *moduleDur // module_duration_seconds; set with attempts
	served, expired prometheus.Counter
}

// statusCounter is a module's module_runs_total child for one status.
type statusCounter struct {
	status faultsummary.Status
	runs   prometheus.Counter
}

// runs returns the module_runs_total child of the line's module with status st.
func (lc *lineCounters) runs(c *Collectors, st faultsummary.Status) prometheus.Counter {
	for _, sc := range lc.byStatus {
		if sc.status == st {
			return sc.runs
		}
	}
	r := c.moduleRuns.WithLabelValues(lc.name, lc.tier, string(st))
	lc.byStatus = append(lc.byStatus, statusCounter{status: st, runs: r})
	if st == faultsummary.StatusOK {
		lc.ok = r
	}
	return r
}

func (c *Collectors) observeBreaker(t breaker.Transition) {
	c.breakerTransitions.WithLabelValues(t.Name, t.From.String(), t.To.String()).Inc()
}

func (c *Collectors) observeEmergency(ev faultsummary.EmergencyEvent) {
	if ev.Entered {
		c.emergencyEntries.Inc()
		c.emergencyActive.Set(1)
		return
	}
	c.emergencyActive.Set(0)
}

func (c *Collectors) observeAbandon(module string, _ uint64) {
	c.abandoned.WithLabelValues(module).Inc()
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var (
	breakerStateDesc = prometheus.NewDesc(namespace+"_breaker_state",
		"Circuit breaker state: 0 closed, 1 open, 2 half-open.", []string{"breaker"}, nil)
	subscribersDesc = prometheus.NewDesc(namespace+"_stream_subscribers",
		"Open subscriptions to the engine's event stream (SSE clients and others).", nil, nil)
)

// engineCollector reads the attached engine at scrape time.
type engineCollector struct{ c *Collectors }

// Describe sends the descriptors of the scrape-time families.
func (ec engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerStateDesc
	ch <- subscribersDesc
}

// Collect reads the attached engine; it sends nothing before Attach.
func (ec engineCollector) Collect(ch chan<- prometheus.Metric) {
	e := ec.c.engine.Load()
	if e == nil {
		return
	}
	for _, b := range e.Breakers() {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, breakerStateValue(b.State), b.Name)
	}
	ch <- prometheus.MustNewConstMetric(subscribersDesc, prometheus.GaugeValue, float64(e.Events().Subscribers()))
}

// breakerStateValue maps a state to the gauge's encoding (0 closed, 1 open, 2 half-open),
// independent of the breaker package's constant order.
func breakerStateValue(s breaker.State) float64 {
	switch s {
	case breaker.Open:
		return 1
	case breaker.HalfOpen:
		return 2
	}
	return 0
}
