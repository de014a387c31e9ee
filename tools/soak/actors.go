package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// soak holds what the actors share.
type soak struct {
	c      *client
	feed   *feed
	ops    *opLog
	book   *book
	remote *remote
	mods   []module
	set    settings
	cfg    string // the configuration file
	seed   uint64

	mu       sync.Mutex
	counts   map[string]int
	failures []string
	httpKind bool // remote modules are registered as kind http (false: builtin fallback)
	kindNote string

	secret      string   // in the URL query and Authorization header of every remote module
	hostile     *hostile // nil: the hostile actors do not run (see hostileNote)
	hostileNote string
	tokenless   *daemon  // a second daemon without a token, target of rebinder
	rebind      *hostile // the hostile client of tokenless

	knownIssues map[string]string // key → last message
}

func (s *soak) count(k string, n int) {
	s.mu.Lock()
	s.counts[k] += n
	s.mu.Unlock()
}

func (s *soak) get(k string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[k]
}

// known records a failure that is a known, reported issue: it fails the soak unless its
// key is allowed (-allow), and is listed either way.
func (s *soak) known(key, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.knownIssues == nil {
		s.knownIssues = map[string]string{}
	}
	s.knownIssues[key] = msg
	s.counts["known."+key]++
}

func (s *soak) fail(format string, args ...any) {
	s.mu.Lock()
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *soak) rng(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(s.seed, stream)) }

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// expect sends an admin or read request and records a failure unless the status is one of
// want. ctx ending is not a failure.
func (s *soak) expect(ctx context.Context, method, path string, body []byte, admin bool, want ...int) (response, bool) {
	r, err := s.c.do(ctx, method, path, body, admin)
	if ctx.Err() != nil {
		return r, false
	}
	if err != nil {
		s.fail("%s %s: %v", method, path, err)
		return r, false
	}
	for _, w := range want {
		if r.status == w {
			return r, true
		}
	}
	s.fail("%s %s: status %d, want %v: %s", method, path, r.status, want, bytes.TrimSpace(r.body))
	return r, false
}

// faults changes the faults of builtin modules at random, and makes the safety module
// s_flaky fail (or hang) for a while every few seconds.
func (s *soak) faults(ctx context.Context) {
	r := s.rng(1)
	var names []string
	for _, m := range s.mods {
		if m.injectable {
			names = append(names, m.name)
		}
	}
	active := map[string]time.Time{}
	episodeAt := time.Now().Add(between(r, 2*time.Second, 4*time.Second))
	var episodeEnd time.Time
	post := func(name, body string) bool {
		_, ok := s.expect(ctx, http.MethodPost, "/modules/"+name+"/faults", []byte(body), true, http.StatusOK)
		return ok
	}
	for sleep(ctx, between(r, 50*time.Millisecond, 200*time.Millisecond)) {
		now := time.Now()
		for name, until := range active {
			if now.After(until) && post(name, `{"reset": true}`) {
				delete(active, name)
				s.count("fault.reset", 1)
			}
		}
		if len(active) < 8 {
			name := names[r.IntN(len(names))]
			if _, busy := active[name]; !busy {
				kind, body := pickFault(r)
				if post(name, body) {
					active[name] = now.Add(between(r, 300*time.Millisecond, 4*time.Second))
					s.count("fault."+kind, 1)
				}
			}
		}
		switch {
		case episodeEnd.IsZero() && now.After(episodeAt):
			body, kind := `{"fail_rate": 1, "fail_kind": "transient"}`, "fail"
			if r.IntN(3) == 0 {
				body, kind = `{"hang": "20ms"}`, "hang"
			}
			if post(safetyFlaky, body) {
				episodeEnd = now.Add(between(r, 200*time.Millisecond, 1500*time.Millisecond))
				s.count("safety."+kind, 1)
			}
		case !episodeEnd.IsZero() && now.After(episodeEnd):
			if post(safetyFlaky, `{"reset": true}`) {
				episodeEnd = time.Time{}
				episodeAt = now.Add(between(r, 3*time.Second, 8*time.Second))
			}
		}
	}
}

// faultKinds are the kinds of injected fault, in report order.
var faultKinds = []string{"latency", "transient", "permanent", "retry", "hang", "panic", "control"}

