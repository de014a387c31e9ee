package tracing

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// blockingExporter holds every export until release is closed.
type blockingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// TestQueueDropsWhenFull checks that a span finding the export queue full is dropped and
// counted at once, whatever the exporter is doing, and that the queued ones are exported
// at shutdown.
func TestQueueDropsWhenFull(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	m := newQueueMetrics(prometheus.NewRegistry())
	q := newQueue(exp, Settings{QueueSize: 4, BatchSize: 1, FlushInterval: time.Hour}, m)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	span := tracetest.SpanStub{Name: "s", SpanContext: sc}.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			q.OnEnd(span) // the exporter's goroutine takes one and blocks; 4 wait; the rest drop
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("OnEnd waited for the exporter")
	}
	if d := testutil.ToFloat64(m.dropped); d < 15 || d > 16 {
		t.Errorf("dropped %v of 20 with a queue of 4 and one batch in flight", d)
	}
	close(exp.release)
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if exp.got+int(testutil.ToFloat64(m.dropped)) != 20 || testutil.ToFloat64(m.exported) != float64(exp.got) {
		t.Errorf("exported %d, counted %v, dropped %v: not 20 in all", exp.got, testutil.ToFloat64(m.exported), testutil.ToFloat64(m.dropped))
	}
}

// TestTraceContext checks the traceparent a remote module's request carries: version 00,
// the tick's trace ID (distinct per tick), the module's span ID (distinct per module),
// and the sampler's decision for the tick, the same decision the tick's spans get.
func TestTraceContext(t *testing.T) {
	for _, tc := range []struct {
		sampler string
		flags   string
	}{{"always_on", "01"}, {"always_off", "00"}, {"parentbased_always_on", "01"}} {
		samp, err := sampler(tc.sampler, 0)
		if err != nil {
			t.Fatal(err)
		}
		tr := &Tracer{sampler: samp, hi: 7, lo: 9}
		a, state := tr.TraceContext(1, "recall")
		b, _ := tr.TraceContext(2, "recall")
		c, _ := tr.TraceContext(1, "plan")
		pa, pb, pc := strings.Split(a, "-"), strings.Split(b, "-"), strings.Split(c, "-")
		if len(pa) != 4 || pa[0] != "00" || len(pa[1]) != 32 || len(pa[2]) != 16 || pa[3] != tc.flags || state != "" {
			t.Errorf("%s: traceparent %q, tracestate %q", tc.sampler, a, state)
		}
		if pa[1] == pb[1] || pa[1] != pc[1] || pa[2] == pc[2] {
			t.Errorf("%s: tick 1 %q, tick 2 %q, another module %q", tc.sampler, a, b, c)
		}
		if tid := tr.traceID(1); tid.String() != pa[1] || spanID(tid, 'm', "recall").String() != pa[2] {
			t.Errorf("%s: %q is not the trace and span the tick's spans get", tc.sampler, a)
		}
	}
}

// TestRatioSamplingSpreadsTicks checks that consecutive tick ids are sampled at about the
// ratio: the ratio samplers read the trace ID's low half, which is a mix of the tick id.
func TestRatioSamplingSpreadsTicks(t *testing.T) {
	samp, _ := sampler("parentbased_traceidratio", 0.1)
	tr := &Tracer{sampler: samp, hi: 1, lo: 2}
	n := 0
	for tick := range uint64(10000) {
		if tr.sampled(tr.traceID(tick)) {
			n++
		}
	}
	if n < 800 || n > 1200 {
		t.Errorf("%d of 10000 ticks sampled at 0.1", n)
	}
}

// TestEnv checks the OTEL_ variables tracing reads.
func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		endpoint string
		on       bool
		err      string
		sampler  string
	}{
		{name: "off", on: false, sampler: "parentbased_traceidratio"},
		{name: "configured", endpoint: "http://c:4318", on: true, sampler: "parentbased_traceidratio"},
		{name: "env endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, sampler: "parentbased_traceidratio"},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces", "OTEL_TRACES_SAMPLER": "always_on"}, on: true, sampler: "always_on"},
		{name: "disabled", endpoint: "http://c:4318", env: map[string]string{"OTEL_SDK_DISABLED": "true"}, on: false, sampler: "parentbased_traceidratio"},
		{name: "grpc", endpoint: "http://c:4318", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "only http/protobuf"},
		{name: "bad sampler", endpoint: "http://c:4318", env: map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, err: "unknown trace sampler"},
		{name: "bad ratio", endpoint: "http://c:4318", env: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "2"}, err: "ratio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Settings{Endpoint: tc.endpoint, Sampler: "parentbased_traceidratio", SamplerArg: 0.01}
			on, err := s.Env(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || on != tc.on || s.Sampler != tc.sampler {
				t.Errorf("on %v err %v sampler %q", on, err, s.Sampler)
			}
		})
	}
}
