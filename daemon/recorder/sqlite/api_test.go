package sqlite_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// recRig is a step-mode engine of history 4, recorded on a real database, behind the API.
type recRig struct {
	t     *testing.T
	e     *cycle.Engine
	srv   *httptest.Server
	rec   *sqlite.Recorder
	fail  atomic.Bool // module "flaky" fails while set
	cache *api.Cache
}

func newRecRig(t *testing.T, dir string) *recRig {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	rec, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Flush: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := api.NewCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	g := &recRig{rec: rec, cache: cache, t: t}
	cfg := testConfig()
	cfg.History = 4
	mods := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: value("clear")},
		{Spec: tiers.ModuleSpec{Name: "flaky", Tier: "work"}, Module: module(func(context.Context, *tiers.Input) (any, error) {
			if g.fail.Load() {
				return nil, fault.Transient(errors.New("downstream flapping"))
			}
			return 42, nil
		})},
	}
	e, err := cycle.New(cfg, mods, cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	g.e = e
	h := api.New(api.Options{Engine: e, Recorder: rec.Reader, Cache: cache, AdminToken: "s3cret",
		Audit: func(a api.AdminAction) { rec.Event("admin", a) }})
	g.srv = httptest.NewUnstartedServer(h)
	g.srv.Config.BaseContext = func(l net.Listener) context.Context { return api.ListenerContext(context.Background(), l) }
	g.srv.Start()
	t.Cleanup(g.close)
	return g
}

func (g *recRig) close() {
	g.srv.Close()
	_ = g.e.Close()
	_ = g.rec.Close()
	g.cache.Close()
}

// ticks runs n ticks and returns the JSON GET /ticks/latest answered for each.
func (g *recRig) ticks(n int) map[uint64]string {
	g.t.Helper()
	out := map[uint64]string{}
	for range n {
		s, err := g.e.Tick(context.Background())
		if err != nil {
			g.t.Fatal(err)
		}
		out[s.TickID] = string(g.expect(http.StatusOK, "GET", "/ticks/latest", nil))
	}
	return out
}

// recorded waits until tick id is in the database.
func (g *recRig) recorded(id uint64) {
	g.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		pass := g.rec.Committed() // taken before the check: a commit after it closes it
		if b, _ := g.rec.Tick(context.Background(), id); b != nil {
			return
		}
		select {
		case <-pass:
		case <-timeout:
			g.t.Fatalf("tick %d not recorded within 10s", id)
		}
	}
}

type page struct {
	Ticks []json.RawMessage `json:"ticks"`
	Count int               `json:"count"`
	Next  uint64            `json:"next_before"`
}

func (g *recRig) list(query string) page {
	g.t.Helper()
	var p page
	if err := json.Unmarshal(g.expect(http.StatusOK, "GET", "/ticks"+query, nil), &p); err != nil {
		g.t.Fatal(err)
	}
	return p
}

func tickIDs(p page) []uint64 {
	var out []uint64
	for _, b := range p.Ticks {
		var s struct {
			ID uint64 `json:"tick_id"`
		}
		_ = json.Unmarshal(b, &s)
		out = append(out, s.ID)
	}
	return out
}

// Ticks beyond the in-memory window are served from the recorder, by id and in lists,
// with the JSON that was served while they were in memory.
func TestHistoryBeyondMemory(t *testing.T) {
	g := newRecRig(t, "")
	seen := g.ticks(20)
	g.recorded(20)
	g.cache.Close() // reads must come from the database, not from the cache
	g.cache, _ = api.NewCache(1 << 20)
	for id := uint64(1); id <= 20; id++ {
		b := g.expect(http.StatusOK, "GET", fmt.Sprintf("/ticks/%d", id), nil)
		if string(b) != seen[id] {
			t.Fatalf("tick %d:\n got %s\nwant %s", id, b, seen[id])
		}
	}
	p := g.list("?limit=10")
	if got := fmt.Sprint(tickIDs(p)); got != "[20 19 18 17 16 15 14 13 12 11]" || p.Next != 11 {
		t.Fatalf("list %s next %d", got, p.Next)
	}
	for _, b := range p.Ticks {
		var s struct {
			ID uint64 `json:"tick_id"`
		}
		_ = json.Unmarshal(b, &s)
		if string(b)+"\n" != seen[s.ID] && s.ID < 17 { // the newest four are whole in memory
			t.Fatalf("listed tick %d differs from the one served", s.ID)
		}
	}
	if got := fmt.Sprint(tickIDs(g.list("?before=3"))); got != "[2 1]" {
		t.Fatalf("before=3: %s", got)
	}
	g.expect(http.StatusNotFound, "GET", "/ticks/21", nil)
}

