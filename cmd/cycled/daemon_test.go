package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests start the real binary, built once by the test, on a free loopback port.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cycled-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "cycled")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	if os.Getenv(rtProbeEnv) != "" {
		os.Exit(rtProbeChild())
	}
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// daemon is a running cycled process.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string      // http://127.0.0.1:port
	logs   chan string // stderr lines
	mu     sync.Mutex
	all    []string
	exited chan error
}

const stepConfig = `
cycle: {period: 0}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    ttl: 1s
    builtin: {value: 1, fail_attempts: 1}
http: {addr: 127.0.0.1:0}
`

// start runs the binary with args and an environment without CYCLED_ variables (plus env),
// and waits for its "listening on" line.
func start(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CYCLED_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, logs: make(chan string, 1024), exited: make(chan error, 1)}
	addr := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.mu.Lock()
			d.all = append(d.all, sc.Text())
			d.mu.Unlock()
			select {
			case d.logs <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		readers.Wait() // Wait must follow the reads of the pipes
		d.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-d.exited
		}
	})
	select {
	case d.base = <-addr:
	case err := <-d.exited:
		d.exited <- err
		t.Fatalf("the daemon exited before listening (%v):\n%s", err, d.stderr())
	case <-time.After(15 * time.Second):
		t.Fatalf("no \"listening on\" line:\n%s", d.stderr())
	}
	return d
}

func (d *daemon) stderr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.all, "\n")
}

// waitLog waits for a stderr line containing s.
func (d *daemon) waitLog(s string) string {
	d.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-d.logs:
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			d.t.Fatalf("no log line with %q:\n%s", s, d.stderr())
		}
	}
}

// do sends a request and decodes a JSON answer into out (if not nil).
func (d *daemon) do(method, path, body string, out any) int {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (d *daemon) stop() (int, time.Duration) {
	d.t.Helper()
	t0 := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.t.Fatalf("no exit after SIGTERM:\n%s", d.stderr())
	}
	return d.cmd.ProcessState.ExitCode(), time.Since(t0)
}

