package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The acceptance scenario of the daemon, black box: the real binary in step mode with
// builtin modules, driven by POST /ticks, asserting the JSON it serves.

const acceptanceConfig = `
cycle: {period: 0}
emergency: {recover_after: 2}
tiers:
  - {name: safety, budget: 50ms}
  - {name: knowledge, budget: 100ms, max_attempts: 2, backoff: {base: 1ms, jitter: 0},
     breaker: {failure_threshold: 3, cooldown: 1h, half_open_successes: 1}}
  - {name: planning, budget: 50ms}
modules:
  - {name: guard, tier: safety, builtin: {value: clear}}
  - {name: recall, tier: knowledge, builtin: {value: 1, fail_attempts: 1}}
  - {name: flaky, tier: knowledge, ttl: 300ms, builtin: {value: 7, fail_ticks: [[2, 1000]], fail_kind: validation}}
  - {name: plan, tier: planning, reads: [flaky.result], builtin: {value: go}}
http: {addr: 127.0.0.1:0, admin_token: s3cret}
`

type fullSummary struct {
	TickID          uint64         `json:"tick_id"`
	Finish          string         `json:"finish"`
	EmergencyMode   bool           `json:"emergency_mode"`
	OverallSeverity string         `json:"overall_severity"`
	RetryCounts     map[string]int `json:"retry_counts"`
	OpenCircuits    []string       `json:"open_circuits"`
	DegradedKeys    []string       `json:"degraded_keys"`
	Tiers           []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"tiers"`
	Modules []struct {
		Name         string `json:"name"`
		Status       string `json:"status"`
		Attempts     int    `json:"attempts"`
		FaultKind    string `json:"fault_kind"`
		CircuitState string `json:"circuit_state"`
		Served       struct {
			Source  string  `json:"source"`
			Stale   bool    `json:"stale"`
			Expired bool    `json:"expired"`
			AgeMs   float64 `json:"age_ms"`
		} `json:"served"`
	} `json:"modules"`
}

func (s fullSummary) mod(t *testing.T, name string) (status, circuit, source string, stale, expired bool, age float64) {
	t.Helper()
	for _, m := range s.Modules {
		if m.Name == name {
			return m.Status, m.CircuitState, m.Served.Source, m.Served.Stale, m.Served.Expired, m.Served.AgeMs
		}
	}
	t.Fatalf("tick %d: no module %q", s.TickID, name)
	return
}

func (s fullSummary) tier(name string) string {
	for _, x := range s.Tiers {
		if x.Name == name {
			return x.Status
		}
	}
	return ""
}

// admin sends an authorised request.
func (d *daemon) admin(method, path, body string, out any) int {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	return decodeInto(d.t, resp, out)
}

func (d *daemon) tick() fullSummary {
	d.t.Helper()
	var s fullSummary
	if st := d.admin("POST", "/ticks", "", &s); st != http.StatusOK {
		d.t.Fatalf("POST /ticks = %d", st)
	}
	return s
}

func TestDaemonAcceptance(t *testing.T) {
	cfgPath := write(t, "cycled.yaml", acceptanceConfig+"state_dir: "+t.TempDir()+"\n")
	d := start(t, nil, "--config", cfgPath)

	// Admin without a token → 401 JSON; a bad body → 400 JSON.
	var errBody struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if st := d.do("POST", "/ticks", "", &errBody); st != http.StatusUnauthorized || errBody.Error.Code == "" {
		t.Fatalf("POST /ticks without a token = %d %+v", st, errBody)
	}
	if st := d.admin("POST", "/modules", `{"name": `, &errBody); st != http.StatusBadRequest || errBody.Error.Code == "" {
		t.Fatalf("POST /modules with a malformed body = %d %+v", st, errBody)
	}

	// SSE: one tick event per tick.
	stream, err := http.Get(d.base + "/ticks/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	events := make(chan uint64, 1<<16)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "tick":
				i := strings.Index(line, `"tick_id":`)
				if i < 0 {
					continue
				}
				rest := line[i+len(`"tick_id":`):]
				n, _ := strconv.ParseUint(rest[:strings.IndexAny(rest, ",}")], 10, 64)
				events <- n
			}
		}
		close(events)
	}()

	// Tick 1: recall fails its first attempt and is retried.
	s := d.tick()
	if st, _, _, _, _, _ := s.mod(t, "recall"); st != "retried" || s.RetryCounts["recall"] != 1 {
		t.Fatalf("tick 1: recall %q, retry_counts %v", st, s.RetryCounts)
	}
	// Ticks 2-4: flaky fails; its breaker opens on the third failed tick (the threshold).
	for id := uint64(2); id <= 4; id++ {
		s = d.tick()
		st, circuit, src, stale, _, _ := s.mod(t, "flaky")
		wantCircuit := "closed"
		if id == 4 {
			wantCircuit = "open"
		}
		if st != "failed" || circuit != wantCircuit || src != "last_good" || !stale {
			t.Fatalf("tick %d: flaky %q circuit %q served %q stale %v", id, st, circuit, src, stale)
		}
	}
	if !slices.Contains(s.OpenCircuits, "flaky") {
		t.Fatalf("tick 4: open_circuits %v", s.OpenCircuits)
	}
	// Tick 5: open, not run, last good still served stale with its age.
	s = d.tick()
	if st, _, src, stale, _, age := s.mod(t, "flaky"); st != "open" || src != "last_good" || !stale || age <= 0 {
		t.Fatalf("tick 5: flaky %q served %q stale %v age %v", st, src, stale, age)
	}
	// Once the 300ms TTL has passed, nothing is served and the summary says expired. The
	// daemon runs on the wall clock, so the test keeps ticking until its TTL has run out.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s = d.tick()
		if _, _, src, _, expired, _ := s.mod(t, "flaky"); expired && src == "none" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flaky's last good value never expired")
		}
	}
	if !slices.Contains(s.DegradedKeys, "flaky.result (expired)") {
		t.Fatalf("degraded_keys %v", s.DegradedKeys)
	}

	// A safety failure enters emergency mode on that tick; the other tiers are skipped.
	if st := d.admin("POST", "/modules/guard/faults", `{"fail_rate": 1}`, nil); st != http.StatusOK {
		t.Fatalf("fault injection = %d", st)
	}
	s = d.tick()
	if !s.EmergencyMode || s.OverallSeverity != "critical" || s.tier("knowledge") != "skipped" || s.tier("planning") != "skipped" {
		t.Fatalf("safety failure: emergency %v severity %q tiers %+v", s.EmergencyMode, s.OverallSeverity, s.Tiers)
	}
	if st, _, _, _, _, _ := s.mod(t, "plan"); st != "skipped" {
		t.Fatalf("plan ran in emergency: %q", st)
	}
	// Recovery after recover_after (2) healthy ticks.
	if st := d.admin("POST", "/modules/guard/faults", `{"reset": true}`, nil); st != http.StatusOK {
		t.Fatalf("fault reset = %d", st)
	}
	if s = d.tick(); !s.EmergencyMode {
		t.Fatal("left emergency after one healthy tick")
	}
	if s = d.tick(); s.EmergencyMode || s.tier("planning") == "skipped" {
		t.Fatalf("no recovery after two healthy ticks: %+v", s.Tiers)
	}
	total := s.TickID

	// The SSE stream delivered every tick, in order.
	for want := uint64(1); want <= total; want++ {
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("SSE tick %d, want %d", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("SSE: no event for tick %d", want)
		}
	}

	// ETag / 304.
	resp, err := http.Get(d.base + "/ticks/latest")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	req, _ := http.NewRequest("GET", d.base+"/ticks/latest", nil)
	req.Header.Set("If-None-Match", etag)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotModified || etag == "" {
		t.Fatalf("If-None-Match %q: %v %v", etag, resp.StatusCode, err)
	}
	resp.Body.Close()

	// /metrics carries the fixed families with the values of these ticks.
	metrics := d.metrics()
	for _, want := range []string{
		`cycled_ticks_total{finish="completed"} ` + strconv.FormatUint(total, 10),
		`cycled_breaker_state{breaker="flaky"} 1`,
		`cycled_breaker_state{breaker="guard"} 0`,
		`cycled_emergency_active 0`,
		`cycled_module_runs_total{module="recall",status="retried",tier="knowledge"} ` + strconv.FormatUint(total-2, 10), // every tick but the two in emergency mode
		`cycled_module_runs_total{module="flaky",status="failed",tier="knowledge"} 3`,
		`cycled_tick_duration_seconds_count ` + strconv.FormatUint(total, 10),
		`cycled_tick_start_lag_seconds_count ` + strconv.FormatUint(total, 10),
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// An invalid reload is rejected whole (422); the running configuration stays.
	if err := os.WriteFile(cfgPath, []byte("tiers:\n  - {name: safety, budget: -1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := d.admin("POST", "/config/reload", "", nil); st != http.StatusUnprocessableEntity {
		t.Fatalf("invalid reload = %d", st)
	}
	if s = d.tick(); len(s.Modules) != 4 || s.tier("planning") != "ok" && s.tier("planning") != "degraded" {
		t.Fatalf("after a rejected reload: %d modules, tiers %+v", len(s.Modules), s.Tiers)
	}

	if code, took := d.stop(); code != 0 || took > 2*time.Second {
		t.Fatalf("SIGTERM: exit %d after %v", code, took)
	}
}

func (d *daemon) metrics() string {
	d.t.Helper()
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

// decodeInto reads resp's JSON body into out (if not nil) and returns the status.
func decodeInto(t *testing.T, resp *http.Response, out any) int {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
	}
	return resp.StatusCode
}