// pickFault returns a fault kind and the body of POST /modules/{name}/faults that injects it.
func pickFault(r *rand.Rand) (string, string) {
	switch k := faultKinds[r.IntN(len(faultKinds))]; k {
	case "latency":
		return k, `{"latency": "2ms-6ms"}`
	case "transient":
		return k, fmt.Sprintf(`{"fail_rate": %.2f, "fail_kind": "transient"}`, 0.3+0.7*r.Float64())
	case "permanent":
		kinds := []string{"contract", "validation", "downstream", "internal"}
		return k, fmt.Sprintf(`{"fail_rate": 1, "fail_kind": %q}`, kinds[r.IntN(len(kinds))])
	case "retry":
		return k, `{"fail_attempts": 1}`
	case "hang":
		return k, fmt.Sprintf(`{"hang": "%dms"}`, 50+r.IntN(350))
	case "panic":
		return k, `{"panic": true}`
	default:
		return "control", `{"fail_rate": 1, "fail_kind": "control"}`
	}
}

// poller polls GET /ticks/latest with If-None-Match: poller 0 faster than the period (mostly
// 304), the others slower (mostly 200).
func (s *soak) poller(ctx context.Context, i int) {
	r := s.rng(10 + uint64(i))
	var etag string
	lo, hi := 10*time.Millisecond, 60*time.Millisecond
	if i == 0 {
		lo, hi = time.Millisecond, 6*time.Millisecond
	}
	for sleep(ctx, between(r, lo, hi)) {
		res, err := s.c.do(ctx, http.MethodGet, "/ticks/latest", nil, false, "If-None-Match", etag)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			s.fail("poll /ticks/latest: %v", err)
		case res.status == http.StatusOK:
			etag = res.header.Get("ETag")
			s.count("poll.200", 1)
		case res.status == http.StatusNotModified:
			s.count("poll.304", 1)
		default:
			s.fail("poll /ticks/latest: status %d: %s", res.status, bytes.TrimSpace(res.body))
		}
	}
}

