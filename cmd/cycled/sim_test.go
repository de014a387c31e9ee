package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// agreementConfig has builtin modules whose behaviour is deterministic: fixed latencies
// well inside their budgets, failures in tick windows and on first attempts, a breaker
// that opens and stays open (a cooldown longer than the test), a stale key that never
// expires, a multi-rate module, and an emergency entered and left.
const agreementConfig = `
cycle: {period: 0}
tiers:  # budgets no load on the test machine can exhaust: a real-time hiccup is not a rule
  - {name: safety, budget: 10s}
  - {name: knowledge, budget: 10s, max_attempts: 3}
  - {name: perception, budget: 10s}
  - {name: planning, budget: 10s}
emergency: {recover_after: 2}
breakers:
  store: {failure_threshold: 2, cooldown: 1h, trip_on: [transient]}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}, latency: 1ms, fail_ticks: [[6, 6]]}
  - name: recall
    tier: knowledge
    ttl: 1h
    breaker: store
    builtin: {value: 1, latency: 2ms, fail_attempts: 1, fail_ticks: [[12, 30]]}
  - name: mapper
    tier: knowledge
    builtin: {value: {rooms: 3}, latency: 3ms, fail_ticks: [[3, 4]], fail_kind: downstream}
  - name: lidar
    tier: perception
    every: 2
    builtin: {value: {points: 10}, latency: 1ms}
  - name: planner
    tier: planning
    reads: [recall.result, mapper.result]
    builtin: {value: go, latency: 2ms}
http: {addr: 127.0.0.1:0}
`

// wallFields are the fields that measure wall-clock time (or name the process): the only
// ones in which the simulation and the daemon may differ.
var wallFields = map[string]bool{"scheduled_at": true, "started_at": true, "finished_at": true, "start_lag_ms": true,
	"wall_ms": true, "elapsed_ms": true, "latency_ms": true, "age_ms": true, "run_id": true, "written": true}

// The simulated engine agrees with the real one: the summaries of cycled sim equal those
// of the daemon in step mode, field by field, except wall-clock times.
func TestSimAgreesWithDaemon(t *testing.T) {
	const ticks = 40
	cfgPath := write(t, "agree.yaml", agreementConfig+"state_dir: "+t.TempDir()+"\n")
	out, err := exec.Command(binary(t), "sim", "--config", cfgPath, "--ticks", fmt.Sprint(ticks), "--out", "-").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("cycled sim: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("cycled sim: %v", err)
	}
	var simulated []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		simulated = append(simulated, m)
	}
	if len(simulated) != ticks {
		t.Fatalf("cycled sim gave %d summaries; want %d", len(simulated), ticks)
	}
	d := start(t, nil, "--config", cfgPath)
	for i := range ticks {
		var real map[string]any
		if st := d.do("POST", "/ticks", "", &real); st != http.StatusOK {
			t.Fatalf("POST /ticks = %d", st)
		}
		if diff := diffJSON("", strip(real), strip(simulated[i])); diff != "" {
			t.Fatalf("tick %d: the simulation and the daemon differ: %s", i+1, diff)
		}
	}
	if !strings.Contains(string(out), `"open_circuits":["store"]`) || !strings.Contains(string(out), `"emergency_mode":true`) {
		t.Fatal("the scenario never opened the breaker or entered emergency mode: the comparison proved less than it should")
	}
}

// strip removes the wall-clock fields from a decoded summary, at any depth.
func strip(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if !wallFields[k] {
				out[k] = strip(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = strip(e)
		}
		return out
	}
	return v
}

// diffJSON names the first field in which a and b differ ("" when equal).
func diffJSON(path string, a, b any) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if d := diffJSON(path+"."+k, am[k], bm[k]); d != "" {
				return d
			}
		}
		return ""
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			if d := diffJSON(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("%s: daemon %v, simulation %v", path, a, b)
	}
	return ""
}

// Flag and scenario mistakes are reported with the flag or the path at fault.
func TestSimCommandErrors(t *testing.T) {
	clearEnv(t)
	bad := write(t, "bad.yaml", "events:\n  - tick: 3\n    module: camra\n    fail_rate: 1\n")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sim", "--ticks", "-3"}, exitUsage, "--ticks: must be > 0"},
		{[]string{"sim", "--ticks", "3", "--for", "1s"}, exitUsage, "--ticks and --for: give one of them"},
		{[]string{"sim", "--for", "soon"}, exitUsage, "--for"},
		{[]string{"sim", "--start", "yesterday"}, exitUsage, "--start"},
		{[]string{"sim", "--config", "/no/such/file.yaml"}, exitError, "--config"},
		{[]string{"sim", "--scenario", bad}, exitError, `events[0].module: unknown module "camra" (did you mean "camera"?)`},
		{[]string{"advise"}, exitUsage, "give exactly one of --sim, --from STATE_DIR, --metrics URL"},
		{[]string{"advise", "--sim", "--max-exhaustion", "2"}, exitUsage, "--max-exhaustion: must be in (0, 1)"},
		{[]string{"advise", "--from", t.TempDir()}, exitError, "--from"},
	}
	for _, c := range cases {
		code, _, stderr := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("cycled %s = %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
		}
	}
}

