package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/metrics"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// module wraps f in a pointer: the engine compares module implementations with ==, which
// panics on a bare tiers.ModuleFunc (func values are not comparable).
func module(f tiers.ModuleFunc) tiers.Module { return &funcModule{f} }

type funcModule struct{ f tiers.ModuleFunc }

func (m *funcModule) Run(ctx context.Context, in *tiers.Input) (any, error) { return m.f(ctx, in) }

func value(v any) tiers.Module {
	return module(func(context.Context, *tiers.Input) (any, error) { return v, nil })
}

// rig is a real step-mode engine behind the API on a loopback httptest server.
type rig struct {
	t          *testing.T
	e          *cycle.Engine
	srv        *httptest.Server
	reg        *prometheus.Registry
	logs       *observer.ObservedLogs
	failSafety atomic.Bool
	failFlaky  atomic.Bool
}

type rigOptions struct {
	cfg  cycle.Config
	opts func(*api.Options)
	wrap func(http.Handler) http.Handler
	// base, if set, is the server's base context (cmd/cycled cancels it at shutdown), and
	// every accepted connection gets a send buffer of sendBuffer bytes if that is set.
	base       context.Context
	sendBuffer int
	// listen, if set, is the address the server listens on (default 127.0.0.1:0); the
	// client still connects to 127.0.0.1 on its port.
	listen string
}

// smallSendListener gives every accepted TCP connection a small send buffer, so that a
// client that does not read fills it quickly.
type smallSendListener struct {
	net.Listener
	size int
}

func (l smallSendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		_ = tc.SetWriteBuffer(l.size)
	}
	return c, err
}

func testConfig() cycle.Config {
	return cycle.Config{
		History: 5,
		Tiers: []tiers.Tier{
			{Name: "safety", Budget: time.Second, MaxAttempts: 1,
				Breaker: breaker.Settings{FailureThreshold: 5, Cooldown: time.Hour}},
			{Name: "work", Budget: time.Second, MaxAttempts: 1,
				Breaker: breaker.Settings{FailureThreshold: 2, Cooldown: time.Hour}},
		},
	}
}

func newRig(t *testing.T, ro rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, reg: prometheus.NewRegistry()}
	if ro.cfg.Tiers == nil {
		ro.cfg = testConfig()
	}
	col := metrics.New(r.reg)
	mods := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: module(func(context.Context, *tiers.Input) (any, error) {
			if r.failSafety.Load() {
				return nil, fault.Transient(errors.New("sensor offline"))
			}
			return "clear", nil
		})},
		{Spec: tiers.ModuleSpec{Name: "good", Tier: "work"}, Module: value(map[string]int{"obstacles": 0})},
		{Spec: tiers.ModuleSpec{Name: "flaky", Tier: "work"}, Module: module(func(context.Context, *tiers.Input) (any, error) {
			if r.failFlaky.Load() {
				return nil, fault.Transient(errors.New("downstream flapping"))
			}
			return 42, nil
		})},
		{Spec: tiers.ModuleSpec{Name: "slashy", Tier: "work", Writes: "ns/key"}, Module: value("deep")},
	}
	e, err := cycle.New(ro.cfg, mods, cycle.WithHooks(col.Hooks()))
	if err != nil {
		t.Fatalf("cycle.New: %v", err)
	}
	col.Attach(e)
	r.e = e
	core, logs := observer.New(zapcore.InfoLevel)
	r.logs = logs
	opts := api.Options{
		Engine:   e,
		Registry: r.reg,
		Logger:   zap.New(core),
		Version:  "test",
		DecodeModule: func(body []byte) (cycle.Registration, error) {
			var req struct {
				Name  string   `json:"name"`
				Tier  string   `json:"tier"`
				Value any      `json:"value"`
				Panic bool     `json:"panic"`
				Fail  bool     `json:"fail"`
				Reads []string `json:"reads"`
			}
			if err := api.DecodeStrict(body, &req); err != nil {
				return cycle.Registration{}, err
			}
			if req.Panic {
				panic("decoder exploded")
			}
			m := value(req.Value)
			if req.Fail {
				m = module(func(context.Context, *tiers.Input) (any, error) { return nil, fault.Transient(errors.New("down")) })
			}
			return cycle.Registration{Spec: tiers.ModuleSpec{Name: req.Name, Tier: req.Tier, Reads: req.Reads}, Module: m}, nil
		},
	}
	opts = api.WithPingInterval(opts, 20*time.Millisecond)
	if ro.opts != nil {
		ro.opts(&opts)
	}
	h := api.New(opts)
	if ro.wrap != nil {
		h = ro.wrap(h)
	}
	r.srv = httptest.NewUnstartedServer(h)
	base := ro.base
	if base == nil {
		base = context.Background()
	}
	r.srv.Config.BaseContext = func(l net.Listener) context.Context { return api.ListenerContext(base, l) }
	if ro.listen != "" {
		ln, err := net.Listen("tcp", ro.listen)
		if err != nil {
			t.Skipf("listen on %s: %v", ro.listen, err)
		}
		r.srv.Listener.Close()
		r.srv.Listener = ln
	}
	if ro.sendBuffer > 0 {
		r.srv.Listener = smallSendListener{Listener: r.srv.Listener, size: ro.sendBuffer}
	}
	r.srv.Start()
	if ro.listen != "" {
		r.srv.URL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(r.srv.Listener.Addr().(*net.TCPAddr).Port))
	}
	t.Cleanup(func() {
		r.srv.Close()
		_ = e.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.WaitWorkers(ctx); err != nil {
			t.Errorf("WaitWorkers: %v", err)
		}
	})
	return r
}

// do sends a request; hdr are header name/value pairs. It returns the response (body
// closed) and the body.
func (r *rig) do(method, path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.srv.URL+path, body)
	if err != nil {
		r.t.Fatalf("NewRequest: %v", err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the client sends req.Host, not a Host header
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := r.srv.Client().Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return res, b
}

// expect sends a request and checks its status; it returns the body.
func (r *rig) expect(status int, method, path string, body io.Reader, hdr ...string) []byte {
	r.t.Helper()
	res, b := r.do(method, path, body, hdr...)
	if res.StatusCode != status {
		r.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, status, b)
	}
	return b
}