// longPoller waits for each next tick with ?wait=2s&after=ID.
func (s *soak) longPoller(ctx context.Context) {
	var last uint64
	var worst time.Duration
	for ctx.Err() == nil {
		t0 := time.Now()
		res, err := s.c.do(ctx, http.MethodGet, "/ticks/latest?wait=2s&after="+strconv.FormatUint(last, 10), nil, false)
		if ctx.Err() != nil {
			break
		}
		if err != nil || res.status != http.StatusOK {
			s.fail("long-poll after %d: %v %d", last, err, res.status)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		id, _ := etagID(res.header.Get("ETag"))
		if id <= last {
			s.fail("long-poll after %d answered tick %d after %s: ticks stopped?", last, id, time.Since(t0))
		}
		if last > 0 {
			worst = max(worst, time.Since(t0))
		}
		last = id
		s.count("longpoll", 1)
	}
	s.mu.Lock()
	s.counts["longpoll.worst_us"] = int(worst / time.Microsecond)
	s.mu.Unlock()
}

// sseHolder holds a stream for a few seconds at a time, reading it fast or slowly (a slow
// reader makes the daemon drop events for it), then reconnects, half of the time with
// Last-Event-ID.
func (s *soak) sseHolder(ctx context.Context, i int, slow bool) {
	r := s.rng(20 + uint64(i))
	var lastID string
	for ctx.Err() == nil {
		hctx, cancel := context.WithTimeout(ctx, between(r, 2*time.Second, 10*time.Second))
		req, _ := http.NewRequestWithContext(hctx, http.MethodGet, s.c.base+"/ticks/stream", nil)
		if lastID != "" && r.IntN(2) == 0 {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := s.c.long.Do(req)
		if err != nil {
			cancel()
			if ctx.Err() == nil {
				s.fail("SSE connect: %v", err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			s.fail("SSE connect: status %d", resp.StatusCode)
		}
		s.count("sse.connects", 1)
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				break
			}
			switch {
			case bytes.HasPrefix(line, []byte("id: ")):
				lastID = string(bytes.TrimSpace(line[4:]))
				s.count("sse.ticks", 1)
				if slow {
					time.Sleep(30 * time.Millisecond)
				}
			case bytes.HasPrefix(line, []byte(": skipped")):
				s.count("sse.skipped_notices", 1)
			}
		}
		resp.Body.Close()
		cancel()
	}
}

// reader reads the other routes, as dashboards would.
func (s *soak) reader(ctx context.Context) {
	r := s.rng(30)
	paths := []string{"/modules", "/modules/k_00", "/modules/" + safetyFlaky, "/breakers", "/blackboard",
		"/blackboard/k_00.result", "/emergency", "/config", "/readyz", "/ticks?limit=5"}
	for sleep(ctx, between(r, 50*time.Millisecond, 250*time.Millisecond)) {
		p := paths[r.IntN(len(paths))]
		if _, ok := s.expect(ctx, http.MethodGet, p, nil, false, http.StatusOK); ok {
			s.count("reads", 1)
		}
	}
}

// registrar registers remote modules (kind http, served by s.remote) and deregisters them
// a few seconds later. If the daemon does not know the http kind, it registers builtin
// modules instead.
func (s *soak) registrar(ctx context.Context) {
	r := s.rng(40)
	type live struct {
		name  string
		until time.Time
	}
	var active []live
	n := 0
	midTiers := tierNames[1:]
	for sleep(ctx, between(r, 500*time.Millisecond, 1500*time.Millisecond)) {
		now := time.Now()
		for len(active) > 0 && now.After(active[0].until) {
			if _, ok := s.expect(ctx, http.MethodDelete, "/modules/"+active[0].name, nil, true, http.StatusNoContent); ok {
				s.count("remote.deregistered", 1)
			}
			active = active[1:]
		}
		if len(active) >= 4 {
			continue
		}
		n++
		name := fmt.Sprintf("remote_%d", n)
		tier := midTiers[r.IntN(len(midTiers))]
		beh := remoteBehaviours[r.IntN(len(remoteBehaviours))]
		s.remote.set(name, beh)
		s.mu.Lock()
		httpKind := s.httpKind
		s.mu.Unlock()
		body := s.remoteBody(name, tier, httpKind, r)
		s.book.addRuntime(name, body)
		res, err := s.c.do(ctx, http.MethodPost, "/modules", body, true)
		if ctx.Err() != nil {
			return
		}
		if err == nil && httpKind && res.status == http.StatusUnprocessableEntity && bytes.Contains(res.body, []byte(`"field":"kind"`)) {
			// The daemon does not support the http kind (yet): fall back to builtin modules.
			s.mu.Lock()
			s.httpKind = false
			s.kindNote = "the daemon refused kind http (" + firstLine(res.body) + "); remote modules were registered as builtin modules"
			s.mu.Unlock()
			body = s.remoteBody(name, tier, false, r)
			s.book.addRuntime(name, body)
			res, err = s.c.do(ctx, http.MethodPost, "/modules", body, true)
			if ctx.Err() != nil {
				return
			}
		}
		if err != nil || res.status != http.StatusCreated {
			s.fail("POST /modules %s: %v %d %s", name, err, res.status, bytes.TrimSpace(res.body))
			continue
		}
		if httpKind && s.httpKind {
			s.count("remote.registered.http", 1)
		} else {
			s.count("remote.registered.builtin", 1)
		}
		active = append(active, live{name: name, until: now.Add(between(r, 2*time.Second, 6*time.Second))})
	}
}

func (s *soak) remoteBody(name, tier string, httpKind bool, r *rand.Rand) []byte {
	var m map[string]any
	if httpKind {
		m = map[string]any{"name": name, "tier": tier, "kind": "http", "ttl": "300ms",
			"http": map[string]any{"url": s.remote.url(name) + "?" + s.secretQuery(),
				"headers": map[string]any{"Authorization": s.secretHeader()}}}
	} else {
		m = map[string]any{"name": name, "tier": tier, "ttl": "300ms",
			"builtin": map[string]any{"value": map[string]any{"remote": name}, "latency": "20us-300us",
				"fail_rate": float64(r.IntN(4)) / 10}}
	}
	// A third of the remote modules share the remote bulkhead (some failing on a
	// rejection), a third count their retries against the gpu budget.
	switch r.IntN(3) {
	case 0:
		m["bulkhead"] = "remote"
		if r.IntN(2) == 0 {
			m["on_reject"] = "fail"
		}
	case 1:
		m["retry_budget"] = "gpu"
	}

	soakGuards(m, r)
	b, _ := json.Marshal(m)
	return b
}

// soakGuards gives a runtime module a random priority (sometimes critical), and makes
// one in five asynchronous with a short timeout, so that load shedding and
// asynchronous modules run under random faults.
func soakGuards(m map[string]any, r *rand.Rand) {
	switch k := r.IntN(10); {
	case k == 0:
		m["priority"] = "critical"
	case k < 2:
		m["async"], m["timeout"] = true, "30ms"
	default:
		m["priority"] = r.IntN(5) - 2
	}
}

func firstLine(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// reloader rewrites the configuration file and asks for a reload: mostly the other valid
// variant (200), sometimes an invalid file (422, the running configuration stays).
func (s *soak) reloader(ctx context.Context) {
	r := s.rng(50)
	// The first invalid file is not YAML at all, so that even a short run covers it.
	cur, bad := 0, 4
	for sleep(ctx, between(r, 2*time.Second, 5*time.Second)) {
		if r.IntN(10) < 3 {
			kind, y := invalid(bad, variants[cur], s.mods, s.set)
			bad++
			if err := writeAtomic(s.cfg, y); err != nil {
				s.fail("write config: %v", err)
				continue
			}
			res, err := s.c.do(ctx, http.MethodPost, "/config/reload", nil, true)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				s.fail("POST /config/reload (%s): %v", kind, err)
			case res.status == http.StatusUnprocessableEntity:
				// A syntax error has a line, not a field: only the others must list problems.
				if kind != syntaxError && !bytes.Contains(res.body, []byte(`"problems"`)) {
					s.fail("invalid reload (%s): 422 without problems: %s", kind, firstLine(res.body))
				} else {
					s.count("reload.invalid", 1)
				}
			case kind == syntaxError && res.status == http.StatusInternalServerError:
				s.known("reload_syntax", "POST /config/reload of a file that is not YAML answers 500, want 422: "+firstLine(res.body))
			default:
				s.fail("POST /config/reload (%s): status %d, want 422: %s", kind, res.status, firstLine(res.body))
			}
			continue
		}
		cur = 1 - cur
		if err := writeAtomic(s.cfg, render(variants[cur], s.mods, s.set)); err != nil {
			s.fail("write config: %v", err)
			continue
		}
		if _, ok := s.expect(ctx, http.MethodPost, "/config/reload", nil, true, http.StatusOK); ok {
			s.count("reload.valid", 1)
		}
	}
}

// resetter resets breakers (preferably open ones) and, now and then, emergency mode,
// recording each reset for the checker with the ticks that were the latest around it.
func (s *soak) resetter(ctx context.Context) {
	r := s.rng(60)
	n := 0
	for sleep(ctx, between(r, 400*time.Millisecond, 1200*time.Millisecond)) {
		n++
		var target string
		path := "/emergency/reset"
		if n%5 != 0 {
			res, ok := s.expect(ctx, http.MethodGet, "/breakers", nil, false, http.StatusOK)
			if !ok {
				continue
			}
			var bs struct {
				Breakers []struct{ Name, State string } `json:"breakers"`
			}
			if err := json.Unmarshal(res.body, &bs); err != nil || len(bs.Breakers) == 0 {
				s.fail("GET /breakers: %v", err)
				continue
			}
			var open []string
			for _, b := range bs.Breakers {
				if b.State != "closed" {
					open = append(open, b.Name)
				}
			}
			sort.Strings(open)
			if len(open) > 0 && r.IntN(5) != 0 {
				target = open[r.IntN(len(open))]
			} else {
				target = bs.Breakers[r.IntN(len(bs.Breakers))].Name
			}
			path = "/breakers/" + url.PathEscape(target) + "/reset"
		}
		lo, err := s.c.latestID(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.fail("before a reset: %v", err)
			}
			continue
		}
		tok := s.ops.begin(lo)
		// A breaker of a runtime module may be gone by now: 404 is fine.
		_, ok := s.expect(ctx, http.MethodPost, path, nil, true, http.StatusOK, http.StatusNotFound)
		hi, err := s.c.latestID(context.WithoutCancel(ctx))
		if err != nil {
			hi = lo + 1000 // unknown: suspend the rules of that breaker for longer
		}
		s.ops.end(tok, op{breaker: target, lo: lo, hi: hi}, ok || ctx.Err() != nil) // cut short: it may have happened
		if ok {
			if target == "" {
				s.count("reset.emergency", 1)
			} else {
				s.count("reset.breaker", 1)
			}
		}
	}
}

// tokenLeaks reports where the admin token shows: the daemon's logs, GET /config.
func (s *soak) tokenLeaks(ctx context.Context, d *daemon) []string {
	var out []string
	if strings.Contains(d.logText(), s.set.token) {
		out = append(out, "the admin token appears in the daemon's log")
	}
	res, err := s.c.do(ctx, http.MethodGet, "/config", nil, false)
	if err == nil && bytes.Contains(res.body, []byte(s.set.token)) {
		out = append(out, "GET /config shows the admin token")
	}
	if b, err := os.ReadFile(s.set.stateDir + "/modules.json"); err == nil && bytes.Contains(b, []byte(s.set.token)) {
		out = append(out, "the state file holds the admin token")
	}
	return out
}
