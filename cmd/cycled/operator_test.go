package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// operatorConfig is a configuration file on a period with a safety module, a knowledge
// module and the admin routes open on loopback; extra is appended as is.
func operatorConfig(period, extra string) string {
	return fmt.Sprintf(`
cycle: {period: %s}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    builtin: {value: 1}
http: {addr: 127.0.0.1:0}
%s`, period, extra)
}

// writeConfig writes cfg to path through a rename, as an editor saving the file does.
func writeConfig(t *testing.T, path, cfg string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// healthState is what the operator tests read of /healthz.
type healthState struct {
	Status     string  `json:"status"`
	LastTickID uint64  `json:"last_tick_id"`
	WatchdogMs float64 `json:"watchdog_ms"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestOperatorLongPeriodReload: a reload to a period of an hour and back to 10 ms resumes
// the ticks at once (the scheduler is woken by the pending configuration), the watchdog
// judges by the restored period, and a period beyond the upper bound is refused with its
// path and line while the running configuration stays.
func TestOperatorLongPeriodReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg.yaml")
	writeConfig(t, path, operatorConfig("10ms", ""))
	d := start(t, nil, "--config", path)
	waitTick(t, d, 0)
	reload := func(period string) int {
		t.Helper()
		if err := os.WriteFile(path, []byte(operatorConfig(period, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return d.do("POST", "/config/reload", "", nil)
	}
	if st := reload("1h"); st != http.StatusOK {
		t.Fatalf("reload to 1h: %d", st)
	}
	// The hour is in force once the watchdog judges by it: it takes the shorter of the
	// periods in force and pending, so it stays short while the change still waits.
	inForce := time.Now().Add(5 * time.Second)
	for h := (healthState{}); h.WatchdogMs <= 1000; {
		if time.Now().After(inForce) {
			t.Fatalf("a reload to 1h not in force within 5 s: /healthz %+v", h)
		}
		d.do("GET", "/healthz", "", &h)
	}
	last := waitTickOrNone(d, 0)
	if st := reload("10ms"); st != http.StatusOK {
		t.Fatalf("reload to 10ms: %d", st)
	}
	deadline := time.Now().Add(2 * time.Second)
	var h healthState
	for seen := last; ; {
		h = healthState{}
		st := d.do("GET", "/healthz", "", &h)
		if st == http.StatusOK && h.LastTickID > last+20 && h.WatchdogMs <= 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after a reload from 1h back to 10ms: /healthz %d %+v (tick %d before)", st, h, last)
		}
		seen = nextTick(d, max(seen, h.LastTickID), 100*time.Millisecond) // the daemon says when to look again
	}
	var e apiErr
	if st := func() int {
		if err := os.WriteFile(path, []byte(operatorConfig("876000h", "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return d.do("POST", "/config/reload", "", &e)
	}(); st != http.StatusUnprocessableEntity {
		t.Fatalf("reload to 876000h: %d %+v, want 422", st, e)
	}
	if len(e.Error.Problems) == 0 || e.Error.Problems[0].Field != "cycle.period" ||
		!strings.Contains(e.Error.Problems[0].Message, "upper bound") || !strings.Contains(e.Error.Problems[0].Message, "(line 2)") {
		t.Errorf("reload to 876000h: %+v, want cycle.period beyond its upper bound at line 2", e.Error)
	}
	waitTick(t, d, h.LastTickID+10) // the running configuration stays
	out, err := runCLI(t, "validate", path)
	if err == nil || !strings.Contains(out, "cycle.period") || !strings.Contains(out, "upper bound") {
		t.Errorf("cycled validate of a period of 876000h: %v\n%s", err, out)
	}
}

// waitTickOrNone returns the latest tick id within a second of now, 0 if none.
func waitTickOrNone(d *daemon, after uint64) uint64 { return nextTick(d, after, time.Second) }

// nextTick long-polls for a tick after the one given, for at most wait, and returns the
// latest tick id then (0: none). Tests of the daemon wait on it rather than on a timer:
// the daemon answers as soon as something happened.
func nextTick(d *daemon, after uint64, wait time.Duration) uint64 {
	var s struct {
		TickID uint64 `json:"tick_id"`
	}
	d.do("GET", fmt.Sprintf("/ticks/latest?wait=%s&after=%d", wait, after), "", &s)
	return s.TickID
}

// runCLI runs the binary with args and returns its combined output and error.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary(t), args...).CombinedOutput()
	return string(out), err
}

// latestModules returns the names of the modules in the latest summary.
func latestModules(t *testing.T, d *daemon, after uint64) (uint64, []string) {
	t.Helper()
	id := waitTick(t, d, after)
	var s summary
	if st := d.do("GET", "/ticks/latest", "", &s); st != http.StatusOK {
		t.Fatalf("GET /ticks/latest: %d", st)
	}
	var names []string
	for _, m := range s.Modules {
		names = append(names, m.Name)
	}
	return max(id, s.TickID), names
}

// TestOperatorEmptyFileAndSafetyRemoval: an empty file, written by the file watcher's
// own reload or asked for, is refused and the running configuration stays; a file without
// the safety module is refused (409) unless the request says allow_safety_removal=true,
// which the log names; GET /config shows the settings in force and those that wait for a
// restart; cycled validate calls an empty file and duplicate keys errors.
func TestOperatorEmptyFileAndSafetyRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg.yaml")
	writeConfig(t, path, operatorConfig("10ms", ""))
	d := start(t, nil, "--config", path)
	id := waitTick(t, d, 0)

	if err := os.Truncate(path, 0); err != nil { // ": > cfg.yaml": the watcher reloads it
		t.Fatal(err)
	}
	d.waitLog("configuration reload rejected")
	var e apiErr
	if st := d.do("POST", "/config/reload", "", &e); st != http.StatusUnprocessableEntity || !strings.Contains(e.Error.Message, "empty") {
		t.Errorf("reload of an empty file: %d %+v, want 422 empty", st, e)
	}
	id, names := latestModules(t, d, id+5)
	if !slices.Contains(names, "guard") || !slices.Contains(names, "recall") {
		t.Fatalf("modules after an empty file: %v", names)
	}

	noGuard := strings.Replace(operatorConfig("10ms", ""), "  - name: guard\n    tier: safety\n    builtin: {value: {clear: true}}\n", "", 1)
	noGuard = strings.Replace(noGuard, "tier: knowledge", "tier: safety", 1) // a safety tier without guard
	noGuard = strings.Replace(noGuard, "127.0.0.1:0", "127.0.0.1:1", 1) + "state_dir: " + filepath.Join(dir, "elsewhere") + "\n"
	writeConfig(t, path, noGuard)
	d.waitLog("configuration reload rejected")
	e = apiErr{}
	if st := d.do("POST", "/config/reload", "", &e); st != http.StatusConflict || e.Error.Code != "safety_removal" ||
		!strings.Contains(e.Error.Message, "guard") {
		t.Fatalf("reload without the safety module: %d %+v, want 409 safety_removal naming guard", st, e)
	}
	id, names = latestModules(t, d, id+5)
	if !slices.Contains(names, "guard") {
		t.Fatalf("guard lost without the flag: %v", names)
	}
	if st := d.do("POST", "/config/reload?allow_safety_removal=maybe", "", &e); st != http.StatusBadRequest {
		t.Errorf("allow_safety_removal=maybe: %d, want 400", st)
	}
	if st := d.do("POST", "/config/reload?allow_safety_removal=true", "", nil); st != http.StatusOK {
		t.Fatalf("reload with allow_safety_removal=true: %d", st)
	}
	if l := d.waitLog("safety modules removed"); !strings.Contains(l, "guard") {
		t.Errorf("log line %q does not name guard", l)
	}
	d.waitLog(`"allow_safety_removal": true`)
	_, names = latestModules(t, d, id+5)
	if slices.Contains(names, "guard") {
		t.Errorf("guard still runs after the allowed removal: %v", names)
	}
	var view struct {
		Config struct {
			HTTP struct {
				Addr string `json:"addr"`
			} `json:"http"`
			StateDir string `json:"state_dir"`
		} `json:"config"`
		RestartRequired []string `json:"restart_required"`
	}
	if st := d.do("GET", "/config", "", &view); st != http.StatusOK {
		t.Fatalf("GET /config: %d", st)
	}
	if view.Config.HTTP.Addr != "127.0.0.1:0" || strings.Contains(view.Config.StateDir, "elsewhere") ||
		!slices.Contains(view.RestartRequired, "http.addr") || !slices.Contains(view.RestartRequired, "state_dir") {
		t.Errorf("GET /config: %+v, want the address and state_dir in force and both waiting for a restart", view)
	}

	if st := d.do("POST", "/modules", `{"name": "rt", "tier": "safety", "builtin": {"value": 1}}`, nil); st != http.StatusCreated {
		t.Fatalf("POST /modules: %d", st)
	}
	e = apiErr{}
	if st := d.do("DELETE", "/modules/rt", "", &e); st != http.StatusConflict || e.Error.Code != "safety_removal" {
		t.Errorf("DELETE of a runtime safety module: %d %+v, want 409 safety_removal", st, e)
	}
	if st := d.do("DELETE", "/modules/rt?allow_safety_removal=true", "", nil); st != http.StatusNoContent {
		t.Errorf("DELETE with allow_safety_removal=true: %d, want 204", st)
	}

	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "validate", empty); err == nil || !strings.Contains(out, "empty") {
		t.Errorf("cycled validate of an empty file: %v\n%s", err, out)
	}
	dup := filepath.Join(dir, "dup.yaml")
	if err := os.WriteFile(dup, []byte("cycle: {period: 10ms}\nbreakers:\n  db: {cooldown: 1s}\n  db: {cooldown: 2s}\ncycle: {period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "validate", dup)
	if err == nil || !strings.Contains(out, `duplicate key "cycle" (lines 1 and 5)`) || !strings.Contains(out, `duplicate key "db" (lines 3 and 4)`) {
		t.Errorf("cycled validate of duplicate keys: %v\n%s", err, out)
	}
}

// startupSummary is what the startup test reads of a summary.
type startupSummary struct {
	TickID     uint64 `json:"tick_id"`
	CycleState string `json:"cycle_state"`
	Startup    *struct {
		Failures map[string]int `json:"failures"`
	} `json:"startup"`
	Emergency struct {
		Active bool `json:"active"`
	} `json:"emergency"`
	Modules []struct {
		Name    string `json:"name"`
		Status  string `json:"status"`
		Circuit string `json:"circuit_state"`
	} `json:"modules"`
}

// TestOperatorStartupWarmingSensor: a safety module that fails its first three ticks (a
// sensor warming up, more than its breaker's threshold) does not open its breaker while
// the cycle is starting: it succeeds at tick 4, startup ends there, the later tiers run,
// and no emergency is entered. The failures are counted in the summaries of startup.
func TestOperatorStartupWarmingSensor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg.yaml")
	writeConfig(t, path, `
cycle: {period: 20ms}
startup: {timeout: 5s}
tiers:
  - name: safety
    breaker: {failure_threshold: 2, cooldown: 1h}
  - name: knowledge
modules:
  - name: sensor
    tier: safety
    builtin: {value: {clear: true}, fail_ticks: [[1, 3]]}
  - name: recall
    tier: knowledge
    builtin: {value: 1}
http: {addr: 127.0.0.1:0}
`)
	d := start(t, nil, "--config", path)
	var s startupSummary
	waitTick(t, d, 5)
	if st := d.do("GET", "/ticks/3", "", &s); st != http.StatusOK {
		t.Fatalf("GET /ticks/3: %d", st)
	}
	if s.CycleState != "starting" || s.Startup == nil || s.Startup.Failures["sensor"] != 3 {
		t.Errorf("tick 3: state %q startup %+v, want starting with 3 failures of sensor", s.CycleState, s.Startup)
	}
	s = startupSummary{}
	if st := d.do("GET", "/ticks/5", "", &s); st != http.StatusOK {
		t.Fatalf("GET /ticks/5: %d", st)
	}
	if s.CycleState != "" || s.Emergency.Active {
		t.Errorf("tick 5: state %q, emergency %v; want started, no emergency", s.CycleState, s.Emergency.Active)
	}
	for _, m := range s.Modules {
		if m.Status != "ok" || (m.Name == "sensor" && m.Circuit != "closed") {
			t.Errorf("tick 5: module %+v, want ok with a closed breaker", m)
		}
	}
	var ready healthState
	if st := d.do("GET", "/readyz", "", &ready); st != http.StatusOK {
		t.Errorf("/readyz after startup: %d %+v", st, ready)
	}
	if strings.Contains(d.stderr(), "startup timed out") {
		t.Error("the daemon logged a startup timeout")
	}
}

// mountSmall mounts a tmpfs of size bytes on a new directory and unmounts it at cleanup;
// it skips the test where mounting is not permitted (not root), outside CI.
func mountSmall(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("mount a tmpfs as root in CI: %v %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs (%v %s): the recorder's own tests inject the write failure", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes a file in dir until the file system is full and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
}

// TestOperatorFullDiskTickIDs: with state_dir on a file system that fills up, the daemon
// publishes no id past what is durably reserved: ticks stop, /healthz says ids_exhausted,
// the metric and the log say so. Killed (-9) then, and restarted once space is freed, it
// starts past every id it published; and after a clean stop it continues at last + 1.
func TestOperatorFullDiskTickIDs(t *testing.T) {
	state := mountSmall(t, "4m")
	path := filepath.Join(t.TempDir(), "cfg.yaml")
	writeConfig(t, path, operatorConfig("2ms", "state_dir: "+state+"\nrecorder: {enabled: true}\n"))
	d := start(t, nil, "--config", path)
	waitTick(t, d, 10)
	filler := fillDisk(t, state)
	deadline := time.Now().Add(30 * time.Second)
	var h healthState
	for seen := uint64(0); ; {
		h = healthState{}
		if st := d.do("GET", "/healthz", "", &h); st == http.StatusServiceUnavailable && h.Error != nil && h.Error.Code == "ids_exhausted" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ids_exhausted within 30 s on a full state_dir: %+v\n%s", h, d.stderr())
		}
		seen = nextTick(d, max(seen, h.LastTickID), 100*time.Millisecond) // ticks go on until the ids run out
	}
	if m := d.metrics(); !strings.Contains(m, "cycled_tick_ids_exhausted 1") {
		t.Error("cycled_tick_ids_exhausted is not 1")
	}
	d.waitLog("no tick id is reserved")
	var s summary
	d.do("GET", "/ticks/latest", "", &s)
	published := s.TickID
	if next := nextTick(d, published, 100*time.Millisecond); next != published {
		t.Fatalf("ticks went on past the reservation: %d after %d", next, published)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d = start(t, nil, "--config", path)
	if first := firstTick(t, d); first <= published {
		t.Fatalf("after kill -9 the restart starts at tick %d; ids up to %d were published", first, published)
	}
	waitTick(t, d, 5)
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	d = start(t, nil, "--config", path)
	next := firstTick(t, d)
	var prev struct {
		TickID uint64 `json:"tick_id"`
	}
	if st := d.do("GET", fmt.Sprintf("/ticks/%d", next-1), "", &prev); st != http.StatusOK || prev.TickID != next-1 {
		t.Fatalf("after a clean stop the next run starts at %d, but tick %d is not the last recorded (%d)", next, next-1, st)
	}
}

// firstTickRE finds the first tick id in the recorder's startup log line.
var firstTickRE = regexp.MustCompile(`"first_tick":\s*(\d+)`)

// firstTick returns the id of the first tick of d's run, from its log.
func firstTick(t *testing.T, d *daemon) uint64 {
	t.Helper()
	m := firstTickRE.FindStringSubmatch(d.waitLog(`"first_tick"`))
	if m == nil {
		t.Fatalf("no first_tick in the log:\n%s", d.stderr())
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// TestOperatorAdminBounds: runtime registrations stop at http.max_runtime_modules (409
// module_limit, JSON), and a storm of admin requests from one client is answered 429 with
// Retry-After beyond http.admin_limit, before any of them reaches the engine.
func TestOperatorAdminBounds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg.yaml")
	writeConfig(t, path, strings.Replace(operatorConfig("10ms", "state_dir: "+filepath.Join(dir, "state")+"\n"),
		"http: {addr: 127.0.0.1:0}", "http: {addr: 127.0.0.1:0, max_runtime_modules: 3, admin_limit: {rate: 5, burst: 10}}", 1))
	d := start(t, nil, "--config", path)
	for i := range 3 {
		if st := d.do("POST", "/modules", fmt.Sprintf(`{"name": "rt%d", "tier": "knowledge", "builtin": {"value": 1}}`, i), nil); st != http.StatusCreated {
			t.Fatalf("registration %d: %d", i, st)
		}
	}
	var e apiErr
	if st := d.do("POST", "/modules", `{"name": "rt3", "tier": "knowledge", "builtin": {"value": 1}}`, &e); st != http.StatusConflict ||
		e.Error.Code != "module_limit" {
		t.Fatalf("a fourth registration: %d %+v, want 409 module_limit", st, e)
	}
	limited, served := 0, 0
	for range 40 {
		req, _ := http.NewRequest("POST", d.base+"/config/reload", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body apiErr
		st := decodeInto(t, resp, &body)
		switch {
		case st == http.StatusTooManyRequests && body.Error.Code == "rate_limited" && resp.Header.Get("Retry-After") != "":
			limited++
		case st == http.StatusOK:
			served++
		default:
			t.Fatalf("reload in a storm: %d %+v (Retry-After %q)", st, body, resp.Header.Get("Retry-After"))
		}
		resp.Body.Close()
	}
	if served > 12 || limited < 28 {
		t.Errorf("a storm of 40 reloads: %d served, %d refused; want at most the burst (and what the rate earns) served", served, limited)
	}
	if !strings.Contains(d.metrics(), `cycled_http_admin_refused_total{reason="rate_limited"}`) {
		t.Error("the refusals are not counted")
	}
}

// TestOperatorRuntimeHeaderSources: a runtime registration may not have the daemon read
// its environment or its files into the headers it sends to a URL of the caller's
// choice (422 naming the field), unless the configuration file lists the source in
// http.runtime_header_sources; literal values are always allowed.
func TestOperatorRuntimeHeaderSources(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cfg.yaml")
	writeConfig(t, path, strings.Replace(operatorConfig("0", "state_dir: "+filepath.Join(dir, "state")+"\n"),
		"http: {addr: 127.0.0.1:0}", "http: {addr: 127.0.0.1:0, runtime_header_sources: {env: [ALLOWED_TOKEN]}}", 1))
	d := start(t, []string{"ALLOWED_TOKEN=ok", "SOME_SECRET=no"}, "--config", path)
	body := func(name, headers string) string {
		return fmt.Sprintf(`{"name": %q, "tier": "knowledge", "kind": "http", "http": {"url": "http://127.0.0.1:9/x", "headers": %s}}`, name, headers)
	}
	for _, tc := range []struct{ headers, field string }{
		{`{"X-File": {"file": "` + secret + `"}}`, "http.headers.X-File.file"},
		{`{"X-Env": {"env": "SOME_SECRET"}}`, "http.headers.X-Env.env"},
		{`{"X-Env": {"env": "HOME"}}`, "http.headers.X-Env.env"},
	} {
		var e apiErr
		if st := d.do("POST", "/modules", body("leak", tc.headers), &e); st != http.StatusUnprocessableEntity || e.Error.Field != tc.field {
			t.Errorf("registration with %s: %d %+v, want 422 at %s", tc.headers, st, e.Error, tc.field)
		}
	}
	if st := d.do("POST", "/modules", body("allowed", `{"Authorization": {"env": "ALLOWED_TOKEN"}, "X-Lit": "v"}`), nil); st != http.StatusCreated {
		t.Errorf("registration with an allowed source and a literal: %d, want 201", st)
	}
}