// cycled sim --out DIR writes the summaries and the report; --record makes a database
// that cycled replay reads and that cycled advise --from advises on.
func TestSimOutRecordAdvise(t *testing.T) {
	clearEnv(t)
	out, state := t.TempDir(), t.TempDir()
	code, stdout, stderr := runCmd(t, "sim", "--ticks", "300", "--out", out, "--record", state)
	if code != exitOK || !strings.Contains(stdout, "Simulation (no scenario): 300 ticks") {
		t.Fatalf("cycled sim = %d\n%s\n%s", code, stdout, stderr)
	}
	for _, name := range []string{"summaries.jsonl", "report.txt", "report.json"} {
		if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || len(b) == 0 {
			t.Fatalf("%s: %v (%d bytes)", name, err, len(b))
		}
	}
	code, stdout, stderr = runCmd(t, "replay", "--state", state, "--from", "30", "--to", "35")
	if code != exitOK || !strings.Contains(stdout, "memory_recall") || !strings.Contains(stdout, "2000-01-01T00:00:0") {
		t.Fatalf("cycled replay of the simulated run = %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, "advise", "--from", state, "--json")
	var a struct {
		Proposals []any `json:"proposals"`
		Met       bool  `json:"objective_met"`
	}
	// Nothing is proposed; the replayed run does not meet the objective, which exits 3.
	if json.Unmarshal([]byte(stdout), &a) != nil || code != map[bool]int{true: exitOK, false: exitUnmet}[a.Met] || len(a.Proposals) != 0 {
		t.Fatalf("cycled advise --from a run of the demo = %d, %+v\n%s", code, a, stderr)
	}
}

// cycled advise --metrics URL reads the ticks a running daemon keeps: a daemon whose
// perception tier (2 ms) is too small for its 3 ms module exhausts it every tick, and the
// advice, from that daemon's ticks, is a perception budget that fits the module, checked by
// re-simulation. The URL may be the daemon's address or its /metrics URL.
func TestAdviseFromRunningDaemon(t *testing.T) {
	clearEnv(t)
	cfg := write(t, "small.yaml", `
cycle: {period: 10ms, history: 300}
tiers:
  - {name: safety, budget: 5ms}
  - {name: perception, budget: 2ms, max_attempts: 1}
modules:
  - {name: guard, tier: safety, builtin: {value: ok, latency: 100us}}
  - {name: lidar, tier: perception, builtin: {value: 1, latency: 3ms}}
http: {addr: 127.0.0.1:0}
`)
	d := start(t, nil, "--config", cfg)
	untilTick(t, d, 150)
	for _, url := range []string{d.base, d.base + "/metrics"} {
		code, stdout, stderr := runCmd(t, "advise", "--metrics", url, "--config", cfg, "--json")
		var a struct {
			Proposals []struct {
				Path string `json:"path"`
				To   string `json:"to"`
			} `json:"proposals"`
			Met bool `json:"objective_met"`
		}
		if code != exitOK || json.Unmarshal([]byte(stdout), &a) != nil {
			t.Fatalf("cycled advise --metrics %s = %d\n%s\n%s", url, code, stdout, stderr)
		}
		var budget time.Duration
		for _, p := range a.Proposals {
			if p.Path == "tiers[1].budget" { // perception
				budget, _ = time.ParseDuration(p.To)
			}
		}
		if budget < 3*time.Millisecond || !a.Met {
			t.Fatalf("cycled advise --metrics %s: proposals %+v, objective met %v; want a perception budget of at least 3ms that meets it", url, a.Proposals, a.Met)
		}
	}
	code, _, stderr := runCmd(t, "advise", "--metrics", "127.0.0.1:1", "--config", cfg)
	if code != exitError || !strings.Contains(stderr, "is not a daemon's http(s) address") {
		t.Fatalf("advise --metrics without a scheme = %d, %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "advise", "--metrics", d.base+"/nothing-here", "--config", cfg)
	if code != exitError || !strings.Contains(stderr, "--metrics: advise: GET") || !strings.Contains(stderr, "404") {
		t.Fatalf("advise --metrics at a wrong path = %d, %q", code, stderr)
	}
}

// An objective that no change can meet is not advised: a 15 ms module in a 10 ms period
// either exhausts its tier's budget or makes the ticks overrun. advise says so, proposes
// nothing, prints no patch and exits 3; the best found shows only with --show-best, under
// its own heading, and the exit code stays 3.
func TestAdviseObjectiveNotMet(t *testing.T) {
	clearEnv(t)
	cfg := write(t, "unreachable.yaml", `
cycle: {period: 10ms}
tiers:
  - {name: safety, budget: 5ms}
  - {name: perception, budget: 2ms, max_attempts: 1}
modules:
  - {name: guard, tier: safety, builtin: {value: ok, latency: 100us}}
  - {name: lidar, tier: perception, builtin: {value: 1, latency: 15ms}}
`)
	args := []string{"advise", "--sim", "--config", cfg, "--ticks", "300"}
	code, stdout, stderr := runCmd(t, args...)
	if code != exitUnmet || !strings.Contains(stdout, "Objective NOT met") || strings.Contains(stdout, "Patch") ||
		strings.Contains(stdout, "budget: ") || strings.Contains(stdout, "->") || strings.Contains(stdout, "warning") || !strings.Contains(stderr, "objective not met") {
		t.Fatalf("cycled advise on an unreachable objective = %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCmd(t, append(args, "--json")...)
	var a struct {
		Proposals []any  `json:"proposals"`
		Patch     string `json:"patch"`
		Met       bool   `json:"objective_met"`
		BestFound any    `json:"best_found"`
	}
	if code != exitUnmet || json.Unmarshal([]byte(stdout), &a) != nil || a.Met || len(a.Proposals) != 0 || a.Patch != "" || a.BestFound != nil {
		t.Fatalf("cycled advise --json on an unreachable objective = %d %+v\n%s", code, a, stdout)
	}
	code, stdout, _ = runCmd(t, append(args, "--show-best")...)
	best, _, found := strings.Cut(stdout, "Best found, NOT advice")
	if code != exitUnmet || !found || strings.Contains(best, "->") || !strings.Contains(stdout, "Its patch:") {
		t.Fatalf("cycled advise --show-best on an unreachable objective = %d\n%s", code, stdout)
	}
}
