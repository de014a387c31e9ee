package config

import (
	"net/url"
	"slices"
)

// TracingConfig sends the ticks to an OpenTelemetry backend as traces over OTLP/HTTP (key
// "tracing"). The standard OTEL_* environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and its _ARG)
// override it. Changing it needs a restart.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
	// (http://collector:4318; "/v1/traces" is appended). Empty, and no OTEL_ endpoint in the
	// environment: tracing is off.
	Endpoint string `yaml:"endpoint"`
	// ServiceName is the traces' service.name (default "cycled").
	ServiceName string `yaml:"service_name"`
	// Sampler is an OTEL_TRACES_SAMPLER name (default parentbased_traceidratio): which
	// ticks become traces.
	Sampler string `yaml:"sampler"`
	// SamplerArg is the ratio of ticks traced by the traceidratio samplers (default 0.01:
	// one tick in a hundred, one trace a second at 100 Hz).
	SamplerArg float64 `yaml:"sampler_arg"`
	// QueueSize bounds the spans waiting for export (default 8192); the spans of a tick
	// that finds it full are dropped and counted (cycled_trace_spans_dropped_total).
	QueueSize int `yaml:"queue_size"`
}

// The tracing defaults.
const (
	DefaultTracingSampler    = "parentbased_traceidratio"
	DefaultTracingSamplerArg = 0.01
	DefaultTracingQueueSize  = 8192
)

// TracingSamplers are the sampler names tracing.sampler (and OTEL_TRACES_SAMPLER) accept.
var TracingSamplers = []string{"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// check checks the tracing section.
func (t TracingConfig) check(add func(path, format string, args ...any)) {
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("tracing.endpoint", "want an http:// or https:// URL, e.g. http://localhost:4318")
		}
	}
	if !slices.Contains(TracingSamplers, t.Sampler) {
		add("tracing.sampler", "unknown sampler %q (want one of %v)", t.Sampler, TracingSamplers)
	}
	if !(t.SamplerArg >= 0 && t.SamplerArg <= 1) {
		add("tracing.sampler_arg", "must be a ratio in [0, 1]")
	}
	if t.QueueSize < 1 {
		add("tracing.queue_size", "must be >= 1")
	}
}
