package main

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cycled/cycled/cmd/cycled/internal/tracing"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/modules"
)

// tracer is the daemon's OpenTelemetry tracing (package tracing); nil when off. Its
// methods are those of the off state on a nil tracer.
type tracer struct {
	t       *tracing.Tracer
	lastErr atomic.Int64 // when an export error was last logged (Unix nanoseconds)
}

// exportErrorEvery is the most often a failing export is logged.
const exportErrorEvery = time.Minute

// openTracing starts tracing when the configuration or the OTEL_ environment asks for
// it; ok is false (logged) when it cannot start.
func openTracing(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *zap.Logger) (*tracer, bool) {
	c := cfg.Tracing
	s := tracing.Settings{Endpoint: c.Endpoint, ServiceName: c.ServiceName, Version: readBuildInfo().version,
		Sampler: c.Sampler, SamplerArg: c.SamplerArg, QueueSize: c.QueueSize}
	on, err := s.Env(os.Getenv)
	if err != nil {
		log.Error("cannot start tracing", zap.String("field", "tracing"), zap.Error(err))
		return nil, false
	}
	if !on {
		return nil, true
	}
	tr := &tracer{}
	s.ExportError = func(err error) {
		now := time.Now().UnixNano()
		if last := tr.lastErr.Load(); now-last >= int64(exportErrorEvery) && tr.lastErr.CompareAndSwap(last, now) {
			log.Warn("trace export failed (logged at most once a minute; see cycled_trace_export_failures_total)", zap.Error(err))
		}
	}
	tr.t, err = tracing.New(ctx, s, reg)
	if err != nil {
		log.Error("cannot start tracing", zap.String("field", "tracing"), zap.Error(err))
		return nil, false
	}
	log.Info("tracing", zap.String("sampler", s.Sampler), zap.Float64("sampler_arg", s.SamplerArg),
		zap.String("service_name", s.ServiceName))
	return tr, true
}

// engineOptions returns the hooks that hand the ticks to the tracer.
func (tr *tracer) engineOptions() []cycle.Option {
	if tr == nil {
		return nil
	}
	return []cycle.Option{cycle.WithHooks(tr.t.Hooks())}
}

// context returns ctx carrying the trace context of remote modules' requests.
func (tr *tracer) context(ctx context.Context) context.Context {
	if tr == nil {
		return ctx
	}
	return modules.WithTraceContext(ctx, tr.t.TraceContext)
}

// close exports the spans still queued, for at most a second.
func (tr *tracer) close(log *zap.Logger) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := tr.t.Close(ctx); err != nil {
		log.Warn("traces not all exported at shutdown", zap.Error(err))
	}
}