type errorBody struct {
	Error struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Field    string `json:"field"`
		Problems []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"problems"`
	} `json:"error"`
}

// expectError checks a JSON error answer and returns it.
func (r *rig) expectError(status int, code, method, path string, body io.Reader, hdr ...string) errorBody {
	r.t.Helper()
	res, b := r.do(method, path, body, hdr...)
	if res.StatusCode != status {
		r.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, status, b)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		r.t.Errorf("%s %s: Content-Type %q, want JSON", method, path, ct)
	}
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil {
		r.t.Fatalf("%s %s: error body is not JSON: %v: %s", method, path, err, b)
	}
	if e.Error.Code != code || e.Error.Message == "" {
		r.t.Errorf("%s %s: error %+v, want code %q with a message", method, path, e.Error, code)
	}
	return e
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, b)
	}
	return v
}

// tick runs a tick through POST /ticks and returns its summary.
func (r *rig) tick() faultsummary.Summary {
	r.t.Helper()
	return decode[faultsummary.Summary](r.t, r.expect(http.StatusOK, http.MethodPost, "/ticks", nil))
}

func jsonBody(s string) io.Reader { return strings.NewReader(s) }

const ctJSON = "application/json"

func TestLatestETagAndList(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.expectError(http.StatusServiceUnavailable, "no_tick_yet", http.MethodGet, "/ticks/latest", nil)

	s1 := r.tick()
	if s1.TickID != 1 || s1.Schema != faultsummary.Schema || len(s1.Modules()) != 4 {
		t.Fatalf("POST /ticks: %+v", s1)
	}
	r.tick()
	res, b := r.do(http.MethodGet, "/ticks/latest", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /ticks/latest: %d %s", res.StatusCode, b)
	}
	// The summary is served as marshalled by faultsummary: the contract's field names.
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"schema", "tick_id", "scheduled_at", "started_at", "finished_at", "start_lag_ms", "wall_ms",
		"overrun", "finish", "emergency_mode", "emergency", "overall_severity", "tiers", "modules", "retry_counts",
		"open_circuits", "half_open_circuits", "degraded_keys", "budget_violations"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("summary lacks %q", f)
		}
	}
	if raw["tick_id"].(float64) != 2 {
		t.Errorf("tick_id = %v, want 2", raw["tick_id"])
	}
	tag := res.Header.Get("ETag")
	if tag == "" || !strings.HasPrefix(tag, `"`) {
		t.Fatalf("ETag %q", tag)
	}
	if res, _ := r.do(http.MethodGet, "/ticks/latest", nil, "If-None-Match", tag); res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match current: %d, want 304", res.StatusCode)
	}
	if res, _ := r.do(http.MethodGet, "/ticks/latest", nil, "If-None-Match", `"other", W/`+tag); res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match list with weak tag: %d, want 304", res.StatusCode)
	}
	r.tick()
	res, b = r.do(http.MethodGet, "/ticks/latest", nil, "If-None-Match", tag)
	if res.StatusCode != http.StatusOK || decode[faultsummary.Summary](t, b).TickID != 3 || res.Header.Get("ETag") == tag {
		t.Errorf("after a tick: %d, ETag %q (old %q)", res.StatusCode, res.Header.Get("ETag"), tag)
	}

	// History keeps 5: after 7 ticks, 3..7.
	for range 4 {
		r.tick()
	}
	type list struct {
		Ticks      []faultsummary.Summary `json:"ticks"`
		Count      int                    `json:"count"`
		NextBefore uint64                 `json:"next_before"`
		HistoryCap int                    `json:"history_cap"`
	}
	ids := func(l list) []uint64 {
		var out []uint64
		for _, s := range l.Ticks {
			out = append(out, s.TickID)
		}
		return out
	}
	l := decode[list](t, r.expect(http.StatusOK, http.MethodGet, "/ticks", nil))
	if fmt.Sprint(ids(l)) != "[7 6 5 4 3]" || l.Count != 5 || l.HistoryCap != 5 {
		t.Errorf("GET /ticks: ids %v count %d cap %d", ids(l), l.Count, l.HistoryCap)
	}
	l = decode[list](t, r.expect(http.StatusOK, http.MethodGet, "/ticks?limit=2", nil))
	if fmt.Sprint(ids(l)) != "[7 6]" || l.NextBefore != 6 {
		t.Errorf("limit=2: ids %v next %d", ids(l), l.NextBefore)
	}
	l = decode[list](t, r.expect(http.StatusOK, http.MethodGet, "/ticks?limit=2&before=6", nil))
	if fmt.Sprint(ids(l)) != "[5 4]" {
		t.Errorf("before=6: ids %v", ids(l))
	}
	l = decode[list](t, r.expect(http.StatusOK, http.MethodGet, "/ticks?limit=1000", nil))
	if l.Count != 5 {
		t.Errorf("limit above the history: count %d, want 5", l.Count)
	}
	l = decode[list](t, r.expect(http.StatusOK, http.MethodGet, "/ticks?before=1", nil))
	if l.Count != 0 || l.Ticks == nil {
		t.Errorf("before=1: %+v", l)
	}
	l = decode[list](t, r.expect(http.StatusOK, http.MethodGet, "/ticks?before=0", nil))
	if l.Count != 0 || l.Ticks == nil {
		t.Errorf("before=0 (nothing is below tick 1): %d ticks, want none", l.Count)
	}
	for _, q := range []string{"limit=-1", "limit=0", "limit=x", "before=x", "before=-3"} {
		r.expectError(http.StatusBadRequest, "bad_parameter", http.MethodGet, "/ticks?"+q, nil)
	}

	if s := decode[faultsummary.Summary](t, r.expect(http.StatusOK, http.MethodGet, "/ticks/4", nil)); s.TickID != 4 {
		t.Errorf("GET /ticks/4: tick %d", s.TickID)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/ticks/2", nil)
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/ticks/99", nil)
	e := r.expectError(http.StatusBadRequest, "bad_parameter", http.MethodGet, "/ticks/abc", nil)
	if e.Error.Field != "id" {
		t.Errorf("field %q, want id", e.Error.Field)
	}
}

