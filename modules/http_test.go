package modules_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// remote is a loopback HTTP server playing a remote module, and a client of its own so
// that each test closes its keep-alive connections.
type remote struct {
	srv    *httptest.Server
	client *http.Client
}

func newRemote(t *testing.T, h http.HandlerFunc, setup ...func(*http.Server)) *remote {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	for _, f := range setup {
		f(srv.Config)
	}
	srv.Start()
	r := &remote{srv: srv, client: modules.NewClient()}
	t.Cleanup(func() {
		r.srv.Close()
		r.client.CloseIdleConnections()
	})
	return r
}

// module returns an HTTP module posting to path on the server.
func (r *remote) module(t *testing.T, path string, mut ...func(*modules.HTTPSettings)) *modules.HTTP {
	t.Helper()
	s := modules.HTTPSettings{URL: r.srv.URL + path}
	for _, f := range mut {
		f(&s)
	}
	m, err := modules.NewHTTP(s, modules.WithClient(r.client))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// reply answers with status and body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// tickInput returns the input of module name (reading reads) for tick, attempt 1, with a
// deadline in budget.
func tickInput(name string, reads []string, board *blackboard.Board, tick uint64, budget time.Duration) *tiers.Input {
	in := tiers.NewInput(board, tiers.ModuleSpec{Name: name, Reads: reads}, 1)
	in.Begin(tick, time.Now().Add(budget))
	in.SetAttempt(1)
	return in
}

func TestHTTPRequest(t *testing.T) {
	type seen struct {
		header http.Header
		body   map[string]json.RawMessage
		method string
	}
	got := make(chan seen, 1)
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		var body map[string]json.RawMessage
		json.NewDecoder(req.Body).Decode(&body)
		got <- seen{req.Header.Clone(), body, req.Method}
		io.WriteString(w, `{"value": {"n": 9007199254740993, "ok": true}}`)
	})
	m := r.module(t, "/tick?x=1")

	lg := blackboard.New(nil)
	lg.Begin(7, time.Now())
	written := time.Now().Add(-time.Millisecond)
	lg.Put(
		blackboard.Entry{Key: "lidar.result", Value: map[string]any{"obstacles": 2}, Module: "lidar", TickID: 7, Source: blackboard.Live, Written: written},
		blackboard.Entry{Key: "map.result", Value: "old", Module: "map", TickID: 5, Source: blackboard.LastGood, Stale: true, Age: 250 * time.Millisecond},
		blackboard.Entry{Key: "secret.result", Value: "not read"},
	)
	in := tickInput("planner", []string{"lidar.result", "map.result", "nobody.result"}, lg, 7, 200*time.Millisecond)
	in.SetAttempt(2)
	ctx, cancel := context.WithDeadline(context.Background(), in.Deadline())
	defer cancel()
	v, err := m.Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if mv, _ := v.(map[string]any); mv["n"] != json.Number("9007199254740993") || mv["ok"] != true {
		t.Fatalf("value %#v: numbers must be exact json.Number", v)
	}
	if !in.ReadStale() {
		t.Error("reading a stale input for the remote did not mark the input as read stale")
	}

	s := <-got
	if s.method != http.MethodPost {
		t.Errorf("method %s", s.method)
	}
	h := s.header
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if k := h.Get("Idempotency-Key"); k != "7-planner" {
		t.Errorf("Idempotency-Key %q", k)
	}
	if run := h.Get("X-Cycled-Run"); run != modules.RunID() || len(run) != 16 {
		t.Errorf("X-Cycled-Run %q, RunID %q", run, modules.RunID())
	}
	dl, err := time.Parse(time.RFC3339Nano, h.Get("X-Cycled-Deadline"))
	if err != nil || !dl.Equal(in.Deadline()) {
		t.Errorf("X-Cycled-Deadline %q (%v), want %v", h.Get("X-Cycled-Deadline"), err, in.Deadline())
	}
	budget, err := strconv.ParseFloat(h.Get("X-Cycled-Budget-Ms"), 64)
	if err != nil || budget <= 0 || budget > 200 {
		t.Errorf("X-Cycled-Budget-Ms %q (%v)", h.Get("X-Cycled-Budget-Ms"), err)
	}

	b := s.body
	for k, want := range map[string]string{"tick_id": "7", "module": `"planner"`, "tier": "1", "attempt": "2"} {
		if string(b[k]) != want {
			t.Errorf("body %s = %s, want %s", k, b[k], want)
		}
	}
	var bodyDeadline string
	json.Unmarshal(b["deadline"], &bodyDeadline)
	if bodyDeadline != h.Get("X-Cycled-Deadline") {
		t.Errorf("body deadline %q, header %q", bodyDeadline, h.Get("X-Cycled-Deadline"))
	}
	var inputs map[string]blackboard.Entry
	if err := json.Unmarshal(b["inputs"], &inputs); err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 3 {
		t.Fatalf("inputs %v: want exactly the keys read", inputs)
	}
	if e := inputs["lidar.result"]; e.Source != blackboard.Live || e.Module != "lidar" || e.TickID != 7 || e.Stale {
		t.Errorf("live input %+v", e)
	}
	if e := inputs["map.result"]; e.Source != blackboard.LastGood || !e.Stale || e.Age != 250*time.Millisecond || e.Value != "old" {
		t.Errorf("stale input %+v", e)
	}
	if e := inputs["nobody.result"]; e.Source != blackboard.None || e.Value != nil || e.Key != "nobody.result" {
		t.Errorf("missing input %+v", e)
	}
	var raw map[string]map[string]any
	json.Unmarshal(b["inputs"], &raw)
	for _, f := range []string{"source", "stale", "expired", "age_ms", "derived_from_stale"} {
		if _, ok := raw["nobody.result"][f]; !ok {
			t.Errorf("input entry lacks %q: %v", f, raw["nobody.result"])
		}
	}
}

