package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
)

// guardMetrics are the families of load shedding, startup and asynchronous modules:
//
//	shed_steps_total{direction}                  counter (shed, restore)
//	shed_level                                   gauge (steps shed now)
//	starting                                     gauge (1 while the cycle is starting)
//	startup_timeouts_total                       counter
//	async_runs_total{module,status}              counter (ok, failed, timed_out)
type guardMetrics struct {
	shedSteps       *prometheus.CounterVec
	shedLevel       prometheus.Gauge
	starting        prometheus.Gauge
	startupTimeouts prometheus.Counter
	asyncRuns       *prometheus.CounterVec
}

// newGuardMetrics creates the families and registers them on reg.
func newGuardMetrics(reg *prometheus.Registry) *guardMetrics {
	g := &guardMetrics{
		shedSteps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "shed_steps_total",
			Help: "Steps of load shedding, by direction (shed, restore)."}, []string{"direction"}),
		shedLevel: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "shed_level",
			Help: "Steps of load shedding in force (priority classes shed)."}),
		starting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "starting",
			Help: "1 while the cycle is starting (some safety module has not succeeded once), else 0."}),
		startupTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "startup_timeouts_total",
			Help: "Startups that timed out into emergency mode."}),
		asyncRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "async_runs_total",
			Help: "Ended runs of asynchronous modules, by module and status."}, []string{"module", "status"}),
	}
	reg.MustRegister(g.shedSteps, g.shedLevel, g.starting, g.startupTimeouts, g.asyncRuns)
	return g
}

// hooks adds the hooks of these families to h.
func (g *guardMetrics) hooks(h cycle.Hooks) cycle.Hooks {
	h.OnShed = func(ev cycle.ShedEvent) {
		dir := "restore"
		if ev.Shed {
			dir = "shed"
		}
		g.shedSteps.WithLabelValues(dir).Inc()
		g.shedLevel.Set(float64(ev.Level))
	}
	h.OnStartup = func(ev cycle.StartupEvent) {
		g.starting.Set(0)
		if ev.TimedOut {
			g.startupTimeouts.Inc()
		}
	}
	return h
}

// observeTick counts the asynchronous runs a summary reports and whether it is starting.
func (g *guardMetrics) observeTick(s *faultsummary.Summary) {
	if s.CycleState == faultsummary.CycleStarting {
		g.starting.Set(1)
	}
	for _, a := range s.Async {
		g.asyncRuns.WithLabelValues(a.Name, string(a.Status)).Inc()
	}
}
