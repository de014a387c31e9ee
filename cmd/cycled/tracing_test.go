package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP endpoint that keeps the spans it receives, decoded with
// the official OTLP protobuf types, with their resource's service.name.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []recvSpan
}

type recvSpan struct {
	service string
	span    *tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			svc := attr(rs.GetResource().GetAttributes(), "service.name").GetStringValue()
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					rc.spans = append(rc.spans, recvSpan{svc, sp})
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *otlpReceiver) all() []recvSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recvSpan(nil), rc.spans...)
}

// attr returns the value of key in kvs, nil if absent.
func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// tracedModule is a Go remote module that continues the trace its request carries
// (W3C traceparent) with a span of its own, exported to the receiver as service "remote".
func tracedModule(t *testing.T, rc *otlpReceiver) *httptest.Server {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rc.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "remote"))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("remote-module")
	prop := propagation.TraceContext{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		_, sp := tr.Start(ctx, "remote work")
		fmt.Fprint(w, `{"value": 1}`)
		sp.End()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTracing runs the daemon with OTEL_EXPORTER_OTLP_ENDPOINT at a receiver and a
// sampler that traces about half the ticks: every sampled tick is one trace with its tick
// span, tier spans and module spans and their attributes (a retried module's attempts as
// events), and the remote module's own span, continuing the request's traceparent, is a
// child of its module's span, in the sampled ticks only.
func TestTracing(t *testing.T) {
	rc := newOTLPReceiver(t)
	remote := tracedModule(t, rc)
	cfg := write(t, "cycled.yaml", `
cycle: {period: 0}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}}}
  - {name: remote, tier: knowledge, kind: http, http: {url: "`+remote.URL+`/tick"}}
  - {name: recall, tier: knowledge, builtin: {value: 1, fail_attempts: 1}}
http: {addr: 127.0.0.1:0}
state_dir: `+t.TempDir()+"\n")
	d := start(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL, "OTEL_TRACES_SAMPLER=traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=0.5", "OTEL_SERVICE_NAME=cycled-test"}, "--config", cfg)
	const ticks = 24
	for range ticks {
		if st := d.do("POST", "/ticks", "", nil); st != 200 {
			t.Fatalf("POST /ticks: %d", st)
		}
	}
	if code, _ := d.stop(); code != 0 { // the shutdown flushes the spans
		t.Fatalf("exit %d:\n%s", code, d.stderr())
	}

	spans := rc.all()
	byID := map[string]*tracepb.Span{}
	tickOf := map[string]int64{} // trace ID → tick id
	var remotes []*tracepb.Span
	for _, s := range spans {
		switch s.service {
		case "cycled-test":
			byID[hex.EncodeToString(s.span.GetSpanId())] = s.span
			if s.span.GetName() == "tick" {
				tid := hex.EncodeToString(s.span.GetTraceId())
				if _, dup := tickOf[tid]; dup {
					t.Errorf("trace %s has two tick spans", tid)
				}
				tickOf[tid] = attr(s.span.GetAttributes(), "cycled.tick.id").GetIntValue()
			}
		case "remote":
			remotes = append(remotes, s.span)
		default:
			t.Errorf("a span of service %q", s.service)
		}
	}
	if len(tickOf) == 0 || len(tickOf) == ticks {
		t.Fatalf("%d traces of %d ticks at a ratio of 0.5: not sampled", len(tickOf), ticks)
	}
	seen := map[int64]bool{}
	for _, id := range tickOf {
		if id < 1 || id > ticks || seen[id] {
			t.Errorf("tick span of tick %d (twice, or not a tick run)", id)
		}
		seen[id] = true
	}
	// Every sampled tick: tiers under the tick, modules under their tier, with attributes.
	kids := map[string][]*tracepb.Span{}
	for _, sp := range byID {
		kids[hex.EncodeToString(sp.GetParentSpanId())] = append(kids[hex.EncodeToString(sp.GetParentSpanId())], sp)
	}
	for _, sp := range byID {
		if sp.GetName() != "tick" {
			continue
		}
		tiers := kids[hex.EncodeToString(sp.GetSpanId())]
		names := map[string]bool{}
		for _, tier := range tiers {
			names[tier.GetName()] = true
			for _, m := range kids[hex.EncodeToString(tier.GetSpanId())] {
				names[m.GetName()] = true
				for _, k := range []string{"cycled.module", "cycled.status", "cycled.attempts", "cycled.served.source"} {
					if attr(m.GetAttributes(), k) == nil {
						t.Errorf("span %s has no %s", m.GetName(), k)
					}
				}
				if m.GetName() == "module recall" { // fails its first attempt, every tick
					if st := attr(m.GetAttributes(), "cycled.status").GetStringValue(); st != "retried" ||
						len(m.GetEvents()) != 2 || m.GetEvents()[1].GetName() != "attempt 2" {
						t.Errorf("recall's span: status %q, attributes %v, events %v", st, m.GetAttributes(), m.GetEvents())
					}
				}
			}
		}
		for _, want := range []string{"tier safety", "tier knowledge", "module guard", "module remote", "module recall"} {
			if !names[want] {
				t.Errorf("tick %d: no span %q under its tick (%v)", attr(sp.GetAttributes(), "cycled.tick.id").GetIntValue(), want, names)
			}
		}
	}
	t.Logf("%d ticks, %d traces, %d remote spans", ticks, len(tickOf), len(remotes))
	// The remote's spans: one per sampled tick in which it ran, each a child of its module span.
	for _, r := range remotes {
		parent := byID[hex.EncodeToString(r.GetParentSpanId())]
		if parent == nil || parent.GetName() != "module remote" || !strings.EqualFold(hex.EncodeToString(parent.GetTraceId()), hex.EncodeToString(r.GetTraceId())) {
			t.Errorf("remote span %x: parent %v, not its module's span", r.GetSpanId(), parent)
		}
	}
	ran := 0
	for _, sp := range byID {
		if sp.GetName() == "module remote" {
			ran++
		}
	}
	if len(remotes) != ran || ran == 0 {
		t.Errorf("%d remote spans for %d sampled module spans of the remote", len(remotes), ran)
	}
}