func TestHTTPClassification(t *testing.T) {
	const maxBody = 64
	big := `{"value": "` + strings.Repeat("x", maxBody) + `"}`
	exact := `{"value": "` + strings.Repeat("x", maxBody-13) + `"}`
	if len(exact) != maxBody {
		t.Fatalf("exact is %d bytes", len(exact))
	}
	tests := []struct {
		name   string
		status int
		body   string
		kind   fault.Kind
		value  any
		errHas string
	}{
		{"value", 200, `{"value": {"a": [1, "b"]}}`, fault.KindNone, map[string]any{"a": []any{json.Number("1"), "b"}}, ""},
		{"null value", 200, `{"value": null}`, fault.KindNone, nil, ""},
		{"value and null error", 200, `{"value": 3, "error": null, "meta": {}}`, fault.KindNone, json.Number("3"), ""},
		{"exactly max_body", 200, exact, fault.KindNone, strings.Repeat("x", maxBody-13), ""},
		{"201 with value", 201, `{"value": 1}`, fault.KindNone, json.Number("1"), ""},
		{"contract error", 200, `{"error": {"kind": "contract", "message": "bad\nconfig"}}`, fault.KindContract, nil, "bad config"},
		{"permanent alias", 200, `{"error": {"kind": "permanent", "message": "x"}}`, fault.KindContract, nil, ""},
		{"transient error", 200, `{"error": {"kind": "transient"}}`, fault.KindTransient, nil, "(no message)"},
		{"validation error", 200, `{"error": {"kind": "validation", "message": "no map"}}`, fault.KindValidation, nil, ""},
		{"control", 200, `{"error": {"kind": "control", "message": "nothing to do"}}`, fault.KindControl, nil, ""},
		{"unknown kind", 200, `{"error": {"kind": "flaky", "message": "m"}}`, fault.KindDownstream, nil, `unknown kind "flaky"`},
		{"kind none", 200, `{"error": {"kind": "none"}}`, fault.KindDownstream, nil, "cannot report"},
		{"kind canceled", 200, `{"error": {"kind": "canceled"}}`, fault.KindDownstream, nil, "cannot report"},
		{"kind not a string", 200, `{"error": {"kind": 5}}`, fault.KindDownstream, nil, "without a kind"},
		{"error not an object", 200, `{"error": "boom"}`, fault.KindDownstream, nil, "must be an object"},
		{"neither", 200, `{"result": 1}`, fault.KindDownstream, nil, "neither"},
		{"both", 200, `{"value": 1, "error": {"kind": "transient"}}`, fault.KindDownstream, nil, "both"},
		{"not JSON", 200, `<html>oops</html>`, fault.KindDownstream, nil, "malformed"},
		{"array", 200, `[1]`, fault.KindDownstream, nil, "not a JSON object"},
		{"null", 200, `null`, fault.KindDownstream, nil, "not a JSON object"},
		{"empty 200", 200, ``, fault.KindDownstream, nil, "empty body"},
		{"204", 204, ``, fault.KindDownstream, nil, "empty body"},
		{"trailing data", 200, `{"value": 1} {"value": 2}`, fault.KindDownstream, nil, "data after"},
		{"truncated", 200, `{"value": [1, 2`, fault.KindDownstream, nil, "malformed"},
		{"oversized", 200, big, fault.KindDownstream, nil, "max_body"},
		{"400", 400, `{"detail": "bad input"}`, fault.KindDownstream, nil, "400 Bad Request"},
		{"404", 404, ``, fault.KindDownstream, nil, "404"},
		{"409", 409, ``, fault.KindDownstream, nil, "409"},
		{"408", 408, ``, fault.KindTransient, nil, "408"},
		{"429", 429, ``, fault.KindTransient, nil, "429"},
		{"500", 500, `trace`, fault.KindTransient, nil, "500 Internal Server Error: trace"},
		{"503", 503, ``, fault.KindTransient, nil, "503"},
		{"oversized 503", 503, big, fault.KindTransient, nil, "503"},
		{"304", 304, ``, fault.KindDownstream, nil, "304"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRemote(t, reply(tc.status, tc.body))
			m := r.module(t, "/", func(s *modules.HTTPSettings) { s.MaxBody = maxBody })
			v, err := m.Run(context.Background(), tickInput("m", nil, nil, 1, time.Second))
			if k := fault.Classify(err); k != tc.kind {
				t.Fatalf("kind %v (%v), want %v", k, err, tc.kind)
			}
			if err == nil {
				vb, _ := json.Marshal(v)
				wb, _ := json.Marshal(tc.value)
				if string(vb) != string(wb) {
					t.Fatalf("value %s, want %s", vb, wb)
				}
			} else if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %q lacks %q", err, tc.errHas)
			}
		})
	}
}