func TestLongPoll(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, q := range []string{"wait=abc", "wait=-1s", "wait=-1e300", "wait=NaN", "wait=5s&after=x", "after=3"} {
		r.expectError(http.StatusBadRequest, "bad_parameter", http.MethodGet, "/ticks/latest?"+q, nil)
	}

	// Before the first tick, a wait that ends without a tick is still 503.
	r.expectError(http.StatusServiceUnavailable, "no_tick_yet", http.MethodGet, "/ticks/latest?wait=20ms", nil)

	// A waiter before the first tick gets it.
	got := make(chan faultsummary.Summary, 1)
	go func() {
		res, b := r.do(http.MethodGet, "/ticks/latest?wait=10s", nil)
		var s faultsummary.Summary
		if res.StatusCode == http.StatusOK {
			_ = json.Unmarshal(b, &s)
		}
		got <- s
	}()
	waitFor(t, "the first tick", func() bool {
		if _, err := r.e.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			if s.TickID == 0 {
				t.Fatal("long-poll for the first tick failed")
			}
			return true
		default:
			return false
		}
	})

	// A waiter with after=latest gets the next tick, driven from another goroutine.
	latest := r.e.Latest().TickID
	go func() {
		res, b := r.do(http.MethodGet, fmt.Sprintf("/ticks/latest?wait=10s&after=%d", latest), nil)
		var s faultsummary.Summary
		if res.StatusCode == http.StatusOK {
			_ = json.Unmarshal(b, &s)
		}
		got <- s
	}()
	go func() { _, _ = r.e.Tick(context.Background()) }()
	select {
	case s := <-got:
		if s.TickID != latest+1 {
			t.Errorf("long-poll answered tick %d, want %d", s.TickID, latest+1)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll did not return after a tick")
	}

	// A newer tick already there: answered at once.
	s := decode[faultsummary.Summary](t, r.expect(http.StatusOK, http.MethodGet, "/ticks/latest?wait=30s&after=0", nil))
	if s.TickID != r.e.Latest().TickID {
		t.Errorf("after=0: tick %d", s.TickID)
	}

	// Seconds too many for a time.Duration are the longest wait, not a negative one.
	s = decode[faultsummary.Summary](t, r.expect(http.StatusOK, http.MethodGet, "/ticks/latest?wait=1e300&after=0", nil))
	if s.TickID != r.e.Latest().TickID {
		t.Errorf("wait=1e300&after=0: tick %d", s.TickID)
	}

	// An id still to come waits for it: ticks in between do not answer, and the wait
	// ends with the latest summary.
	cur := r.e.Latest().TickID
	future := make(chan faultsummary.Summary, 1)
	go func() {
		res, b := r.do(http.MethodGet, fmt.Sprintf("/ticks/latest?wait=10s&after=%d", cur+2), nil)
		var s faultsummary.Summary
		if res.StatusCode == http.StatusOK {
			_ = json.Unmarshal(b, &s)
		}
		future <- s
	}()
	// Without ticks it does not answer (before the fix it answered the latest at once).
	select {
	case s := <-future:
		t.Fatalf("after=%d answered tick %d before that tick existed", cur+2, s.TickID)
	case <-time.After(100 * time.Millisecond):
	}
	for range 3 {
		if _, err := r.e.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case s := <-future:
		if s.TickID != cur+3 {
			t.Errorf("after=%d answered tick %d, want %d (the tick after the one named)", cur+2, s.TickID, cur+3)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll for a tick still to come did not return after it")
	}
	s = decode[faultsummary.Summary](t, r.expect(http.StatusOK, http.MethodGet, "/ticks/latest?wait=30ms&after=100000", nil))
	if s.TickID != r.e.Latest().TickID {
		t.Errorf("after=100000, wait ended: tick %d, want the latest %d", s.TickID, r.e.Latest().TickID)
	}

	// A wait that ends without a new tick answers the latest, or 304 with a matching tag.
	res, b := r.do(http.MethodGet, "/ticks/latest?wait=30ms", nil)
	if res.StatusCode != http.StatusOK || decode[faultsummary.Summary](t, b).TickID != r.e.Latest().TickID {
		t.Errorf("timed-out wait: %d %s", res.StatusCode, b)
	}
	tag := res.Header.Get("ETag")
	if res, _ := r.do(http.MethodGet, "/ticks/latest?wait=30ms", nil, "If-None-Match", tag); res.StatusCode != http.StatusNotModified {
		t.Errorf("timed-out wait with If-None-Match: %d, want 304", res.StatusCode)
	}

	// If-None-Match names the tick to beat when after is absent.
	go func() {
		res, b := r.do(http.MethodGet, "/ticks/latest?wait=10s", nil, "If-None-Match", tag)
		var s faultsummary.Summary
		if res.StatusCode == http.StatusOK {
			_ = json.Unmarshal(b, &s)
		}
		got <- s
	}()
	go func() { _, _ = r.e.Tick(context.Background()) }()
	select {
	case s := <-got:
		if s.TickID <= latest+1 {
			t.Errorf("If-None-Match long-poll answered tick %d", s.TickID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("If-None-Match long-poll did not return after a tick")
	}
}

// waitFor polls cond every 2 ms until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

func TestModulesBreakersBlackboardEmergency(t *testing.T) {
	r := newRig(t, rigOptions{})
	type moduleView struct {
		Name     string                  `json:"name"`
		Tier     string                  `json:"tier"`
		Origin   string                  `json:"origin"`
		Pending  bool                    `json:"pending"`
		Busy     bool                    `json:"busy"`
		Breaker  *struct{ State string } `json:"breaker"`
		Last     *faultsummary.Module    `json:"last"`
		LastGood struct {
			Key     string   `json:"key"`
			Source  string   `json:"source"`
			Stale   bool     `json:"stale"`
			Expired bool     `json:"expired"`
			AgeMs   *float64 `json:"age_ms"`
		} `json:"last_good"`
	}
	mods := decode[struct{ Modules []moduleView }](t, r.expect(http.StatusOK, http.MethodGet, "/modules", nil)).Modules
	if len(mods) != 4 {
		t.Fatalf("GET /modules: %d modules", len(mods))
	}
	m := decode[moduleView](t, r.expect(http.StatusOK, http.MethodGet, "/modules/flaky", nil))
	if m.Tier != "work" || m.Origin != "config" || m.Last != nil || m.LastGood.Source != "none" || m.LastGood.Expired || m.Breaker == nil || m.Breaker.State != "closed" {
		t.Errorf("GET /modules/flaky before a tick: %+v", m)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/modules/nope", nil)

	ok := r.tick()
	// In the tick that wrote it, the value is live, in the summary and in the module's view
	// alike (the view said "stale").
	m = decode[moduleView](t, r.expect(http.StatusOK, http.MethodGet, "/modules/flaky", nil))
	if line, _ := ok.Module("flaky"); line.Served.Source.String() != "live" || m.LastGood.Source != "live" || m.LastGood.Stale {
		t.Errorf("after a successful tick: summary serves %q, GET /modules/flaky last_good %+v", line.Served.Source, m.LastGood)
	}
	r.failFlaky.Store(true)
	r.tick()
	s := r.tick() // the second failure opens flaky's breaker (threshold 2)
	if len(s.OpenCircuits) != 1 || s.OpenCircuits[0] != "flaky" {
		t.Fatalf("open circuits %v", s.OpenCircuits)
	}
	m = decode[moduleView](t, r.expect(http.StatusOK, http.MethodGet, "/modules/flaky", nil))
	if m.Last == nil || m.Last.Status != faultsummary.StatusFailed || m.Breaker.State != "open" ||
		m.LastGood.Source != "last_good" || !m.LastGood.Stale || m.LastGood.AgeMs == nil || m.LastGood.Key != "flaky.result" {
		t.Errorf("GET /modules/flaky after failures: %+v (last %+v)", m, m.Last)
	}

	type breakerView struct {
		Name                string   `json:"name"`
		State               string   `json:"state"`
		CooldownRemainingMs *float64 `json:"cooldown_remaining_ms"`
		Settings            struct {
			FailureThreshold int      `json:"failure_threshold"`
			TripOn           []string `json:"trip_on"`
		} `json:"settings"`
	}
	brs := decode[struct{ Breakers []breakerView }](t, r.expect(http.StatusOK, http.MethodGet, "/breakers", nil)).Breakers
	states := map[string]string{}
	for _, b := range brs {
		states[b.Name] = b.State
		if b.Name == "flaky" && (b.CooldownRemainingMs == nil || b.Settings.FailureThreshold != 2) {
			t.Errorf("flaky breaker view: %+v", b)
		}
	}
	if states["flaky"] != "open" || states["good"] != "closed" || len(brs) != 4 {
		t.Errorf("GET /breakers: %v", states)
	}
	b := decode[breakerView](t, r.expect(http.StatusOK, http.MethodPost, "/breakers/flaky/reset", nil))
	if b.State != "closed" {
		t.Errorf("reset: state %q", b.State)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodPost, "/breakers/nope/reset", nil)

	// Blackboard: what was served after the latest tick, including the stale fallback.
	type entry struct {
		Key    string `json:"key"`
		Value  any    `json:"value"`
		Source string `json:"source"`
		Stale  bool   `json:"stale"`
	}
	board := decode[struct {
		TickID  uint64 `json:"tick_id"`
		Entries []entry
	}](t, r.expect(http.StatusOK, http.MethodGet, "/blackboard", nil))
	if board.TickID != 3 || len(board.Entries) != 4 {
		t.Errorf("GET /blackboard: %+v", board)
	}
	ent := decode[entry](t, r.expect(http.StatusOK, http.MethodGet, "/blackboard/flaky.result", nil))
	if ent.Source != "last_good" || !ent.Stale || ent.Value != float64(42) {
		t.Errorf("GET /blackboard/flaky.result: %+v", ent)
	}
	if ent := decode[entry](t, r.expect(http.StatusOK, http.MethodGet, "/blackboard/ns/key", nil)); ent.Value != "deep" {
		t.Errorf("GET /blackboard/ns/key: %+v", ent)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/blackboard/nope", nil)

	// Emergency.
	em := decode[faultsummary.Emergency](t, r.expect(http.StatusOK, http.MethodGet, "/emergency", nil))
	if em.Active {
		t.Errorf("emergency active before a safety failure: %+v", em)
	}
	r.failSafety.Store(true)
	r.tick()
	em = decode[faultsummary.Emergency](t, r.expect(http.StatusOK, http.MethodGet, "/emergency", nil))
	if !em.Active || em.SinceTick != 4 || !strings.Contains(em.Reason, "guard") {
		t.Errorf("GET /emergency after a safety failure: %+v", em)
	}
	reset := decode[struct {
		Reset     string                 `json:"reset"`
		Emergency faultsummary.Emergency `json:"emergency"`
	}](t, r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil))
	if reset.Reset != "requested" || !reset.Emergency.Active {
		t.Errorf("POST /emergency/reset: %+v", reset)
	}

	// Metrics reflect the same ticks.
	body := string(r.expect(http.StatusOK, http.MethodGet, "/metrics", nil))
	for _, want := range []string{`cycled_ticks_total{finish="completed"} 4`, `cycled_emergency_active 1`,
		`cycled_module_runs_total{module="flaky",status="failed",tier="work"} 2`, "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestModuleRegistration(t *testing.T) {
	var registered, deregistered, forgotten atomic.Value
	r := newRig(t, rigOptions{opts: func(o *api.Options) {
		o.Registered = func(reg cycle.Registration, body []byte) error {
			registered.Store(reg.Spec.Name + " " + string(body))
			return nil
		}
		o.Deregistered = func(name string) { deregistered.Store(name) }
		o.ForgetSaved = func(name string) (bool, error) {
			switch name {
			case "unrestored":
				forgotten.Store(name)
				return true, nil
			case "unwritable":
				return true, errors.New("disk full")
			}
			return false, nil
		}
	}})
	res, b := r.do(http.MethodPost, "/modules", jsonBody(`{"name":"extra","tier":"work","value":7}`), "Content-Type", ctJSON)
	if res.StatusCode != http.StatusCreated || res.Header.Get("Location") != "/modules/extra" {
		t.Fatalf("POST /modules: %d %s (Location %q)", res.StatusCode, b, res.Header.Get("Location"))
	}
	created := decode[struct {
		Name    string `json:"name"`
		Origin  string `json:"origin"`
		Pending bool   `json:"pending"`
	}](t, b)
	if created.Name != "extra" || created.Origin != "runtime" || !created.Pending {
		t.Errorf("created: %+v", created)
	}
	if got, _ := registered.Load().(string); !strings.HasPrefix(got, "extra {") {
		t.Errorf("Registered callback: %q", got)
	}
	s := r.tick()
	if m, ok := s.Module("extra"); !ok || m.Status != faultsummary.StatusOK {
		t.Errorf("extra after a tick: %+v %v", m, ok)
	}

	r.expectError(http.StatusConflict, "duplicate", http.MethodPost, "/modules", jsonBody(`{"name":"extra","tier":"work"}`), "Content-Type", ctJSON)
	e := r.expectError(http.StatusUnprocessableEntity, "invalid", http.MethodPost, "/modules", jsonBody(`{"name":"x!","tier":"nowhere"}`), "Content-Type", ctJSON)
	if e.Error.Field != "name" || len(e.Error.Problems) != 2 || e.Error.Problems[1].Field != "tier" {
		t.Errorf("422: %+v", e.Error)
	}
	e = r.expectError(http.StatusBadRequest, "unknown_field", http.MethodPost, "/modules", jsonBody(`{"name":"y","tier":"work","colour":1}`), "Content-Type", ctJSON)
	if e.Error.Field != "colour" {
		t.Errorf("unknown field: %+v", e.Error)
	}
	r.expectError(http.StatusBadRequest, "malformed_json", http.MethodPost, "/modules", jsonBody(`{"name":`), "Content-Type", ctJSON)
	r.expectError(http.StatusBadRequest, "malformed_json", http.MethodPost, "/modules", jsonBody(`{} {}`), "Content-Type", ctJSON)
	r.expectError(http.StatusBadRequest, "bad_type", http.MethodPost, "/modules", jsonBody(`{"name":3}`), "Content-Type", ctJSON)
	r.expectError(http.StatusBadRequest, "empty_body", http.MethodPost, "/modules", nil, "Content-Type", ctJSON)
	r.expectError(http.StatusUnsupportedMediaType, "unsupported_media_type", http.MethodPost, "/modules", jsonBody(`{"name":"z","tier":"work"}`), "Content-Type", "text/plain")
	// A body without a Content-Type is taken as JSON.
	r.expect(http.StatusCreated, http.MethodPost, "/modules", jsonBody(`{"name":"untyped","tier":"work"}`))

	// Too large: declared, and streamed without a length.
	big := `{"name":"big","tier":"work","value":"` + strings.Repeat("x", api.DefaultMaxBodyBytes) + `"}`
	r.expectError(http.StatusRequestEntityTooLarge, "body_too_large", http.MethodPost, "/modules", jsonBody(big), "Content-Type", ctJSON)
	r.expectError(http.StatusRequestEntityTooLarge, "body_too_large", http.MethodPost, "/modules", io.MultiReader(jsonBody(big)), "Content-Type", ctJSON)

	// A panicking decoder is a logged JSON 500.
	r.expectError(http.StatusInternalServerError, "internal", http.MethodPost, "/modules", jsonBody(`{"name":"p","panic":true}`), "Content-Type", ctJSON)
	if n := r.logs.FilterMessage("panic in HTTP handler").Len(); n != 1 {
		t.Errorf("panic logged %d times", n)
	}

	r.expect(http.StatusNoContent, http.MethodDelete, "/modules/extra", nil)
	if got, _ := deregistered.Load().(string); got != "extra" {
		t.Errorf("Deregistered callback: %q", got)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodDelete, "/modules/extra", nil)
	r.expect(http.StatusNoContent, http.MethodDelete, "/modules/unrestored", nil) // saved, never restored
	if got := forgotten.Load(); got != "unrestored" {
		t.Errorf("ForgetSaved: %q", got)
	}
	r.expectError(http.StatusInternalServerError, "internal", http.MethodDelete, "/modules/unwritable", nil)
	e = r.expectError(http.StatusConflict, "not_runtime", http.MethodDelete, "/modules/good", nil)
	if !strings.Contains(e.Error.Message, "configuration file") {
		t.Errorf("not_runtime message: %q", e.Error.Message)
	}
	if n := r.logs.FilterMessage("admin request").Len(); n == 0 {
		t.Error("no admin audit line")
	}
}

// TestReRegistrationResetsItsBreaker: a module registered again under the name of one
// whose own breaker is open (a remote that restarted) starts with a closed breaker, and
// the 201 says what was reset.
func TestReRegistrationResetsItsBreaker(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.expect(http.StatusCreated, http.MethodPost, "/modules", jsonBody(`{"name":"remote","tier":"work","fail":true}`), "Content-Type", ctJSON)
	for range 3 {
		r.tick()
	}
	if s := r.tick(); !slices.Contains(s.OpenCircuits, "remote") {
		t.Fatalf("the failing module's breaker did not open: %+v", s.OpenCircuits)
	}
	// No tick boundary between the DELETE and the POST: the old breaker is still there.
	r.expect(http.StatusNoContent, http.MethodDelete, "/modules/remote", nil)
	created := decode[struct {
		Name         string `json:"name"`
		BreakerReset *struct {
			Name string `json:"name"`
			From string `json:"from"`
		} `json:"breaker_reset"`
	}](t, r.expect(http.StatusCreated, http.MethodPost, "/modules", jsonBody(`{"name":"remote","tier":"work","value":1}`), "Content-Type", ctJSON))
	if created.BreakerReset == nil || created.BreakerReset.Name != "remote" || created.BreakerReset.From != "open" {
		t.Errorf("201 breaker_reset = %+v, want the open breaker reported reset", created.BreakerReset)
	}
	s := r.tick()
	if m, ok := s.Module("remote"); !ok || m.Status != faultsummary.StatusOK || m.CircuitState != "closed" {
		t.Errorf("the re-registered module's first tick: %+v (it waited out the old cooldown)", m)
	}
	// A first registration, or one whose breaker is closed, reports nothing.
	b := r.expect(http.StatusCreated, http.MethodPost, "/modules", jsonBody(`{"name":"fresh","tier":"work","value":1}`), "Content-Type", ctJSON)
	if strings.Contains(string(b), "breaker_reset") {
		t.Errorf("a fresh registration reports a reset: %s", b)
	}
}

// TestRegistrationWarnings: POST /modules warns, as cycled validate does for a file, about
// a read of a key nobody writes and of one written by a later tier.
func TestRegistrationWarnings(t *testing.T) {
	r := newRig(t, rigOptions{})
	type answer struct {
		Warnings []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
			Warning bool   `json:"warning"`
		} `json:"warnings"`
	}
	a := decode[answer](t, r.expect(http.StatusCreated, http.MethodPost, "/modules",
		jsonBody(`{"name":"reader","tier":"work","reads":["guard.result","nobody.result","good.result"]}`), "Content-Type", ctJSON))
	if len(a.Warnings) != 2 || a.Warnings[0].Field != "reads[1]" || !strings.Contains(a.Warnings[0].Message, `no module writes key "nobody.result"`) ||
		a.Warnings[1].Field != "reads[2]" || !strings.Contains(a.Warnings[1].Message, "does not run earlier") || !a.Warnings[0].Warning {
		t.Errorf("warnings = %+v", a.Warnings)
	}
	if b := r.expect(http.StatusCreated, http.MethodPost, "/modules", jsonBody(`{"name":"quiet","tier":"work","reads":["guard.result"]}`), "Content-Type", ctJSON); strings.Contains(string(b), "warnings") {
		t.Errorf("a clean registration has warnings: %s", b)
	}
}

func TestNotConfiguredCallbacks(t *testing.T) {
	r := newRig(t, rigOptions{opts: func(o *api.Options) { o.DecodeModule = nil; o.Registry = nil }})
	r.expectError(http.StatusNotImplemented, "not_implemented", http.MethodPost, "/modules", jsonBody(`{}`), "Content-Type", ctJSON)
	r.expectError(http.StatusNotImplemented, "not_implemented", http.MethodPost, "/modules/good/faults", jsonBody(`{}`), "Content-Type", ctJSON)
	r.expectError(http.StatusNotImplemented, "not_implemented", http.MethodPost, "/config/reload", nil)
	r.expectError(http.StatusNotImplemented, "not_implemented", http.MethodGet, "/config", nil)
	r.expectError(http.StatusNotImplemented, "not_implemented", http.MethodGet, "/metrics", nil)
}

func TestConfigReloadAndFaults(t *testing.T) {
	view := atomic.Value{}
	view.Store(map[string]any{"version": 1.0})
	var fail atomic.Bool
	r := newRig(t, rigOptions{opts: func(o *api.Options) {
		o.ConfigView = func() any { return view.Load() }
		o.Reload = func(context.Context, bool) error {
			if fail.Load() {
				return fmt.Errorf("reload: %w", &tiers.ValidationError{Problems: tiers.Problems{
					{Path: "tiers[2].budget", Message: "must be > 0"},
					{Path: "modules[0].tier", Message: `unknown tier "x"`},
				}})
			}
			view.Store(map[string]any{"version": 2.0})
			return nil
		}
		o.Faults = func(name string, body []byte) (any, error) {
			if name == "good" {
				return modules.ApplyFaultsJSON(value(1), body) // not a builtin module
			}
			if name == "slashy" {
				return nil, fmt.Errorf("module %q is not built in: %w", name, errors.ErrUnsupported)
			}
			var req struct {
				FailRate float64 `json:"fail_rate"`
			}
			if err := api.DecodeStrict(body, &req); err != nil {
				return nil, err
			}
			if req.FailRate > 1 {
				return nil, &api.HTTPError{Status: http.StatusUnprocessableEntity, Field: "fail_rate", Err: errors.New("fail_rate must be <= 1")}
			}
			return map[string]any{"module": name, "fail_rate": req.FailRate}, nil
		}
	}})
	cfg := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/config", nil))
	if cfg["version"] != 1.0 {
		t.Fatalf("GET /config: %v", cfg)
	}
	fail.Store(true)
	e := r.expectError(http.StatusUnprocessableEntity, "invalid", http.MethodPost, "/config/reload", nil)
	if e.Error.Field != "tiers[2].budget" || len(e.Error.Problems) != 2 {
		t.Errorf("invalid reload: %+v", e.Error)
	}
	if cfg := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/config", nil)); cfg["version"] != 1.0 {
		t.Errorf("config after a failed reload: %v", cfg)
	}
	fail.Store(false)
	ok := decode[struct {
		Status string         `json:"status"`
		Config map[string]any `json:"config"`
	}](t, r.expect(http.StatusOK, http.MethodPost, "/config/reload", nil))
	if ok.Status != "reloaded" || ok.Config["version"] != 2.0 {
		t.Errorf("reload: %+v", ok)
	}

	got := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodPost, "/modules/flaky/faults", jsonBody(`{"fail_rate":0.5}`), "Content-Type", ctJSON))
	if got["fail_rate"] != 0.5 {
		t.Errorf("faults: %v", got)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodPost, "/modules/nope/faults", jsonBody(`{}`), "Content-Type", ctJSON)
	r.expectError(http.StatusConflict, "unsupported", http.MethodPost, "/modules/slashy/faults", jsonBody(`{}`), "Content-Type", ctJSON)
	r.expectError(http.StatusConflict, "unsupported", http.MethodPost, "/modules/good/faults", jsonBody(`{}`), "Content-Type", ctJSON)
	r.expectError(http.StatusBadRequest, "malformed_json", http.MethodPost, "/modules/flaky/faults", jsonBody(`{`), "Content-Type", ctJSON)
	r.expectError(http.StatusBadRequest, "unknown_field", http.MethodPost, "/modules/flaky/faults", jsonBody(`{"fail_rat":1}`), "Content-Type", ctJSON)
	e = r.expectError(http.StatusUnprocessableEntity, "invalid", http.MethodPost, "/modules/flaky/faults", jsonBody(`{"fail_rate":2}`), "Content-Type", ctJSON)
	if e.Error.Field != "fail_rate" {
		t.Errorf("HTTPError field: %+v", e.Error)
	}
}

func TestAdminAuth(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		r := newRig(t, rigOptions{opts: func(o *api.Options) { o.AdminToken = "s3cret" }})
		res, _ := r.do(http.MethodPost, "/ticks", nil)
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("no token: %d, WWW-Authenticate %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
		}
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/ticks", nil)
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/ticks", nil, "Authorization", "Basic czNjcmV0")
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/ticks", nil, "Authorization", "Bearer wrong")
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer ")
		r.expect(http.StatusOK, http.MethodPost, "/ticks", nil, "Authorization", "Bearer s3cret")
		r.expect(http.StatusOK, http.MethodPost, "/ticks", nil, "Authorization", "bearer s3cret")
		r.expect(http.StatusOK, http.MethodGet, "/ticks/latest", nil) // reads need no token
		// Auth comes before content checks.
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/modules", jsonBody(`x`), "Content-Type", "text/plain")
	})
	t.Run("no token off loopback", func(t *testing.T) {
		r := newRig(t, rigOptions{wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				ln := fakeListener{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8080}}
				h.ServeHTTP(w, req.WithContext(api.ListenerContext(req.Context(), ln)))
			})
		}})
		r.expectError(http.StatusForbidden, "admin_disabled", http.MethodPost, "/ticks", nil)
		r.expectError(http.StatusForbidden, "admin_disabled", http.MethodPost, "/ticks", nil, "Authorization", "Bearer anything")
		r.expectError(http.StatusForbidden, "admin_disabled", http.MethodDelete, "/modules/good", nil)
		r.expect(http.StatusOK, http.MethodGet, "/healthz", nil)
	})
	// A wildcard listener accepts connections to 127.0.0.1 too, whose local address is
	// then loopback: the listener's address decides, not the connection's.
	t.Run("no token on a wildcard listener from loopback", func(t *testing.T) {
		r := newRig(t, rigOptions{listen: "0.0.0.0:0"})
		r.expectError(http.StatusForbidden, "admin_disabled", http.MethodPost, "/ticks", nil)
		r.expectError(http.StatusForbidden, "admin_disabled", http.MethodPost, "/emergency/reset", nil)
		r.expectError(http.StatusForbidden, "admin_disabled", http.MethodDelete, "/modules/good", nil)
		r.expect(http.StatusOK, http.MethodGet, "/healthz", nil)
	})
	t.Run("token on a wildcard listener", func(t *testing.T) {
		r := newRig(t, rigOptions{listen: "0.0.0.0:0", opts: func(o *api.Options) { o.AdminToken = "s3cret" }})
		r.expect(http.StatusOK, http.MethodPost, "/ticks", nil, "Authorization", "Bearer s3cret")
	})
	t.Run("no token on an unknown listener", func(t *testing.T) {
		e, err := cycle.New(testConfig(), []cycle.Registration{
			{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: value(1)},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		srv := httptest.NewServer(api.New(api.Options{Engine: e})) // no ListenerContext
		defer srv.Close()
		res, err := srv.Client().Post(srv.URL+"/ticks", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("POST /ticks without ListenerContext: %d, want 403", res.StatusCode)
		}
	})
	t.Run("no token on loopback", func(t *testing.T) {
		r := newRig(t, rigOptions{})
		r.expect(http.StatusOK, http.MethodPost, "/ticks", nil)
		r.expectError(http.StatusForbidden, "cross_origin", http.MethodPost, "/ticks", nil, "Sec-Fetch-Site", "cross-site")
		r.expectError(http.StatusForbidden, "cross_origin", http.MethodPost, "/emergency/reset", nil, "Origin", "https://evil.example")
	})
}

func TestRouting(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/nope", nil)
	res, b := r.do(http.MethodPut, "/ticks", nil)
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /ticks: %d %s", res.StatusCode, b)
	}
	if allow := strings.Join(res.Header.Values("Allow"), ","); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Errorf("Allow %q", allow)
	}
	r.expectError(http.StatusMethodNotAllowed, "method_not_allowed", http.MethodDelete, "/healthz", nil)
	res, b = r.do(http.MethodHead, "/healthz", nil)
	if res.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("HEAD /healthz: %d, %d bytes", res.StatusCode, len(b))
	}
}