type summary struct {
	TickID      uint64         `json:"tick_id"`
	RetryCounts map[string]int `json:"retry_counts"`
	Modules     []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"modules"`
}

func TestDaemonStepMode(t *testing.T) {
	stateDir := t.TempDir()
	cfgPath := write(t, "cycled.yaml", stepConfig+"state_dir: "+stateDir+"\n")
	d := start(t, nil, "--config", cfgPath)

	if st := d.do("GET", "/healthz", "", nil); st != http.StatusOK {
		t.Fatalf("/healthz = %d", st)
	}
	var s summary
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK || s.TickID != 1 || s.RetryCounts["recall"] != 1 {
		t.Fatalf("POST /ticks = %d %+v", st, s)
	}
	if st := d.do("GET", "/ticks/latest", "", &s); st != http.StatusOK || s.TickID != 1 {
		t.Fatalf("GET /ticks/latest = %d %+v", st, s)
	}

	// Runtime registration: a bad body is a 400, a good one is persisted.
	if st := d.do("POST", "/modules", `{"name": "late", "tier": "planning", "budegt": 1}`, nil); st != http.StatusBadRequest {
		t.Fatalf("POST /modules with an unknown field = %d", st)
	}
	if st := d.do("POST", "/modules", `{"name": "late", "tier": "planning", "builtin": {"value": 42}}`, nil); st != http.StatusCreated {
		t.Fatalf("POST /modules = %d", st)
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, stateFile)); err != nil || !strings.Contains(string(b), `"late"`) {
		t.Fatalf("runtime module not persisted: %v %s", err, b)
	}

	// Fault injection, then a tick that shows it.
	var fr map[string]any
	if st := d.do("POST", "/modules/guard/faults", `{"fail_rte": 1}`, nil); st != http.StatusBadRequest {
		t.Fatalf("faults with an unknown field = %d", st)
	}
	if st := d.do("POST", "/modules/recall/faults", `{"fail_attempts": 0}`, &fr); st != http.StatusOK {
		t.Fatalf("faults = %d %v", st, fr)
	}
	var s2 summary
	if st := d.do("POST", "/ticks", "", &s2); st != http.StatusOK || s2.RetryCounts["recall"] != 0 || len(s2.Modules) != 3 {
		t.Fatalf("tick after fault change: %d %+v", st, s2)
	}

	// SIGHUP with a broken file: rejected, the running configuration stays.
	if err := os.WriteFile(cfgPath, []byte("tiers:\n  - {name: safety, budegt: 1ms}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	d.waitLog("reload rejected")
	var view struct {
		LastReload struct {
			OK       bool `json:"ok"`
			Problems []struct {
				Field string `json:"field"`
			} `json:"problems"`
		} `json:"last_reload"`
	}
	if st := d.do("GET", "/config", "", &view); st != http.StatusOK || view.LastReload.OK || len(view.LastReload.Problems) == 0 ||
		view.LastReload.Problems[0].Field != "tiers[0].budegt" {
		t.Fatalf("GET /config after a bad reload: %d %+v", st, view)
	}
	var s3 summary
	if st := d.do("POST", "/ticks", "", &s3); st != http.StatusOK || s3.TickID != 3 || len(s3.Modules) != 3 {
		t.Fatalf("tick after a bad reload: %d %+v", st, s3)
	}

	// The hidden healthcheck command works against the daemon.
	if code, _, errOut := runCmd(t, "healthcheck", "--url", d.base+"/healthz"); code != 0 {
		t.Fatalf("healthcheck: %d %s", code, errOut)
	}

	code, took := d.stop()
	if code != 0 || took > 2*time.Second {
		t.Fatalf("SIGTERM: exit %d after %v\n%s", code, took, d.stderr())
	}

	// A restart keeps the runtime registration.
	if err := os.WriteFile(cfgPath, []byte(stepConfig+"state_dir: "+stateDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d = start(t, nil, "--config", cfgPath)
	if st := d.do("GET", "/modules/late", "", nil); st != http.StatusOK {
		t.Fatalf("GET /modules/late after restart = %d\n%s", st, d.stderr())
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestDaemonDeletesUnrestoredModule: a runtime registration that a restart cannot restore
// (its tier is gone from the configuration) stays saved, and DELETE /modules/{name}
// removes it, so that the daemon stops retrying it at every start.
func TestDaemonDeletesUnrestoredModule(t *testing.T) {
	stateDir := t.TempDir()
	cfgPath := write(t, "cycled.yaml", stepConfig+"state_dir: "+stateDir+"\n")
	d := start(t, nil, "--config", cfgPath)
	if st := d.do("POST", "/modules", `{"name": "late", "tier": "knowledge", "builtin": {"value": 42}}`, nil); st != http.StatusCreated {
		t.Fatalf("POST /modules = %d", st)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	noKnowledge := strings.Replace(stepConfig, "    tier: knowledge\n", "    tier: safety\n", 1) +
		"tiers: [{name: safety}, {name: planning}]\nstate_dir: " + stateDir + "\n"
	if err := os.WriteFile(cfgPath, []byte(noKnowledge), 0o600); err != nil {
		t.Fatal(err)
	}
	d = start(t, nil, "--config", cfgPath)
	if st := d.do("GET", "/modules/late", "", nil); st != http.StatusNotFound {
		t.Fatalf("GET /modules/late after a restart without its tier = %d, want 404\n%s", st, d.stderr())
	}
	if st := d.do("DELETE", "/modules/late", "", nil); st != http.StatusNoContent {
		t.Fatalf("DELETE /modules/late (saved, not restored) = %d, want 204\n%s", st, d.stderr())
	}
	if st := d.do("DELETE", "/modules/late", "", nil); st != http.StatusNotFound {
		t.Fatalf("DELETE /modules/late again = %d, want 404", st)
	}
	saved, err := os.ReadFile(filepath.Join(stateDir, "modules.json"))
	if err != nil || strings.Contains(string(saved), `"late"`) {
		t.Fatalf("modules.json after the delete: %v\n%s", err, saved)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestDaemonPeriodicSIGTERM runs the demo at 10 Hz and checks that SIGTERM ends it with
// exit code 0 within one period plus a second.
// TestDaemonRegistrationNotPersisted runs the daemon with a state_dir that cannot be
// written (its path is a file): POST /modules answers 500 not_persisted, and the module
// is neither listed nor run, so that a restart cannot silently lose it.
func TestDaemonRegistrationNotPersisted(t *testing.T) {
	stateDir := write(t, "state", "a file, not a directory")
	d := start(t, nil, "--config", write(t, "cycled.yaml", stepConfig+"state_dir: "+stateDir+"\n"))
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if st := d.do("POST", "/modules", `{"name": "late", "tier": "planning", "builtin": {"value": 42}}`, &e); st != http.StatusInternalServerError ||
		e.Error.Code != "not_persisted" || !strings.Contains(e.Error.Message, "late") {
		t.Fatalf("POST /modules with an unwritable state_dir = %d %+v", st, e)
	}
	if st := d.do("GET", "/modules/late", "", nil); st != http.StatusNotFound {
		t.Errorf("GET /modules/late = %d, want 404", st)
	}
	var s summary
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK {
		t.Fatalf("POST /ticks = %d", st)
	}
	for _, m := range s.Modules {
		if m.Name == "late" {
			t.Errorf("the module whose registration failed ran: %+v", m)
		}
	}
}

func TestDaemonPeriodicSIGTERM(t *testing.T) {
	d := start(t, []string{"CYCLED_HTTP_ADDR=127.0.0.1:0", "CYCLED_STATE_DIR="}, "--log-level", "warn")
	var s summary
	deadline := time.Now().Add(5 * time.Second)
	for d.do("GET", "/ticks/latest", "", &s) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("no tick within 5 s")
		}
		waitForTick(d)
	}
	code, took := d.stop()
	if code != 0 || took > 1100*time.Millisecond {
		t.Fatalf("SIGTERM: exit %d after %v\n%s", code, took, d.stderr())
	}
	if strings.Contains(d.stderr(), "INFO") {
		t.Fatalf("--log-level warn still logs at info:\n%s", d.stderr())
	}
}

// waitForTick long-polls for the next tick.
func waitForTick(d *daemon) {
	resp, err := http.Get(d.base + "/ticks/latest?wait=1s&after=0")
	if err == nil {
		resp.Body.Close()
	}
}

func TestDaemonInvalidConfigExits1(t *testing.T) {
	cmd := exec.Command(binary(t), "--config", write(t, "bad.yaml", threeMistakes))
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitError {
		t.Fatalf("exit %v:\n%s", err, out)
	}
	for _, p := range []string{"cycle.period", "tiers[0].budegt", "modules[0].builtin.fail_rate"} {
		if !strings.Contains(string(out), p) {
			t.Errorf("output lacks %s:\n%s", p, out)
		}
	}
}

// TestDaemonReadLimit checks that http.read_limit paces the read routes, spares probes and
// admin routes, and follows a reload.
func TestDaemonReadLimit(t *testing.T) {
	limited := strings.Replace(stepConfig, "http: {addr: 127.0.0.1:0}",
		"http: {addr: 127.0.0.1:0, read_limit: {rate: 0.01, burst: 2, max_wait: 10ms}}", 1)
	cfgPath := write(t, "cycled.yaml", limited+"state_dir: "+t.TempDir()+"\n")
	d := start(t, nil, "--config", cfgPath)

	for i := range 2 {
		if st := d.do("GET", "/modules", "", nil); st != http.StatusOK {
			t.Fatalf("GET /modules %d within the burst = %d", i, st)
		}
	}
	resp, err := http.Get(d.base + "/breakers")
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if st := decodeInto(t, resp, &e); st != http.StatusTooManyRequests || e.Error.Code != "rate_limited" || resp.Header.Get("Retry-After") != "100" {
		t.Fatalf("over the limit: %d %+v Retry-After %q, want 429 rate_limited 100", st, e, resp.Header.Get("Retry-After"))
	}
	// Probes and admin routes are not paced.
	for _, r := range []struct{ method, path string }{{"GET", "/healthz"}, {"GET", "/readyz"}, {"POST", "/ticks"}, {"GET", "/metrics"}} {
		if st := d.do(r.method, r.path, "", nil); st != http.StatusOK {
			t.Errorf("%s %s = %d", r.method, r.path, st)
		}
	}
	// The refusal is counted for operators.
	if m := d.metrics(); !strings.Contains(m, "cycled_http_reads_refused_total 1\n") || !strings.Contains(m, "cycled_http_reads_delayed_total 0\n") {
		t.Errorf("/metrics lacks the read limit's counts:\n%s", m)
	}

	// A reload lifts the limit.
	if err := os.WriteFile(cfgPath, []byte(stepConfig+"state_dir: "+t.TempDir()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := d.do("POST", "/config/reload", "", nil); st != http.StatusOK {
		t.Fatalf("reload = %d\n%s", st, d.stderr())
	}
	for i := range 50 {
		if st := d.do("GET", "/modules", "", nil); st != http.StatusOK {
			t.Fatalf("GET /modules %d after the reload = %d", i, st)
		}
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