// countingBody is an endless answer body that counts the bytes read from it.
type countingBody struct {
	n      atomic.Int64
	closed atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	b.n.Add(int64(len(p)))
	return len(p), nil
}

func (b *countingBody) Close() error { b.closed.Store(true); return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHTTPNeverReadsPastMaxBody feeds endless answers and checks that at most
// max_body+1 bytes are read, whatever the status and the declared length.
func TestHTTPNeverReadsPastMaxBody(t *testing.T) {
	for _, tc := range []struct {
		status int
		length int64
		kind   fault.Kind
	}{{200, -1, fault.KindDownstream}, {200, 1 << 40, fault.KindDownstream}, {503, -1, fault.KindTransient},
		{400, -1, fault.KindDownstream}, {200, 100, fault.KindDownstream}} {
		for _, maxBody := range []int64{1, 100, 1 << 20} {
			body := &countingBody{}
			c := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, ContentLength: tc.length, Body: body, Header: http.Header{}, Request: r}, nil
			})}
			m, err := modules.NewHTTP(modules.HTTPSettings{URL: "http://remote.invalid/", MaxBody: maxBody}, modules.WithClient(c))
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Run(context.Background(), nil)
			if k := fault.Classify(err); k != tc.kind {
				t.Errorf("status %d length %d max %d: kind %v (%v), want %v", tc.status, tc.length, maxBody, k, err, tc.kind)
			}
			if n := body.n.Load(); n > maxBody+1 {
				t.Errorf("status %d length %d max %d: read %d bytes", tc.status, tc.length, maxBody, n)
			}
			if !body.closed.Load() {
				t.Errorf("status %d: body not closed", tc.status)
			}
		}
	}
}