func TestHealthStepMode(t *testing.T) {
	r := newRig(t, rigOptions{})
	h := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/healthz", nil))
	if h["status"] != "ok" || h["mode"] != "step" || h["version"] != "test" {
		t.Errorf("GET /healthz: %v", h)
	}
	// In step mode the daemon is ready before its first tick: ticks only run when asked.
	if h := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/readyz", nil)); h["status"] != "ready" {
		t.Errorf("GET /readyz: %v", h)
	}
}

func TestPeriodicScheduler(t *testing.T) {
	cfg := testConfig()
	cfg.Period = time.Hour // the first tick runs at once, the next in an hour
	r := newRig(t, rigOptions{cfg: cfg, opts: func(o *api.Options) { o.WatchdogTimeout = 300 * time.Millisecond }})

	r.expectError(http.StatusServiceUnavailable, "no_tick_yet", http.MethodGet, "/readyz", nil)
	r.expectError(http.StatusConflict, "not_step_mode", http.MethodPost, "/ticks", nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "readyz", func() bool {
		res, _ := r.do(http.MethodGet, "/readyz", nil)
		return res.StatusCode == http.StatusOK
	})
	r.expect(http.StatusOK, http.MethodGet, "/healthz", nil)
	r.expectError(http.StatusConflict, "not_step_mode", http.MethodPost, "/ticks", nil)

	// No tick for longer than the watchdog: 503 with the health body and a JSON error.
	waitFor(t, "the watchdog", func() bool {
		res, _ := r.do(http.MethodGet, "/healthz", nil)
		return res.StatusCode == http.StatusServiceUnavailable
	})
	var h struct {
		Status     string `json:"status"`
		LastTickID uint64 `json:"last_tick_id"`
	}
	e := r.expectError(http.StatusServiceUnavailable, "watchdog", http.MethodGet, "/healthz", nil)
	if !strings.Contains(e.Error.Message, "since tick 1") {
		t.Errorf("watchdog message %q", e.Error.Message)
	}
	h = decode[struct {
		Status     string `json:"status"`
		LastTickID uint64 `json:"last_tick_id"`
	}](t, r.expect(http.StatusServiceUnavailable, http.MethodGet, "/healthz", nil))
	if h.Status != "stalled" || h.LastTickID != 1 {
		t.Errorf("stalled health: %+v", h)
	}
}

