package main

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// Load shedding, startup and asynchronous modules against the real binary in step mode:
// startup holds the later tiers back and /readyz not ready until the safety module has
// succeeded once; ticks
// longer than shedding.target shed the lowest priority class (a critical module never),
// restored after restore_after ticks that fit; an asynchronous module's value reaches the
// blackboard at a tick boundary, tagged with its origin tick.
const guardsConfig = `
cycle: {period: 0}
startup: {timeout: 1h}
shedding: {after_overruns: 2, restore_after: 2, target: 60ms}
tiers:
  - {name: safety, budget: 50ms}
  - {name: knowledge, budget: 500ms}
modules:
  - {name: guard, tier: safety, builtin: {value: clear, fail_ticks: [[1, 1]]}}
  - {name: slow, tier: knowledge, priority: -1, builtin: {value: 1, latency: 150ms}}
  - {name: keep, tier: knowledge, priority: critical, builtin: {value: 2}}
  - {name: bg, tier: knowledge, async: true, timeout: 2s, builtin: {value: 9}}
http: {addr: 127.0.0.1:0, admin_token: s3cret}
`

type guardSummary struct {
	fullSummary
	CycleState string `json:"cycle_state"`
	Startup    *struct {
		Pending []string `json:"pending"`
	} `json:"startup"`
	Shed *struct {
		Level   int      `json:"level"`
		Modules []string `json:"modules"`
		Reason  string   `json:"reason"`
	} `json:"shed"`
	Async []asyncRun `json:"async"`
}

type asyncRun struct {
	Name       string `json:"name"`
	OriginTick uint64 `json:"origin_tick"`
	Status     string `json:"status"`
}

func (d *daemon) guardTick() guardSummary {
	d.t.Helper()
	var s guardSummary
	if st := d.admin("POST", "/ticks", "", &s); st != http.StatusOK {
		d.t.Fatalf("POST /ticks = %d", st)
	}
	return s
}

func TestDaemonStartupSheddingAsync(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", guardsConfig))
	var h struct {
		Status string                `json:"status"`
		Error  struct{ Code string } `json:"error"`
	}
	if st := d.do("GET", "/readyz", "", &h); st != http.StatusServiceUnavailable || h.Error.Code != "starting" {
		t.Fatalf("/readyz before any tick = %d %+v, want 503 starting", st, h)
	}
	s := d.guardTick() // guard fails: starting, no emergency, knowledge skipped
	if s.CycleState != "starting" || s.EmergencyMode || s.tier("knowledge") != "skipped" || s.Startup == nil ||
		!slices.Equal(s.Startup.Pending, []string{"guard"}) || len(s.Async) != 0 {
		t.Fatalf("tick 1: %+v", s)
	}
	if st := d.do("GET", "/readyz", "", &h); st != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while starting = %d", st)
	}
	s = d.guardTick() // guard succeeds: startup over, knowledge runs (slow overruns once)
	if s.CycleState != "" || s.EmergencyMode || s.tier("knowledge") != "ok" {
		t.Fatalf("tick 2: state %q emergency %v knowledge %s", s.CycleState, s.EmergencyMode, s.tier("knowledge"))
	}
	if st := d.do("GET", "/readyz", "", &h); st != http.StatusOK || h.Status != "ready" {
		t.Fatalf("/readyz after startup = %d %+v", st, h)
	}
	s = d.guardTick() // the second overrun sheds slow's class from the next tick
	if s.Shed != nil {
		t.Fatalf("tick 3: shed %+v before the step applies", s.Shed)
	}
	s = d.guardTick()
	if st, _, src, stale, _, _ := s.mod(t, "slow"); st != "shed" || src != "last_good" || !stale || s.Shed == nil ||
		!slices.Equal(s.Shed.Modules, []string{"slow"}) || !strings.Contains(s.Shed.Reason, "overruns") {
		t.Fatalf("tick 4: slow %s from %s (stale %v), shed %+v", st, src, stale, s.Shed)
	}
	if st, _, _, _, _, _ := s.mod(t, "keep"); st != "ok" {
		t.Fatalf("tick 4: the critical module is %s", st)
	}
	d.guardTick() // the second tick that fits restores the step
	if st, _, _, _, _, _ := d.guardTick().mod(t, "slow"); st != "ok" {
		t.Fatalf("tick 6: slow is %s, want restored", st)
	}
	// bg started after tick 2 (not while starting); its end shows in a later summary.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s = d.guardTick()
		if i := slices.IndexFunc(s.Async, func(a asyncRun) bool { return a.Name == "bg" }); i >= 0 {
			if a := s.Async[i]; a.Status != "ok" || a.OriginTick < 2 || a.OriginTick >= s.TickID {
				t.Fatalf("tick %d: async %+v", s.TickID, a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no async run of bg reported")
		}
	}
	var ent struct {
		Value  float64 `json:"value"`
		Module string  `json:"module"`
		TickID uint64  `json:"tick_id"`
		Source string  `json:"source"`
	}
	if st := d.do("GET", "/blackboard/bg.result", "", &ent); st != http.StatusOK || ent.Value != 9 || ent.Module != "bg" || ent.TickID >= s.TickID {
		t.Fatalf("GET /blackboard/bg.result = %d %+v", st, ent)
	}
	if st := d.do("GET", "/modules/bg", "", nil); st != http.StatusOK {
		t.Fatalf("GET /modules/bg = %d, want the asynchronous module listed", st)
	}
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	metrics := string(body)
	for _, want := range []string{`cycled_shed_steps_total{direction="shed"}`, `cycled_shed_steps_total{direction="restore"}`,
		`cycled_async_runs_total{module="bg",status="ok"}`, "cycled_starting 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