func TestHTTPKeepAlive(t *testing.T) {
	var conns atomic.Int64
	var failing atomic.Bool
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		if failing.Load() {
			reply(503, `{"busy": true}`)(w, req)
			return
		}
		reply(200, `{"value": 1}`)(w, req)
	}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
	})
	m := r.module(t, "/")
	for i := range 20 {
		if _, err := m.Run(context.Background(), tickInput("m", nil, nil, uint64(i+1), time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// Also after error answers, whose bodies are drained.
	failing.Store(true)
	for i := range 5 {
		m.Run(context.Background(), tickInput("m", nil, nil, uint64(i+21), time.Second))
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 25 sequential requests, want 1 (keep-alive)", n)
	}
}

func TestHTTPTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	m, err := modules.NewHTTP(modules.HTTPSettings{URL: "http://" + closedAddr + "/"}, modules.WithClient(modules.NewClient()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(context.Background(), nil); fault.Classify(err) != fault.KindTransient {
		t.Errorf("connection refused: %v (%v)", fault.Classify(err), err)
	}

	// The remote drops the connection without answering.
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	if _, err := r.module(t, "/").Run(context.Background(), nil); fault.Classify(err) != fault.KindTransient {
		t.Errorf("dropped connection: %v (%v)", fault.Classify(err), err)
	}

	// The remote answers headers, then drops the connection mid-body.
	r = newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		io.WriteString(w, `{"value": `)
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	if _, err := r.module(t, "/").Run(context.Background(), nil); fault.Classify(err) != fault.KindTransient {
		t.Errorf("connection dropped mid-body: %v (%v)", fault.Classify(err), err)
	}
}

func TestHTTPRedirects(t *testing.T) {
	other := newRemote(t, reply(200, `{"value": "elsewhere"}`))
	var keys sync.Map
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		switch req.URL.Path {
		case "/moved":
			http.Redirect(w, req, "/here", http.StatusPermanentRedirect)
		case "/found":
			http.Redirect(w, req, "/here", http.StatusFound)
		case "/away":
			http.Redirect(w, req, other.srv.URL+"/", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, req, "/loop", http.StatusTemporaryRedirect)
		case "/here":
			keys.Store(req.Header.Get("Idempotency-Key"), string(b))
			io.WriteString(w, `{"value": "here"}`)
		}
	})
	in := tickInput("m", nil, nil, 3, time.Second)
	v, err := r.module(t, "/moved").Run(context.Background(), in)
	if err != nil || v != "here" {
		t.Fatalf("308 on the same host: %v %v", v, err)
	}
	if b, ok := keys.Load("3-m"); !ok || !strings.Contains(b.(string), `"tick_id":3`) {
		t.Fatalf("the redirected POST lost its body or headers: %v %v", b, ok)
	}
	for _, path := range []string{"/found", "/away", "/loop"} {
		_, err := r.module(t, path).Run(context.Background(), in)
		if fault.Classify(err) != fault.KindDownstream || !errors.Is(err, modules.ErrRedirectRefused) {
			t.Errorf("%s: %v (%v), want a refused redirect (downstream)", path, fault.Classify(err), err)
		}
	}
}

func TestHTTPDeadlineCancelsRequest(t *testing.T) {
	cancelled := make(chan time.Time, 4)
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body) // net/http notices a closed connection once the body is read
		<-req.Context().Done()
		cancelled <- time.Now()
	})
	m := r.module(t, "/")
	const budget = 50 * time.Millisecond
	in := tickInput("m", nil, nil, 1, budget)
	ctx, cancel := context.WithDeadline(context.Background(), in.Deadline())
	defer cancel()
	start := time.Now()
	_, err := m.Run(ctx, in)
	took := time.Since(start)
	if k := fault.ClassifyIn(ctx, err); k != fault.KindTransient {
		t.Fatalf("deadline: %v (%v), want transient", k, err)
	}
	if took > budget+20*time.Millisecond {
		t.Errorf("returned after %v, budget %v", took, budget)
	}
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("the remote never saw its request cancelled")
	}

	// A cancelled tick (shutdown) is canceled, not the remote's fault.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = m.Run(ctx, tickInput("m", nil, nil, 2, time.Second))
	if k := fault.ClassifyIn(ctx, err); k != fault.KindCanceled {
		t.Fatalf("cancelled: %v (%v), want canceled", k, err)
	}
	<-cancelled
}

