// Package tracing turns the daemon's ticks into OpenTelemetry traces, exported over
// OTLP/HTTP: a span per tick, a span per tier that ran, and a span per module line (its
// attempts as events; status, fault kind, served source and stale flags as attributes;
// an emergency as an event and an error status).
//
// Nothing happens on the tick's path. The spans are built from the tick's summary after
// it is published, on the tracer's own goroutine, with the timestamps the summary
// records; a tick that is not sampled costs its hook one sampling decision. The IDs are
// not random: a tick's trace ID is a function of the process's random seed and the tick
// id, and each span's ID a function of the trace ID and the tier's or module's name, so
// that a remote module's request, sent during the tick, can already name its module's
// span as the parent (TraceContext, the W3C traceparent header) and the remote's spans
// join the tick's trace.
//
// The spans go through a bounded queue (Settings.QueueSize) to the exporter's
// goroutine; a span that finds the queue full is dropped and counted
// (cycled_trace_spans_dropped_total), never waited for.
package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
)

// Settings configures a Tracer. Env applies the standard OTEL_* environment variables
// over the values taken from the configuration file.
type Settings struct {
	// Endpoint is the OTLP/HTTP base URL ("/v1/traces" is appended); empty: the
	// exporter's own environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) say where, or tracing is off.
	Endpoint string
	// ServiceName is the resource's service.name (OTEL_SERVICE_NAME overrides it).
	ServiceName string
	// Version is the resource's service.version.
	Version string
	// Sampler and SamplerArg are an OTEL_TRACES_SAMPLER name and its argument.
	Sampler    string
	SamplerArg float64
	// QueueSize bounds the spans waiting for export.
	QueueSize int
	// BatchSize is the most spans one export sends (default 512).
	BatchSize int
	// FlushInterval is the longest a span waits for its batch to fill (default 1s).
	FlushInterval time.Duration
	// ExportError, if set, receives every failed export's error (on the exporter's
	// goroutine).
	ExportError func(error)

	envEndpoint bool // an OTEL_ endpoint variable is set: the exporter reads it
}

// Env applies the OTEL_* environment variables that getenv returns over s and reports
// whether tracing is on: a configured endpoint or an OTEL_ one, and OTEL_SDK_DISABLED not
// "true". OTEL_EXPORTER_OTLP_PROTOCOL, if set, must be http/protobuf: the daemon ships
// only the OTLP/HTTP exporter.
func (s *Settings) Env(getenv func(string) string) (on bool, err error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(k); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%s: only http/protobuf is supported", k, p)
			}
			break
		}
	}
	s.envEndpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		s.ServiceName = v
	}
	if v := getenv("OTEL_TRACES_SAMPLER"); v != "" {
		s.Sampler = v
	}
	if v := getenv("OTEL_TRACES_SAMPLER_ARG"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return false, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%s: want a ratio in [0, 1]", v)
		}
		s.SamplerArg = f
	}
	if _, err := sampler(s.Sampler, s.SamplerArg); err != nil {
		return false, err
	}
	return s.envEndpoint || s.Endpoint != "", nil
}

// sampler returns the OTel sampler of an OTEL_TRACES_SAMPLER name and argument.
func sampler(name string, arg float64) (sdktrace.Sampler, error) {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(arg), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(arg)), nil
	}
	return nil, fmt.Errorf("unknown trace sampler %q", name)
}

// Tracer builds and exports the traces of the ticks it is given (Hooks).
type Tracer struct {
	provider *sdktrace.TracerProvider
	tr       trace.Tracer
	sampler  sdktrace.Sampler
	hi, lo   uint64 // the process's seed of trace IDs

	ticks  chan *faultsummary.Summary // sampled summaries waiting for their spans
	done   chan struct{}
	closed sync.Once

	dropped prometheus.Counter // spans dropped: the queue, or the ticks' channel, full
}

// pendingTicks is how many sampled summaries may wait for the tracer's goroutine.
const pendingTicks = 64

