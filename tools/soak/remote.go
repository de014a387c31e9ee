package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// remote is the HTTP server behind the remote modules (kind http) that the soak registers
// at runtime. Each module has a behaviour, chosen at registration.
type remote struct {
	srv *httptest.Server

	mu        sync.Mutex
	behaviour map[string]string
	rng       *rand.Rand

	requests atomic.Int64

	auth, query   string       // what every request must carry (setAuth)
	attackerCalls atomic.Int64 // requests to /attacker: a hostile registration was admitted
	badAuth       atomic.Int64 // module requests without auth and query
}

// setAuth sets the Authorization header and the query every module request must carry.
func (r *remote) setAuth(auth, query string) {
	r.mu.Lock()
	r.auth, r.query = auth, query
	r.mu.Unlock()
}

// remoteBehaviours are the behaviours of remote modules.
var remoteBehaviours = []string{"ok", "flaky", "error", "slow", "garbage"}

func newRemote(seed uint64) *remote {
	r := &remote{behaviour: map[string]string{}, rng: rand.New(rand.NewPCG(seed, 7))}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve)) // loopback
	return r
}

func (r *remote) set(name, behaviour string) {
	r.mu.Lock()
	r.behaviour[name] = behaviour
	r.mu.Unlock()
}

func (r *remote) url(name string) string { return r.srv.URL + "/m/" + name }

func (r *remote) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	var in struct {
		TickID uint64 `json:"tick_id"`
		Module string `json:"module"`
	}
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	_ = json.Unmarshal(body, &in)
	if req.URL.Path == "/attacker" {
		r.attackerCalls.Add(1)
	}
	name := strings.TrimPrefix(req.URL.Path, "/m/")
	r.mu.Lock()
	b := r.behaviour[name]
	u := r.rng.Float64()
	if r.auth != "" && (req.Header.Get("Authorization") != r.auth || req.URL.RawQuery != r.query) {
		r.badAuth.Add(1)
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case b == "flaky" && u < 0.2:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error": "overloaded"}`))
		return
	case b == "error" && u < 0.3:
		_, _ = w.Write([]byte(`{"error": {"kind": "downstream", "message": "remote says no"}}`))
		return
	case b == "slow" && u < 0.3:
		select {
		case <-time.After(5 * time.Millisecond): // past every tier budget
		case <-req.Context().Done():
			return
		}
	case b == "garbage" && u < 0.1:
		_, _ = w.Write([]byte(`not json`))
		return
	}
	out, _ := json.Marshal(map[string]any{"value": map[string]any{"remote": name, "tick": in.TickID}})
	_, _ = w.Write(out)
}

func (r *remote) close() { r.srv.Close() }