func TestListFilters(t *testing.T) {
	g := newRecRig(t, "")
	g.ticks(3)
	mid := time.Now()
	g.fail.Store(true)
	g.ticks(4) // flaky fails twice, then its breaker is open
	g.fail.Store(false)
	g.ticks(1)
	g.recorded(8)
	for _, tc := range []struct{ q, want string }{
		{"?severity=ok", "[3 2 1]"},
		{"?severity=degraded", "[8 7 6 5 4]"}, // the breaker stays open at tick 8
		{"?module=flaky", "[8 7 6 5 4]"},
		{"?module=flaky&status=failed", "[5 4]"},
		{"?status=open", "[8 7 6]"},
		{"?module=guard", "[]"},
		{"?since=" + mid.Format(time.RFC3339Nano), "[8 7 6 5 4]"},
		{"?until=" + mid.Format(time.RFC3339Nano), "[3 2 1]"},
		{"?severity=degraded&limit=3", "[8 7 6]"},
		{"?severity=degraded&before=7", "[6 5 4]"},
	} {
		if got := fmt.Sprint(tickIDs(g.list(tc.q))); got != tc.want {
			t.Errorf("GET /ticks%s: %s; want %s", tc.q, got, tc.want)
		}
	}
	for _, tc := range []struct{ q, field string }{
		{"?severity=awful", "severity"}, {"?status=ok", "status"}, {"?status=sad", "status"},
		{"?since=yesterday", "since"}, {"?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
	} {
		var e errorBody
		_ = json.Unmarshal(g.expect(http.StatusBadRequest, "GET", "/ticks"+tc.q, nil), &e)
		if e.Error.Field != tc.field {
			t.Errorf("GET /ticks%s: field %q; want %q", tc.q, e.Error.Field, tc.field)
		}
	}
}

func TestEventsRoute(t *testing.T) {
	g := newRecRig(t, "")
	g.fail.Store(true)
	g.ticks(2)
	g.expect(http.StatusOK, "POST", "/breakers/flaky/reset", nil, "Authorization", "Bearer s3cret", "Content-Type", "application/json")
	g.ticks(1)
	g.recorded(3)
	var p struct {
		Events []recorder.Event `json:"events"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(p.Events) == 0 || p.Events[len(p.Events)-1].Kind != "admin" {
		if time.Now().After(deadline) {
			t.Fatalf("no admin event: %+v", p.Events)
		}
		_ = json.Unmarshal(g.expect(http.StatusOK, "GET", "/events?kind=admin", nil), &p)
	}
	data := string(p.Events[0].Data)
	if !strings.Contains(data, `"route":"POST /breakers/{name}/reset"`) || strings.Contains(data, "s3cret") ||
		!strings.Contains(data, api.TokenFingerprint("s3cret")) {
		t.Fatalf("admin event %s", data)
	}
	_ = json.Unmarshal(g.expect(http.StatusOK, "GET", "/events?kind=breaker", nil), &p)
	if len(p.Events) != 2 || !strings.Contains(string(p.Events[0].Data), `"to":"open"`) {
		t.Fatalf("breaker events %+v", p.Events)
	}
	after := p.Events[0].ID
	_ = json.Unmarshal(g.expect(http.StatusOK, "GET", fmt.Sprintf("/events?kind=breaker&after=%d", after), nil), &p)
	if len(p.Events) != 1 || p.Events[0].ID <= after {
		t.Fatalf("after=%d: %+v", after, p.Events)
	}
	var e errorBody
	_ = json.Unmarshal(g.expect(http.StatusBadRequest, "GET", "/events?after=x", nil), &e)
	if e.Error.Field != "after" {
		t.Fatalf("field %q", e.Error.Field)
	}
}

// With a recorder ids never repeat, so after= above the latest id is a tick to come.
func TestLongPollWaitsForFutureTick(t *testing.T) {
	g := newRecRig(t, "")
	g.ticks(2)
	got := make(chan string, 1)
	go func() {
		res, err := http.Get(g.srv.URL + "/ticks/latest?wait=10s&after=3")
		if err != nil {
			got <- err.Error()
			return
		}
		defer res.Body.Close()
		var s struct {
			ID uint64 `json:"tick_id"`
		}
		_ = json.NewDecoder(res.Body).Decode(&s)
		got <- fmt.Sprint(s.ID)
	}()
	for id := 3; id <= 4; id++ {
		select {
		case v := <-got:
			t.Fatalf("long-poll answered %s before tick 4", v)
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := g.e.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if v := <-got; v != "4" {
		t.Fatalf("long-poll answered tick %s; want 4", v)
	}
}

func TestGzipOnce(t *testing.T) {
	g := newRecRig(t, "")
	seen := g.ticks(10)
	g.recorded(10)
	for _, path := range []string{"/ticks/latest", "/ticks/2"} {
		for range 2 {
			res, body := g.do("GET", path, nil, "Accept-Encoding", "gzip")
			if res.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("%s: not compressed", path)
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := io.ReadAll(zr)
			want := seen[10]
			if path == "/ticks/2" {
				want = seen[2]
			}
			if string(plain) != want {
				t.Fatalf("%s: gunzipped body differs", path)
			}
		}
	}
}

// do sends a request to the API and returns its answer and body.
func (g *recRig) do(method, path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.srv.URL+path, body)
	if err != nil {
		g.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := g.srv.Client().Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return res, b
}

// expect sends a request to the API and checks its status; it returns the body.
func (g *recRig) expect(status int, method, path string, body io.Reader, hdr ...string) []byte {
	g.t.Helper()
	res, b := g.do(method, path, body, hdr...)
	if res.StatusCode != status {
		g.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, status, b)
	}
	return b
}

// value is a module that always returns v.
func value(v any) tiers.Module {
	return module(func(context.Context, *tiers.Input) (any, error) { return v, nil })
}

// module wraps f in a pointer: the engine compares module implementations with ==.
func module(f tiers.ModuleFunc) tiers.Module { return &funcModule{f} }

type funcModule struct{ f tiers.ModuleFunc }

func (m *funcModule) Run(ctx context.Context, in *tiers.Input) (any, error) { return m.f(ctx, in) }

// testConfig is a two-tier step-mode configuration.
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

// errorBody is the API's JSON error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}
