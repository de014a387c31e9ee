package modules_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// These tests run remote modules inside the engine, against loopback servers.

func engineTiers(knowledgeBudget time.Duration) []tiers.Tier {
	bo := retrybudget.Backoff{Base: 2 * time.Millisecond, Factor: 2, Max: 10 * time.Millisecond}
	br := breaker.Settings{FailureThreshold: 5, Cooldown: time.Second, HalfOpenSuccesses: 1}
	return []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1, Backoff: bo, Breaker: br},
		{Name: "knowledge", Budget: knowledgeBudget, MaxAttempts: 3, Backoff: bo, Breaker: br},
		{Name: "planning", Budget: 100 * time.Millisecond, MaxAttempts: 2, Backoff: bo, Breaker: br},
	}
}

func newEngine(t *testing.T, budget time.Duration, regs ...cycle.Registration) *cycle.Engine {
	t.Helper()
	e, err := cycle.New(cycle.Config{Tiers: engineTiers(budget)}, regs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// attempt is what the remote saw of one request.
type attempt struct {
	key     string
	attempt int
	inputs  map[string]blackboard.Entry
}

// recorder collects the requests a remote received.
type recorder struct {
	mu   sync.Mutex
	seen []attempt
}

func (rc *recorder) record(r *http.Request) attempt {
	var body struct {
		Attempt int                         `json:"attempt"`
		Inputs  map[string]blackboard.Entry `json:"inputs"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	a := attempt{key: r.Header.Get("Idempotency-Key"), attempt: body.Attempt, inputs: body.Inputs}
	rc.mu.Lock()
	rc.seen = append(rc.seen, a)
	rc.mu.Unlock()
	return a
}

func (rc *recorder) all() []attempt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]attempt(nil), rc.seen...)
}

func line(t *testing.T, s *faultsummary.Summary, name string) faultsummary.Module {
	t.Helper()
	m, ok := s.Module(name)
	if !ok {
		t.Fatalf("no line for %s in tick %d", name, s.TickID)
	}
	return m
}

func tick(t *testing.T, e *cycle.Engine) *faultsummary.Summary {
	t.Helper()
	s, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHTTPValueFlowsToLaterTier: a remote module in knowledge reads the safety module's
// key; a Go module in planning reads the remote's key in the same tick.
func TestHTTPValueFlowsToLaterTier(t *testing.T) {
	var rc recorder
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		a := rc.record(req)
		json.NewEncoder(w).Encode(map[string]any{"value": map[string]any{"route": "A", "guard": a.inputs["guard.result"].Value}})
	})
	var planned atomic.Pointer[blackboard.Entry]
	e := newEngine(t, 200*time.Millisecond,
		cycle.Registration{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"},
			Module: tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return "clear", nil })},
		cycle.Registration{Spec: tiers.ModuleSpec{Name: "remote", Tier: "knowledge", Reads: []string{"guard.result"}}, Module: r.module(t, "/")},
		cycle.Registration{Spec: tiers.ModuleSpec{Name: "planner", Tier: "planning", Reads: []string{"remote.result"}},
			Module: tiers.ModuleFunc(func(_ context.Context, in *tiers.Input) (any, error) {
				en, _ := in.Get("remote.result")
				planned.Store(&en)
				return "go", nil
			})},
	)
	s := tick(t, e)
	if m := line(t, s, "remote"); m.Status != faultsummary.StatusOK || m.Served.Source != blackboard.Live {
		t.Fatalf("remote: %+v", m)
	}
	en := planned.Load()
	if en == nil || en.Source != blackboard.Live || en.TickID != s.TickID || en.Module != "remote" || en.Stale {
		t.Fatalf("planner read %+v", en)
	}
	if v, _ := en.Value.(map[string]any); v["route"] != "A" || v["guard"] != "clear" {
		t.Fatalf("planner read value %#v", en.Value)
	}
	seen := rc.all()
	if len(seen) != 1 || seen[0].inputs["guard.result"].Source != blackboard.Live || seen[0].key != "1-remote" {
		t.Fatalf("remote saw %+v", seen)
	}
}

func TestHTTP503RetriedThenSucceeds(t *testing.T) {
	var rc recorder
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		if a := rc.record(req); a.attempt < 3 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"value": 42}`)
	})
	e := newEngine(t, 200*time.Millisecond, cycle.Registration{Spec: tiers.ModuleSpec{Name: "remote", Tier: "knowledge"}, Module: r.module(t, "/")})
	s := tick(t, e)
	m := line(t, s, "remote")
	if m.Status != faultsummary.StatusRetried || m.Attempts != 3 || s.RetryCounts["remote"] != 2 {
		t.Fatalf("remote: %+v, retries %v", m, s.RetryCounts)
	}
	seen := rc.all()
	if len(seen) != 3 {
		t.Fatalf("%d requests", len(seen))
	}
	for i, a := range seen {
		if a.key != "1-remote" || a.attempt != i+1 {
			t.Errorf("request %d: key %q attempt %d; the key must be the same on every attempt", i, a.key, a.attempt)
		}
	}
	// The next tick has a new key.
	tick(t, e)
	if seen := rc.all(); seen[len(seen)-1].key != "2-remote" {
		t.Errorf("tick 2 key %q", seen[len(seen)-1].key)
	}
}

func TestHTTPNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		kind   string
	}{
		{"400", http.StatusBadRequest, `{"detail": "bad"}`, "downstream"},
		{"contract error", http.StatusOK, `{"error": {"kind": "contract", "message": "misconfigured"}}`, "contract"},
		{"malformed", http.StatusOK, `{"value": `, "downstream"},
		{"oversized", http.StatusOK, `{"value": "` + strings.Repeat("x", 2000) + `"}`, "downstream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
				n.Add(1)
				reply(tc.status, tc.body)(w, req)
			})
			mod := r.module(t, "/", func(s *modules.HTTPSettings) { s.MaxBody = 1024 })
			e := newEngine(t, 200*time.Millisecond, cycle.Registration{Spec: tiers.ModuleSpec{Name: "remote", Tier: "knowledge"}, Module: mod})
			m := line(t, tick(t, e), "remote")
			if m.Status != faultsummary.StatusFailed || m.Attempts != 1 || m.FaultKind != tc.kind || n.Load() != 1 {
				t.Fatalf("remote: %+v after %d requests, want failed %s after 1", m, n.Load(), tc.kind)
			}
		})
	}
}

// TestHTTPHangCutAtDeadline: a remote that never answers is cut at the tier deadline;
// the tier ends within its budget (+5 ms) and the remote sees its request cancelled.
//
// The engine's own wake-up at the deadline can be late on a loaded machine (the race
// detector, other tests on two cores); that is not the module holding the tier. So a
// round of three ticks is measured up to five times, and one round entirely within
// budget + 5 ms passes. Every tick must cut and cancel the request whatever its timing.
func TestHTTPHangCutAtDeadline(t *testing.T) {
	cancelled := make(chan struct{}, 16)
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		<-req.Context().Done()
		cancelled <- struct{}{}
	})
	const budget = 60 * time.Millisecond
	limit := float64(budget/time.Millisecond) + 5
	e := newEngine(t, budget, cycle.Registration{Spec: tiers.ModuleSpec{Name: "remote", Tier: "knowledge"}, Module: r.module(t, "/")})
	for round := 1; ; round++ {
		if err := e.ResetBreaker("remote"); err != nil { // fifteen failures would open it
			t.Fatal(err)
		}
		var worst float64
		for range 3 {
			s := tick(t, e)
			m := line(t, s, "remote")
			// failed (the request returned at the deadline) or timed_out (the engine did
			// not wait for it to return): either way a transient failure at the deadline.
			if (m.Status != faultsummary.StatusFailed && m.Status != faultsummary.StatusTimedOut) || m.FaultKind != "transient" {
				t.Fatalf("remote: %+v", m)
			}
			ti := s.Tiers[1]
			worst = max(worst, ti.ElapsedMs)
			if !ti.BudgetExhausted {
				t.Errorf("tier %+v: budget not reported exhausted", ti)
			}
			select {
			case <-cancelled:
			case <-time.After(2 * time.Second):
				t.Fatal("the remote never saw its request cancelled")
			}
			// Under load the cancelled request may return just after the deadline
			// (timed_out): let it return before the next tick, which would find it busy.
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
				if m, _ := e.Module("remote"); !m.Busy {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the module never returned from its cancelled request")
				}
			}
		}
		t.Logf("round %d: slowest tier %.2f ms (budget %v)", round, worst, budget)
		if worst <= limit {
			return
		}
		if round == 5 {
			t.Fatalf("tier took up to %.2f ms in every round, budget %v + 5 ms", worst, budget)
		}
	}
}