// TestTracingEmergency checks that a tick in emergency mode is traced with an emergency
// event and an error status on its span, and its failed safety tier and module with
// error statuses (every tick sampled).
func TestTracingEmergency(t *testing.T) {
	rc := newOTLPReceiver(t)
	cfg := write(t, "cycled.yaml", `
cycle: {period: 0}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}, fail_rate: 1}}
  - {name: recall, tier: knowledge, builtin: {value: 1}}
http: {addr: 127.0.0.1:0}
state_dir: `+t.TempDir()+"\n")
	d := start(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.srv.URL, "OTEL_TRACES_SAMPLER=always_on"}, "--config", cfg)
	if st := d.do("POST", "/ticks", "", nil); st != 200 {
		t.Fatalf("POST /ticks: %d", st)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.stderr())
	}
	status := map[string]tracepb.Status_StatusCode{}
	for _, s := range rc.all() {
		sp := s.span
		status[sp.GetName()] = sp.GetStatus().GetCode()
		if sp.GetName() == "tick" {
			if !attr(sp.GetAttributes(), "cycled.emergency").GetBoolValue() || len(sp.GetEvents()) != 1 ||
				sp.GetEvents()[0].GetName() != "emergency" || attr(sp.GetEvents()[0].GetAttributes(), "cycled.reason").GetStringValue() == "" {
				t.Errorf("tick span: attributes %v, events %v", sp.GetAttributes(), sp.GetEvents())
			}
		}
	}
	for _, name := range []string{"tick", "tier safety", "module guard"} {
		if status[name] != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("span %q: status %v, want an error (%v)", name, status[name], status)
		}
	}
	if _, ok := status["tier knowledge"]; ok {
		t.Errorf("a span for the knowledge tier, skipped in emergency mode")
	}
}