// New returns a tracer exporting with the OTLP/HTTP exporter as s configures it; its
// metrics are registered on reg. Close it to flush and stop.
func New(ctx context.Context, s Settings, reg prometheus.Registerer) (*Tracer, error) {
	samp, err := sampler(s.Sampler, s.SamplerArg)
	if err != nil {
		return nil, err
	}
	var opts []otlptracehttp.Option
	if !s.envEndpoint {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(s.Endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("the OTLP/HTTP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", s.ServiceName), attribute.String("service.version", s.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("the trace resource: %w", err)
	}
	t := &Tracer{sampler: samp, hi: rand.Uint64(), lo: rand.Uint64(), ticks: make(chan *faultsummary.Summary, pendingTicks),
		done: make(chan struct{})}
	m := newQueueMetrics(reg)
	t.dropped = m.dropped
	q := newQueue(exp, s, m)
	t.provider = sdktrace.NewTracerProvider(sdktrace.WithSampler(samp), sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithSpanProcessor(q), sdktrace.WithResource(res))
	t.tr = t.provider.Tracer("github.com/cycled/cycled")
	go t.run()
	return t, nil
}

// Hooks returns the hook that hands each sampled tick's summary to the tracer. It never
// blocks: a summary that finds the tracer's channel full is dropped with its spans
// counted.
func (t *Tracer) Hooks() cycle.Hooks {
	return cycle.Hooks{OnTick: func(s *faultsummary.Summary) {
		if !t.sampled(t.traceID(s.TickID)) {
			return
		}
		select {
		case t.ticks <- s:
		default:
			t.dropped.Add(float64(1 + len(s.Tiers) + s.NumModules()))
		}
	}}
}

// TraceContext returns the W3C traceparent of a remote module's request in tick: the
// tick's trace, the module's span as the parent, and the tick's sampling decision.
func (t *Tracer) TraceContext(tick uint64, module string) (traceparent, tracestate string) {
	tid := t.traceID(tick)
	flags := "00"
	if t.sampled(tid) {
		flags = "01"
	}
	sid := spanID(tid, 'm', module)
	return "00-" + tid.String() + "-" + sid.String() + "-" + flags, ""
}

// Close builds the traces of the ticks handed over, flushes the spans within ctx, and
// stops the exporter.
func (t *Tracer) Close(ctx context.Context) error {
	t.closed.Do(func() { close(t.ticks) })
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return t.provider.Shutdown(ctx)
}

// run builds the spans of each summary handed over, until Close.
func (t *Tracer) run() {
	defer close(t.done)
	for s := range t.ticks {
		t.build(s)
	}
}

// sampled reports the sampler's decision for a root span of trace tid: the decision the
// provider makes when it builds the tick's span.
func (t *Tracer) sampled(tid trace.TraceID) bool {
	r := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid,
		Name: "tick", Kind: trace.SpanKindInternal})
	return r.Decision == sdktrace.RecordAndSample
}

// traceID returns the trace ID of tick: the process's seed in the high half, a bijective
// mix of the tick id in the low half (distinct per tick, and uniform, which the ratio
// samplers, reading the low half, need).
func (t *Tracer) traceID(tick uint64) trace.TraceID {
	var id trace.TraceID
	binary.BigEndian.PutUint64(id[:8], t.hi|1) // never all zero
	binary.BigEndian.PutUint64(id[8:], mix(t.lo^tick))
	return id
}

// spanID returns the ID of the span of kind ('t' tick, 'r' tier, 'm' module) and name in
// trace tid.
func spanID(tid trace.TraceID, kind byte, name string) trace.SpanID {
	h := fnv.New64a()
	h.Write([]byte{kind})
	h.Write([]byte(name))
	x := mix(h.Sum64() ^ binary.BigEndian.Uint64(tid[8:]))
	if x == 0 {
		x = 1
	}
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], x)
	return id
}

// mix is SplitMix64's finaliser: a bijection of the 64-bit integers that spreads their
// bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// idGenerator gives each span the IDs its context carries (withIDs): the tracer decides
// them, so that requests sent during the tick could name them.
type idGenerator struct{}

type idsKey struct{}

type spanIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, spanIDs{tid, sid})
}

// NewIDs returns the IDs in ctx.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	ids, _ := ctx.Value(idsKey{}).(spanIDs)
	return ids.trace, ids.span
}

// NewSpanID returns the span ID in ctx.
func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	ids, _ := ctx.Value(idsKey{}).(spanIDs)
	return ids.span
}
