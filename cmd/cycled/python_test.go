package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPythonExampleEndToEnd runs the real daemon in step mode and the Python example
// module (examples/python-module/module.py, on the SDK in clients/python): the module
// registers itself with the admin token, runs on the next tick, its value flows into a
// later tier's inputs (a recording http module in planning), and on SIGTERM it
// deregisters.
func TestPythonExampleEndToEnd(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH: the Python example module cannot be exercised")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "python-module", "module.py"))
	if err != nil {
		t.Fatal(err)
	}
	const token = "e2e-admin-token"
	stateDir := t.TempDir()
	cfgPath := write(t, "cycled.yaml", `
cycle: {period: 0}
modules:
  - name: collision_guard
    tier: safety
    builtin: {value: {obstacles: 0}}
http: {addr: 127.0.0.1:0}
state_dir: `+stateDir+"\n")
	d := start(t, []string{"CYCLED_HTTP_ADMIN_TOKEN=" + token}, "--config", cfgPath)
	admin := func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, d.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil && len(b) > 0 {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v in %s", method, path, err, b)
			}
		}
		return resp.StatusCode
	}

	// A later tier's module that records its inputs: the sink of the Python module's value.
	var mu sync.Mutex
	var sinkInputs []map[string]json.RawMessage
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Inputs map[string]json.RawMessage `json:"inputs"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		sinkInputs = append(sinkInputs, body.Inputs)
		mu.Unlock()
		io.WriteString(w, `{"value": "planned"}`)
	}))
	defer sink.Close()
	if st := admin("POST", "/modules", `{"name": "sink", "tier": "planning", "kind": "http", "reads": ["py-recall.result"], "http": {"url": "`+sink.URL+`"}}`, nil); st != http.StatusCreated {
		t.Fatalf("register sink: %d", st)
	}

	sdk, err := filepath.Abs(filepath.Join("..", "..", "clients", "python", "src"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	cmd.Env = append(os.Environ(), "CYCLED_ADMIN_TOKEN="+token, "CYCLED_URL="+d.base, "PYTHONPATH="+sdk, "PYTHONUNBUFFERED=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = cmd.Wait() // after the reads of the pipe
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	waitLine := func(prefix string) {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("module.py exited before printing %q; stderr:\n%s", prefix, stderr.String())
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-timeout:
				t.Fatalf("module.py did not print %q; stderr:\n%s", prefix, stderr.String())
			}
		}
	}
	waitLine("registered py-recall at http://127.0.0.1:")

	var view struct {
		Origin  string `json:"origin"`
		Pending bool   `json:"pending"`
	}
	if st := d.do("GET", "/modules/py-recall", "", &view); st != http.StatusOK || view.Origin != "runtime" || !view.Pending {
		t.Fatalf("GET /modules/py-recall = %d %+v", st, view)
	}

	// Tick 1: the module runs, and its value reaches planning's inputs in the same tick.
	var s summary
	if st := admin("POST", "/ticks", "", &s); st != http.StatusOK || s.status("py-recall") != "ok" || s.status("sink") != "ok" {
		t.Fatalf("tick 1: %d %+v", st, s)
	}
	mu.Lock()
	got := sinkInputs[len(sinkInputs)-1]["py-recall.result"]
	mu.Unlock()
	var entry struct {
		Value struct {
			Clear  map[string]any `json:"clear"`
			Source string         `json:"source"`
			Tick   uint64         `json:"tick"`
		} `json:"value"`
		Source string `json:"source"`
		Module string `json:"module"`
		TickID uint64 `json:"tick_id"`
	}
	if err := json.Unmarshal(got, &entry); err != nil {
		t.Fatalf("sink input %s: %v", got, err)
	}
	if entry.Source != "live" || entry.Module != "py-recall" || entry.TickID != s.TickID || entry.Value.Tick != s.TickID ||
		entry.Value.Clear["obstacles"] != 0.0 || entry.Value.Source != "live" {
		t.Fatalf("planning read py-recall.result = %s", got)
	}

	// SIGTERM: the module deregisters and exits 0; the next tick runs without it.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLine("deregistered py-recall")
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("module.py exit: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("module.py did not exit after SIGTERM")
	}
	if st := admin("POST", "/ticks", "", &s); st != http.StatusOK || s.status("py-recall") != "" {
		t.Fatalf("tick after deregistration: %d %+v", st, s)
	}
	if b, _ := os.ReadFile(filepath.Join(stateDir, stateFile)); strings.Contains(string(b), `"py-recall"`) || !strings.Contains(string(b), `"sink"`) {
		t.Fatalf("state file after deregistration: %s", b)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("daemon exit %d\n%s", code, d.stderr())
	}
}