func TestWatchdogWithoutAnyTick(t *testing.T) {
	cfg := testConfig()
	cfg.Period = time.Hour
	r := newRig(t, rigOptions{cfg: cfg, opts: func(o *api.Options) { o.WatchdogTimeout = time.Millisecond }})
	waitFor(t, "the watchdog", func() bool {
		res, _ := r.do(http.MethodGet, "/healthz", nil)
		return res.StatusCode == http.StatusServiceUnavailable
	})
	e := r.expectError(http.StatusServiceUnavailable, "watchdog", http.MethodGet, "/healthz", nil)
	if !strings.HasPrefix(e.Error.Message, "no tick has completed for") {
		t.Errorf("watchdog message %q", e.Error.Message)
	}
}

func TestEncodableBlackboard(t *testing.T) {
	cfg := testConfig()
	e, err := cycle.New(cfg, []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: value(1)},
		{Spec: tiers.ModuleSpec{Name: "weird", Tier: "work"}, Module: value(make(chan int))},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Options{Engine: e}))
	defer func() {
		srv.Close()
		_ = e.Close()
		_ = e.WaitWorkers(context.Background())
	}()
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client().Get(srv.URL + "/blackboard")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("not encodable")) || !bytes.Contains(b, []byte(`"value":1`)) {
		t.Errorf("GET /blackboard with an unencodable value: %d %s", res.StatusCode, b)
	}
}