func TestHTTPTimeout(t *testing.T) {
	deadlines := make(chan string, 1)
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		deadlines <- req.Header.Get("X-Cycled-Deadline")
		io.Copy(io.Discard, req.Body)
		<-req.Context().Done()
	})
	m := r.module(t, "/", func(s *modules.HTTPSettings) { s.Timeout = 30 * time.Millisecond })
	in := tickInput("m", nil, nil, 1, time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), in.Deadline())
	defer cancel()
	start := time.Now()
	_, err := m.Run(ctx, in)
	if k := fault.ClassifyIn(ctx, err); k != fault.KindTransient || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("timeout: %v (%v) after %v", k, err, time.Since(start))
	}
	dl, err := time.Parse(time.RFC3339Nano, <-deadlines)
	if err != nil || !dl.Before(in.Deadline().Add(-500*time.Millisecond)) {
		t.Fatalf("X-Cycled-Deadline %v (%v) is not the attempt's timeout", dl, err)
	}
}

func TestNewHTTPValidation(t *testing.T) {
	for _, tc := range []struct {
		s    modules.HTTPSettings
		path string
		has  string
	}{
		{modules.HTTPSettings{}, "url", "required"},
		{modules.HTTPSettings{URL: "/tick"}, "url", "not an absolute URL"},
		{modules.HTTPSettings{URL: "127.0.0.1:9000/tick"}, "url", ""},
		{modules.HTTPSettings{URL: "ftp://host/x"}, "url", `scheme "ftp"`},
		{modules.HTTPSettings{URL: "http://"}, "url", "no host"},
		{modules.HTTPSettings{URL: "http:opaque"}, "url", "no host"},
		{modules.HTTPSettings{URL: "http://u:p@host/"}, "url", "credentials"},
		{modules.HTTPSettings{URL: "http://host:99999/"}, "url", "port"},
		{modules.HTTPSettings{URL: "http://ho st/"}, "url", "invalid URL"},
		// Credentials in a URL that does not parse are not shown either (GET /config, logs).
		{modules.HTTPSettings{URL: "http://user:s3cret@ho st/p"}, "url", `invalid URL "http://***@ho st/p"`},
		{modules.HTTPSettings{URL: "//user:s3cret@host/p"}, "url", `"//***@host/p" is not an absolute URL`},
		{modules.HTTPSettings{URL: "http://host/", MaxBody: -1}, "max_body", ">= 0"},
		{modules.HTTPSettings{URL: "http://host/", MaxBody: 65 << 20}, "max_body", "64MiB"},
		{modules.HTTPSettings{URL: "http://host/", Timeout: -1}, "timeout", ">= 0"},
	} {
		_, err := modules.NewHTTP(tc.s)
		var ve *tiers.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != tc.path || !strings.Contains(ve.Problems[0].Message, tc.has) {
			t.Errorf("%+v: %v, want %s: …%s…", tc.s, err, tc.path, tc.has)
		}
	}
	m, err := modules.NewHTTP(modules.HTTPSettings{URL: "https://example.com:8443/tick?v=1"})
	if err != nil || m.Settings().MaxBody != modules.DefaultMaxBody || m.URL() != "https://example.com:8443/tick?v=1" {
		t.Fatalf("%v %+v", err, m)
	}
}

func TestNewClient(t *testing.T) {
	c := modules.NewClient()
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T", c.Transport)
	}
	if tr.Proxy != nil {
		t.Error("the client must not take a proxy from the environment")
	}
	if tr.MaxIdleConnsPerHost < 32 || tr.IdleConnTimeout == 0 || tr.DisableKeepAlives {
		t.Errorf("pool: %d idle per host, idle timeout %v, keep-alive off %v", tr.MaxIdleConnsPerHost, tr.IdleConnTimeout, tr.DisableKeepAlives)
	}
	if c.Timeout != 0 || c.CheckRedirect == nil {
		t.Errorf("timeout %v, CheckRedirect set %v", c.Timeout, c.CheckRedirect != nil)
	}
	if a, b := modules.SharedClient(), modules.SharedClient(); a != b {
		t.Error("SharedClient is not shared")
	}
}
