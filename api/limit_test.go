package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// paceRig is the API over a step-mode engine, called in process (no sockets) so that it
// runs inside a synctest bubble: a request's wait for its turn passes in virtual time.
type paceRig struct {
	t testing.TB
	e *cycle.Engine
	h http.Handler
}

func newPaceRig(t testing.TB, rl *api.ReadLimiter) *paceRig {
	t.Helper()
	e, err := cycle.New(testConfig(), []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: value("clear")},
	})
	if err != nil {
		t.Fatalf("cycle.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &paceRig{t: t, e: e, h: api.New(api.Options{Engine: e, ReadLimiter: rl})}
}

// get serves GET path with ctx and returns the answer and how long (virtual time) it took.
func (p *paceRig) get(ctx context.Context, path string) (*httptest.ResponseRecorder, time.Duration) {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	w := httptest.NewRecorder()
	start := time.Now()
	p.h.ServeHTTP(w, req)
	return w, time.Since(start)
}

// near reports whether d is want to the millisecond (the limiter computes turns in float
// seconds).
func near(d, want time.Duration) bool { return d.Round(time.Millisecond) == want }

func (p *paceRig) tick() uint64 {
	p.t.Helper()
	s, err := p.e.Tick(context.Background())
	if err != nil {
		p.t.Fatalf("Tick: %v", err)
	}
	return s.TickID
}

func TestReadLimitPacesAndRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := api.NewReadLimiter(api.ReadLimit{Rate: 10, Burst: 2, MaxWait: time.Second})
		p := newPaceRig(t, rl)
		p.tick()
		// The burst is served at once, then one request every 100 ms.
		for i, want := range []time.Duration{0, 0, 100 * time.Millisecond, 100 * time.Millisecond} {
			w, took := p.get(context.Background(), "/modules")
			if w.Code != http.StatusOK || !near(took, want) {
				t.Fatalf("request %d: %d after %v, want 200 after %v", i, w.Code, took, want)
			}
		}

		// Eleven at once: ten get turns 100 ms … 1 s away, the eleventh's would be 1.1 s
		// away, over MaxWait: 429 at once, with Retry-After and a JSON error.
		type answer struct {
			code  int
			took  time.Duration
			retry string
			body  []byte
		}
		answers := make(chan answer, 11)
		var wg sync.WaitGroup
		for range 11 {
			wg.Go(func() {
				w, took := p.get(context.Background(), "/ticks/latest")
				answers <- answer{w.Code, took, w.Header().Get("Retry-After"), w.Body.Bytes()}
			})
		}
		wg.Wait()
		close(answers)
		served := map[time.Duration]bool{}
		refused := 0
		for a := range answers {
			switch a.code {
			case http.StatusOK:
				served[a.took.Round(time.Millisecond)] = true
			case http.StatusTooManyRequests:
				refused++
				var e errorBody
				if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Code != "rate_limited" || e.Error.Message == "" {
					t.Errorf("429 body %s (%v)", a.body, err)
				}
				if a.retry != "2" || a.took != 0 {
					t.Errorf("429 after %v with Retry-After %q, want at once with 2 (1.1 s rounded up)", a.took, a.retry)
				}
			default:
				t.Errorf("status %d: %s", a.code, a.body)
			}
		}
		if refused != 1 || len(served) != 10 {
			t.Fatalf("%d refused, %d distinct turns served, want 1 and 10", refused, len(served))
		}
		if got, want := rl.Stats(), (api.ReadLimitStats{Delayed: 2 + 10, Refused: 1}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
		for i := 1; i <= 10; i++ {
			if d := time.Duration(i) * 100 * time.Millisecond; !served[d] {
				t.Errorf("no request served after %v: %v", d, served)
			}
		}
	})
}

func TestReadLimitExemptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPaceRig(t, api.NewReadLimiter(api.ReadLimit{Rate: 1, Burst: 1, MaxWait: 10 * time.Second}))
		latest := p.tick()
		if w, took := p.get(context.Background(), "/emergency"); w.Code != http.StatusOK || took != 0 {
			t.Fatalf("first request: %d after %v", w.Code, took)
		}
		// The bucket is empty: a paced route waits a second.
		if w, took := p.get(context.Background(), "/ticks/latest"); w.Code != http.StatusOK || !near(took, time.Second) {
			t.Fatalf("/ticks/latest: %d after %v, want 200 after 1s", w.Code, took)
		}
		if w, took := p.get(context.Background(), "/no/such/route"); w.Code != http.StatusNotFound || !near(took, time.Second) {
			t.Fatalf("unknown route: %d after %v, want 404 after 1s", w.Code, took)
		}
		// Probes and /metrics are never paced (the bucket is still empty).
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if w, took := p.get(context.Background(), path); took != 0 || w.Code == http.StatusTooManyRequests {
				t.Errorf("%s: %d after %v, want an answer at once", path, w.Code, took)
			}
		}
		// A long-poll answered with the newer tick it waited for is not paced…
		answered := make(chan time.Time, 1)
		go func() {
			w, _ := p.get(context.Background(), fmt.Sprintf("/ticks/latest?wait=5s&after=%d", latest))
			if w.Code != http.StatusOK {
				t.Errorf("long-poll: %d %s", w.Code, w.Body)
			}
			answered <- time.Now()
		}()
		synctest.Wait() // the long-poll is waiting for a tick
		tickAt := time.Now()
		p.tick()
		if took := (<-answered).Sub(tickAt); took != 0 {
			t.Errorf("long-poll answered %v after the tick, want at once", took)
		}
		// …but one that timed out without a newer tick is.
		if w, took := p.get(context.Background(), "/ticks/latest?wait=100ms"); w.Code != http.StatusOK || !near(took, time.Second) {
			t.Errorf("timed-out long-poll: %d after %v, want 200 after 100ms of waiting and 900ms of pacing", w.Code, took)
		}
	})
}

// TestReadLimitLongPollPerConnection: with the connection known (ConnContext), a long-poll
// is spared once per tick per connection, also when it fell behind and its tick was there
// already; asking again for a tick the connection was given is paced.
func TestReadLimitLongPollPerConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPaceRig(t, api.NewReadLimiter(api.ReadLimit{Rate: 1, Burst: 1, MaxWait: 10 * time.Second}))
		p.tick()
		p.get(context.Background(), "/emergency") // takes the burst
		p.tick()
		latest := p.tick() // the client below saw tick 1: two behind
		conn := api.ConnContext(context.Background(), nil)
		behind := fmt.Sprintf("/ticks/latest?wait=5s&after=%d", latest-2)
		w, took := p.get(conn, behind)
		if w.Code != http.StatusOK || took != 0 {
			t.Fatalf("long-poll behind by two ticks: %d after %v, want 200 at once", w.Code, took)
		}
		if got := decode[faultsummary.Summary](t, w.Body.Bytes()).TickID; got != latest {
			t.Fatalf("answered tick %d, want %d", got, latest)
		}
		// The same tick again on this connection is paced, as the request of a client
		// whose connection is not known.
		for _, ctx := range []context.Context{conn, context.Background()} {
			if w, took := p.get(ctx, behind); w.Code != http.StatusOK || !near(took, time.Second) {
				t.Fatalf("long-poll answered a tick already given: %d after %v, want 200 after 1s", w.Code, took)
			}
		}
		// The next tick, waited for, is not.
		answered := make(chan time.Time, 1)
		go func() {
			p.get(conn, fmt.Sprintf("/ticks/latest?wait=5s&after=%d", latest))
			answered <- time.Now()
		}()
		synctest.Wait()
		tickAt := time.Now()
		p.tick()
		if took := (<-answered).Sub(tickAt); took != 0 {
			t.Errorf("long-poll answered %v after the tick, want at once", took)
		}
	})
}

func TestReadLimitClientLeavingGivesItsTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPaceRig(t, api.NewReadLimiter(api.ReadLimit{Rate: 1, Burst: 1, MaxWait: 10 * time.Second}))
		p.tick()
		p.get(context.Background(), "/modules") // takes the burst
		ctx, cancel := context.WithCancel(context.Background())
		left := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			w, _ := p.get(ctx, "/modules") // its turn is 1 s away
			left <- w
		}()
		time.Sleep(500 * time.Millisecond) // virtual time (synctest bubble)
		cancel()
		if w := <-left; w.Body.Len() != 0 {
			t.Errorf("a client that left was answered: %d %s", w.Code, w.Body)
		}
		// Its turn is the next client's: half a second away, not a second and a half.
		if w, took := p.get(context.Background(), "/modules"); w.Code != http.StatusOK || !near(took, 500*time.Millisecond) {
			t.Fatalf("next client: %d after %v, want 200 after 500ms", w.Code, took)
		}
	})
}

func TestReadLimitSetAtRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := api.NewReadLimiter(api.ReadLimit{Rate: 1, Burst: 1, MaxWait: time.Millisecond})
		p := newPaceRig(t, rl)
		p.tick()
		p.get(context.Background(), "/breakers")
		if w, _ := p.get(context.Background(), "/breakers"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("over the limit: %d, want 429", w.Code)
		}
		rl.Set(api.ReadLimit{}) // no limit
		if got := rl.Limit(); got != (api.ReadLimit{}) {
			t.Errorf("Limit() = %+v after Set(ReadLimit{})", got)
		}
		for range 100 {
			if w, took := p.get(context.Background(), "/breakers"); w.Code != http.StatusOK || took != 0 {
				t.Fatalf("without a limit: %d after %v", w.Code, took)
			}
		}
		// A limit set again starts from a full burst of the new size.
		rl.Set(api.ReadLimit{Rate: 1, Burst: 3, MaxWait: time.Millisecond})
		for i := range 4 {
			want := http.StatusOK
			if i == 3 {
				want = http.StatusTooManyRequests
			}
			if w, _ := p.get(context.Background(), "/breakers"); w.Code != want {
				t.Fatalf("request %d after Set: %d, want %d", i, w.Code, want)
			}
		}
	})
}

// ExampleReadLimiter paces a server's read routes: past the burst, a request waits for its
// turn, or is refused with 429 if its turn is further away than MaxWait.
func ExampleReadLimiter() {
	e, err := cycle.New(cycle.Config{Tiers: []tiers.Tier{{Name: "safety", Budget: time.Second, MaxAttempts: 1}}},
		[]cycle.Registration{{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: value("clear")}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	limiter := api.NewReadLimiter(api.ReadLimit{Rate: 1, Burst: 1, MaxWait: 10 * time.Millisecond})
	h := api.New(api.Options{Engine: e, ReadLimiter: limiter})
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/modules", nil))
		fmt.Println(w.Code, w.Header().Values("Retry-After"))
	}
	// A reload can lift the limit while the server runs.
	limiter.Set(api.ReadLimit{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/modules", nil))
	fmt.Println(w.Code)
	// Output:
	// 200 []
	// 429 [1]
	// 200
}

// TestReadLimitDefaults: the zero fields of a ReadLimit take their documented defaults, and
// a rate that is not a positive number means no limit.
func TestReadLimitDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			limit  api.ReadLimit
			burst  int // requests served at once
			paced  bool
			refuse time.Duration // the turn past which a request is refused (MaxWait)
		}{
			{"burst Rate/50", api.ReadLimit{Rate: 500}, 10, true, api.DefaultReadWait},
			{"burst at least 1", api.ReadLimit{Rate: 2}, 1, true, api.DefaultReadWait},
			{"no limit", api.ReadLimit{Rate: 0, Burst: 1}, 0, false, 0},
			{"NaN is no limit", api.ReadLimit{Rate: math.NaN(), Burst: 1}, 0, false, 0},
		} {
			p := newPaceRig(t, api.NewReadLimiter(tc.limit))
			p.tick()
			served := 0
			for range 1000 {
				w, took := p.get(context.Background(), "/breakers")
				if w.Code != http.StatusOK {
					t.Fatalf("%s: %d", tc.name, w.Code)
				}
				if took > 0 {
					break
				}
				served++
			}
			if !tc.paced {
				if served != 1000 {
					t.Errorf("%s: paced after %d requests", tc.name, served)
				}
				continue
			}
			// The request after the burst waited for its turn. Of Rate+2 more at once, those
			// whose turn is within the default MaxWait (1 s) are served, the rest refused.
			if served != tc.burst {
				t.Errorf("%s: %d served at once, want a burst of %d", tc.name, served, tc.burst)
			}
			var wg sync.WaitGroup
			var ok, refused atomic.Int32
			for range int(tc.limit.Rate) + 2 {
				wg.Go(func() {
					switch w, took := p.get(context.Background(), "/breakers"); {
					case w.Code == http.StatusOK && took <= tc.refuse:
						ok.Add(1)
					case w.Code == http.StatusTooManyRequests && took == 0:
						refused.Add(1)
					default:
						t.Errorf("%s: %d after %v", tc.name, w.Code, took)
					}
				})
			}
			wg.Wait()
			if want := int32(tc.limit.Rate); ok.Load() != want || refused.Load() != 2 {
				t.Errorf("%s: %d served within %v and %d refused, want %d and 2", tc.name, ok.Load(), tc.refuse, refused.Load(), want)
			}
		}
	})
}