// fakeListener is a listener that only has an address.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

// hostAddr is a net.Addr given by its string.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

func TestLoopbackAddr(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80}, true},
		{&net.TCPAddr{IP: net.ParseIP("127.8.9.10"), Port: 80}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 80}, true},
		{&net.UnixAddr{Name: "/run/cycled.sock", Net: "unix"}, true},
		{hostAddr("localhost:8080"), true},
		{hostAddr("127.0.0.1:8080"), true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, false},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}, false},
		{&net.TCPAddr{Port: 80}, false}, // ":80"
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 80}, false},
		{hostAddr("0.0.0.0:8080"), false},
		{hostAddr("example.com:8080"), false},
		{nil, false},
	} {
		if got := api.LoopbackAddr(tc.addr); got != tc.want {
			t.Errorf("LoopbackAddr(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// A registration that cannot be persisted is not accepted: 500 not_persisted, and the
// engine is left without the module, so that the same name can be registered again.
func TestModuleRegistrationNotPersisted(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	r := newRig(t, rigOptions{opts: func(o *api.Options) {
		o.Registered = func(reg cycle.Registration, body []byte) error {
			if broken.Load() {
				return errors.New("save runtime modules: read-only file system")
			}
			return nil
		}
	}})
	e := r.expectError(http.StatusInternalServerError, "not_persisted", http.MethodPost, "/modules",
		jsonBody(`{"name":"extra","tier":"work","value":7}`), "Content-Type", ctJSON)
	if !strings.Contains(e.Error.Message, "read-only file system") || !strings.Contains(e.Error.Message, `"extra"`) {
		t.Errorf("message %q does not say what failed", e.Error.Message)
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/modules/extra", nil)
	s := r.tick()
	if m, ok := s.Module("extra"); ok {
		t.Errorf("a module whose registration failed ran: %+v", m)
	}
	if r.logs.FilterMessage("request failed").Len() != 1 {
		t.Errorf("the persistence failure was not logged once: %v", r.logs.All())
	}

	broken.Store(false)
	r.expect(http.StatusCreated, http.MethodPost, "/modules", jsonBody(`{"name":"extra","tier":"work","value":7}`), "Content-Type", ctJSON)
	s = r.tick()
	if m, ok := s.Module("extra"); !ok || m.Status != faultsummary.StatusOK {
		t.Errorf("extra registered again: %+v %v", m, ok)
	}
}

// TestOpenAPIServed: GET /openapi.json is the embedded description as JSON, and every
// route of the router is in it (deploy/check validates the answers against it).
func TestOpenAPIServed(t *testing.T) {
	r := newRig(t, rigOptions{})
	doc := decode[struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}](t, r.expect(http.StatusOK, http.MethodGet, "/openapi.json", nil))
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	for _, route := range []string{"GET /ticks/latest", "GET /ticks", "POST /ticks", "GET /ticks/{id}", "GET /ticks/stream",
		"GET /modules", "POST /modules", "GET /modules/{name}", "DELETE /modules/{name}", "POST /modules/{name}/faults",
		"GET /breakers", "POST /breakers/{name}/reset", "GET /blackboard", "GET /blackboard/{key}", "GET /emergency",
		"POST /emergency/reset", "GET /config", "POST /config/reload", "GET /healthz", "GET /readyz", "GET /metrics", "GET /bulkheads",
		"GET /openapi.json"} {
		method, path, _ := strings.Cut(route, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("%s is not described", route)
		}
	}
}

// TestBulkheadsListed: GET /bulkheads lists the bulkheads in force with their settings and
// counts, sorted by name; with none configured the list is empty, not null.
func TestBulkheadsListed(t *testing.T) {
	r := newRig(t, rigOptions{})
	if got := string(r.expect(http.StatusOK, http.MethodGet, "/bulkheads", nil)); !strings.Contains(got, `"bulkheads":[]`) {
		t.Fatalf("no bulkheads: %s", got)
	}
	cfg := testConfig()
	cfg.Bulkheads = map[string]bulkhead.Settings{"db": {MaxInFlight: 2, Wait: 5 * time.Millisecond}, "api": {MaxInFlight: 1}}
	r = newRig(t, rigOptions{cfg: cfg})
	type view struct {
		Name        string  `json:"name"`
		MaxInFlight int     `json:"max_in_flight"`
		WaitMs      float64 `json:"wait_ms"`
		InFlight    int     `json:"in_flight"`
		Rejections  uint64  `json:"rejections"`
	}
	got := decode[struct{ Bulkheads []view }](t, r.expect(http.StatusOK, http.MethodGet, "/bulkheads", nil)).Bulkheads
	if len(got) != 2 || got[0].Name != "api" || got[1] != (view{Name: "db", MaxInFlight: 2, WaitMs: 5}) {
		t.Fatalf("GET /bulkheads: %+v", got)
	}
}

// TestEmergencySecondEpisode: during a second emergency, GET /emergency describes it (its
// own since_tick and reason, no ended_tick), with the first one under previous; after it
// ends, its own ended_tick shows and the first stays under previous.
func TestEmergencySecondEpisode(t *testing.T) {
	cfg := testConfig()
	cfg.Emergency = cycle.EmergencyConfig{RecoverAfter: 1}
	r := newRig(t, rigOptions{cfg: cfg})
	get := func() faultsummary.EmergencyStatus {
		return decode[faultsummary.EmergencyStatus](t, r.expect(http.StatusOK, http.MethodGet, "/emergency", nil))
	}
	r.tick() // 1
	if em := get(); em.Active || em.SinceTick != 0 || em.Previous != nil {
		t.Fatalf("before any emergency: %+v", em)
	}
	r.failSafety.Store(true)
	r.tick() // 2: the first episode begins
	r.failSafety.Store(false)
	r.tick() // 3: it ends
	if em := get(); em.Active || em.SinceTick != 2 || em.EndedTick != 3 || em.Previous != nil {
		t.Fatalf("after the first episode: %+v", em)
	}
	r.tick() // 4
	r.failSafety.Store(true)
	r.tick() // 5: the second begins
	em := get()
	want := faultsummary.EmergencyEpisode{SinceTick: 2, EndedTick: 3, Reason: em.Reason}
	if !em.Active || em.SinceTick != 5 || em.EndedTick != 0 || em.Previous == nil || *em.Previous != want {
		t.Fatalf("during the second episode: %+v (previous %+v)", em, em.Previous)
	}
	body := string(r.expect(http.StatusOK, http.MethodGet, "/emergency", nil))
	if strings.Contains(body, `"ended_tick":3,"previous"`) || !strings.Contains(body, `"previous":{"since_tick":2,"ended_tick":3`) {
		t.Errorf("GET /emergency during the second episode: %s", body)
	}
	if s := r.e.Emergency(); s.EndedTick != 3 {
		t.Errorf("the summary's emergency keeps the last end: %+v", s)
	}
	r.failSafety.Store(false)
	r.tick() // 6: the second ends
	if em := get(); em.Active || em.SinceTick != 5 || em.EndedTick != 6 || em.Previous == nil || em.Previous.SinceTick != 2 {
		t.Fatalf("after the second episode: %+v (previous %+v)", em, em.Previous)
	}
}

// TestWatchdogPendingConfig: a configuration change that no tick boundary applies within
// the watchdog turns /healthz 503 with its own code, whatever the ticks say.
func TestWatchdogPendingConfig(t *testing.T) {
	cfg := testConfig()
	cfg.Period = time.Hour
	r := newRig(t, rigOptions{cfg: cfg, opts: func(o *api.Options) { o.WatchdogTimeout = 50 * time.Millisecond }})
	fast := cfg
	fast.Period = 10 * time.Millisecond
	if err := r.e.Reload(fast, r.e.Registrations()); err != nil { // no scheduler runs: it stays pending
		t.Fatal(err)
	}
	waitFor(t, "the watchdog", func() bool { // the change waits longer than the watchdog
		res, b := r.do(http.MethodGet, "/healthz", nil)
		return res.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "config_pending")
	})
	e := r.expectError(http.StatusServiceUnavailable, "config_pending", http.MethodGet, "/healthz", nil)
	if !strings.Contains(e.Error.Message, "configuration change has waited") {
		t.Errorf("message %q", e.Error.Message)
	}
}