// TestHTTPReplayOnlyIfIdempotent: when a reused keep-alive connection breaks after a
// request was written, the remote may have acted on it. Only a module that may be
// retried (WithReplay, from idempotent: true) lets the transport send it again; otherwise
// the attempt fails as transient after one request, and the summary's one attempt is one
// request.
func TestHTTPReplayOnlyIfIdempotent(t *testing.T) {
	for _, replay := range []bool{false, true} {
		t.Run(fmt.Sprintf("replay=%v", replay), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var mu sync.Mutex
			seen := map[string]int{}
			var conns sync.WaitGroup
			defer conns.Wait()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					conns.Go(func() {
						defer c.Close()
						br := bufio.NewReader(c)
						for i := 0; ; i++ {
							req, err := http.ReadRequest(br)
							if err != nil {
								return
							}
							_, _ = io.Copy(io.Discard, req.Body)
							mu.Lock()
							seen[req.Header.Get("Idempotency-Key")]++
							mu.Unlock()
							if i == 1 { // the second request on a connection: read, then the remote dies
								return
							}
							_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"value\": 1}")
						}
					})
				}
			}()
			client := modules.NewClient()
			defer client.CloseIdleConnections()
			m, err := modules.NewHTTP(modules.HTTPSettings{URL: "http://" + ln.Addr().String() + "/"}, modules.WithClient(client), modules.WithReplay(replay))
			if err != nil {
				t.Fatal(err)
			}
			e, err := cycle.New(cycle.Config{Tiers: engineTiers(200 * time.Millisecond)}, []cycle.Registration{
				{Spec: tiers.ModuleSpec{Name: "actuate", Tier: "knowledge", MaxAttempts: 1}, Module: m}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			tick(t, e)
			got := line(t, tick(t, e), "actuate")
			mu.Lock()
			n := seen["2-actuate"]
			mu.Unlock()
			switch {
			case replay && (n != 2 || got.Status != faultsummary.StatusOK):
				t.Fatalf("with replay: tick 2 POSTed %d times, status %q; want 2, ok", n, got.Status)
			case !replay && (n != 1 || got.Status != faultsummary.StatusFailed || got.FaultKind != "transient" || got.Attempts != 1):
				t.Fatalf("without replay: tick 2 POSTed %d times, %q %q after %d attempts; want once, failed transient after 1", n, got.Status, got.FaultKind, got.Attempts)
			}
			ln.Close()
		})
	}
}

// TestHTTPSlowErrorBodyLeavesTimeToRetry: a 503 decides the attempt (transient) by its
// status; a remote that then sends its body slowly, or never ends it, does not hold the
// attempt until the tier deadline, and the retry budget still has time to retry.
func TestHTTPSlowErrorBodyLeavesTimeToRetry(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "overloaded, ")
			w.(http.Flusher).Flush()
			select { // the rest of the body never comes
			case <-req.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"value": 1}`)
	})
	defer close(release)
	e := newEngine(t, 400*time.Millisecond, cycle.Registration{Spec: tiers.ModuleSpec{Name: "remote", Tier: "knowledge"}, Module: r.module(t, "/")})
	m := line(t, tick(t, e), "remote")
	if m.Status != faultsummary.StatusRetried || m.Attempts != 2 || m.LatencyMs >= 300 {
		t.Fatalf("remote: %s after %d attempts in %.1f ms; want retried after 2, well within the 400 ms budget", m.Status, m.Attempts, m.LatencyMs)
	}
}
