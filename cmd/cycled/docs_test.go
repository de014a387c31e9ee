package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// needTools skips the test when a command the documents use is missing.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs documented commands with real builds and processes")
	}
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not on PATH", n)
		}
	}
}

// getJSON GETs url and decodes a JSON answer into out; it returns the status (0 when
// the daemon does not answer).
func getJSON(url string, out any) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// rewriteAddr points a documented command at addr instead of the default port 8080.
func rewriteAddr(addr string) func(string) string {
	_, port, _ := strings.Cut(addr, ":")
	return func(c string) string {
		c = strings.ReplaceAll(c, "localhost:8080", "127.0.0.1:"+port)
		return strings.ReplaceAll(c, "127.0.0.1:8080", "127.0.0.1:"+port)
	}
}

func ok(out string, code int) error {
	if code != 0 {
		return fmt.Errorf("exit %d", code)
	}
	return nil
}

// TestPythonExampleReadme pastes examples/python-module/README.md's commands, from the
// repository's root, into one shell: go install puts cycled on the PATH, the daemon runs
// on the directory's own config, the SDK module registers, runs every tick (status ok,
// its value live on the blackboard), and deregisters when it is stopped.
func TestPythonExampleReadme(t *testing.T) {
	needTools(t, "go", "python3", "curl", "bash")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "examples/python-module/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := docCommands(string(md), regexp.MustCompile(`A remote module in Python`))
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	base := "http://" + addr
	gopath := t.TempDir()
	state := t.TempDir()
	sh := newShell(t, root, "GOPATH="+gopath, "GOBIN=", "GOFLAGS=-modcacherw", "GOMODCACHE="+goEnv(t, "GOMODCACHE"),
		"CYCLED_HTTP_ADDR="+addr, "CYCLED_URL="+base, "CYCLED_STATE_DIR="+state)
	type module struct {
		Last *struct {
			Status string `json:"status"`
		} `json:"last"`
	}
	driveDoc(t, sh, cmds, rewriteAddr(addr), []docCheck{
		{cmd: regexp.MustCompile(`^go install \./cmd/cycled`), timeout: 0, check: func(out string, code int) error {
			if _, err := os.Stat(filepath.Join(gopath, "bin", "cycled")); err != nil {
				return fmt.Errorf("exit %d, no cycled in $GOPATH/bin: %v", code, err)
			}
			return ok(out, code)
		}},
		{cmd: regexp.MustCompile(`^export PATH=`), check: ok},
		{cmd: regexp.MustCompile(`^cd examples/python-module`), check: ok},
		{cmd: regexp.MustCompile(`^cycled run --config cycled\.yaml &`), check: func(out string, code int) error {
			return waitFor(15*time.Second, "the daemon to tick", func() bool { return getJSON(base+"/readyz", nil) == 200 })
		}},
		{cmd: regexp.MustCompile(`python3 module\.py &`), check: func(out string, code int) error {
			return waitFor(15*time.Second, "py-recall to run", func() bool {
				var m module
				return getJSON(base+"/modules/py-recall", &m) == 200 && m.Last != nil && m.Last.Status == "ok"
			})
		}},
		{cmd: regexp.MustCompile(`^curl -s localhost:8080/modules/py-recall`), timeout: 5 * time.Second, check: func(out string, code int) error {
			var m module
			if err := json.Unmarshal([]byte(out), &m); err != nil || m.Last == nil || m.Last.Status != "ok" {
				return fmt.Errorf("want the module with \"status\": \"ok\" (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`^curl -s localhost:8080/blackboard/py-recall\.result`), timeout: 5 * time.Second, check: func(out string, code int) error {
			var e struct {
				Value struct {
					Clear  map[string]any `json:"clear"`
					Source string         `json:"source"`
				} `json:"value"`
			}
			if err := json.Unmarshal([]byte(out), &e); err != nil || e.Value.Source != "live" || e.Value.Clear["obstacles"] != 0.0 {
				return fmt.Errorf("want {\"value\": {\"clear\": {\"obstacles\": 0}, \"source\": \"live\"}} (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`^kill %2; wait %2; kill %1`), check: func(out string, code int) error {
			if !strings.Contains(out, "deregistered py-recall") {
				return fmt.Errorf("the module did not print \"deregistered py-recall\"")
			}
			return waitFor(10*time.Second, "the daemon to stop", func() bool { return getJSON(base+"/healthz", nil) == 0 })
		}},
	})
}

// goEnv returns a go env variable (the module cache is shared with the test's own, so
// that go install needs no download).
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		<-time.After(50 * time.Millisecond)
	}
	return nil
}
