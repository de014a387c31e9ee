package main

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// shedRejectConfig sheds slow (a low-priority module longer than shedding.target) and
// rejects shy (its bulkhead is held by hog, which hangs).
const shedRejectConfig = `
cycle: {period: PERIOD}
shedding: {after_overruns: 2, restore_after: 3, target: 60ms}
bulkheads:
  db: {max_in_flight: 1}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}}}
  - {name: slow, tier: knowledge, priority: -1, builtin: {value: 1, latency: 150ms}}
  - {name: hog, tier: knowledge, bulkhead: db, priority: 2, builtin: {value: 1, hang: 400ms}}
  - {name: shy, tier: knowledge, bulkhead: db, priority: 1, builtin: {value: 2}}
http: {addr: 127.0.0.1:0}
recorder: {enabled: true, flush: 100ms, keep_for: 0} # the simulated run is dated 2000-01-01
state_dir: STATE
`

// A simulated run that sheds and rejects, recorded by cycled sim --record, replays with no
// difference under cycled replay --check (the binary's), and the daemon searches its
// database for the shed and rejected lines; the statuses whose lines are not recorded one
// by one are refused.
func TestReplayCheckSimShedReject(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	cfg := strings.NewReplacer("STATE", state, "PERIOD", "100ms").Replace(shedRejectConfig)
	out, err := exec.Command(binary(t), "sim", "--config", write(t, "sim.yaml", cfg), "--ticks", "40",
		"--record", state).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "shed ") || !strings.Contains(string(out), "rejected ") {
		t.Fatalf("cycled sim --record: %v; want shed and rejected lines\n%s", err, out)
	}
	out, err = exec.Command(binary(t), "replay", "--check", "--state", state).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "40 ticks checked, 0 differences") {
		t.Fatalf("cycled replay --check: %v\n%s", err, out)
	}
	d := start(t, nil, "--config", write(t, "step.yaml", strings.Replace(cfg, "period: 100ms", "period: 0", 1)))
	for _, c := range []struct{ query, module string }{
		{"status=shed", "slow"}, {"module=slow&status=shed", "slow"}, {"status=rejected", "shy"},
	} {
		var page struct {
			Ticks []struct {
				Modules []struct{ Name, Status string } `json:"modules"`
			} `json:"ticks"`
		}
		if st := d.do("GET", "/ticks?limit=100&"+c.query, "", &page); st != http.StatusOK || len(page.Ticks) == 0 {
			t.Fatalf("GET /ticks?%s = %d with %d ticks, want 200 and the recorded ticks", c.query, st, len(page.Ticks))
		}
		want := strings.TrimPrefix(c.query[strings.Index(c.query, "status="):], "status=")
		for _, tk := range page.Ticks {
			found := false
			for _, m := range tk.Modules {
				found = found || m.Name == c.module && m.Status == want
			}
			if !found {
				t.Fatalf("GET /ticks?%s answered a tick without %s %s: %+v", c.query, c.module, want, tk.Modules)
			}
		}
	}
	for _, status := range []string{"ok", "not_due", "nonsense"} {
		if st := d.do("GET", "/ticks?status="+status, "", nil); st != http.StatusBadRequest {
			t.Errorf("GET /ticks?status=%s = %d, want 400", status, st)
		}
	}
}
