package main

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/natsexport"
	"github.com/cycled/cycled/faultsummary"
)

// exportCloseWait bounds the publishing of the buffered messages at shutdown.
const exportCloseWait = 2 * time.Second

// exporter is the export of summaries and events (config "export"). A nil *exporter
// exports nothing.
type exporter struct {
	x     *natsexport.Exporter
	epoch func() uint64 // the group's epoch of events; nil: 0 (no group)
}

// openExporter starts the export of cfg.Export, nil without one, and registers its
// counters.
func openExporter(cfg *config.Config, reg prometheus.Registerer, log *zap.Logger) (*exporter, error) {
	n := cfg.Export.NATS
	if n.URL == "" {
		return nil, nil
	}
	x, err := natsexport.New(natsexport.Options{URL: n.URL, Stream: n.Stream, Subject: n.Subject, Buffer: n.Buffer,
		Name: "cycled " + cfg.HA.Node, Logger: log.Named("export")})
	if err != nil {
		return nil, err
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_export_published_total",
			Help: "Summaries and events the export published (acknowledged by JetStream)."},
			func() float64 { return float64(x.Stats().Published) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_export_dropped_total",
			Help: "Summaries and events the export dropped: its buffer was full (the stream did not keep up or was unreachable)."},
			func() float64 { return float64(x.Stats().Dropped) }))
	log.Info("exporting to NATS JetStream", zap.String("url", n.URL), zap.String("stream", n.Stream), zap.String("subject", n.Subject))
	return &exporter{x: x}, nil
}

// hooks are the engine's hooks that export summaries and events.
func (e *exporter) hooks() []cycle.Option {
	if e == nil {
		return nil
	}
	return []cycle.Option{cycle.WithHooks(cycle.Hooks{
		OnTick: e.x.Summary,
		OnEmergency: func(ev faultsummary.EmergencyEvent) {
			e.event("emergency", e.epochNow(), ev.TickID, "", ev)
		},
		OnBreaker: func(t breaker.Transition) {
			e.event("breaker", e.epochNow(), 0, t.Name+"@"+strconv.FormatInt(t.At.UnixNano(), 10),
				faultsummary.BreakerEvent{Breaker: t.Name, From: t.From.String(), To: t.To.String(), Reason: t.Reason, At: t.At})
		},
	})}
}

// epochNow is the group's current epoch, 0 without a group.
func (e *exporter) epochNow() uint64 {
	if e.epoch == nil {
		return 0
	}
	return e.epoch()
}

// event exports an event.
func (e *exporter) event(kind string, epoch, tick uint64, key string, v any) {
	if e != nil {
		e.x.Event(kind, epoch, tick, key, v)
	}
}

// close publishes what is buffered, for at most exportCloseWait, and disconnects.
func (e *exporter) close(log *zap.Logger) {
	if e == nil {
		return
	}
	e.x.Close(exportCloseWait)
	st := e.x.Stats()
	log.Info("export closed", zap.Uint64("published", st.Published), zap.Uint64("dropped", st.Dropped))
}
