package check

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests of this module run the real daemon, built once from the repository.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// repoRoot is the repository's root: this module lives in deploy/check.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// binary builds cmd/cycled once.
func binary(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cycled-check-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "cycled")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/cycled")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// daemon is a running cycled.
type daemon struct {
	base   string // http://127.0.0.1:port
	config string // the configuration file's path
}

// startDaemon runs the daemon on the YAML configuration (http.addr, the admin token and
// state_dir are set here) and waits for it to listen; it is stopped at the end of the test.
func startDaemon(t *testing.T, yaml string) *daemon {
	t.Helper()
	return startDaemonHTTP(t, yaml, "{addr: \"127.0.0.1:0\", admin_token: "+adminToken+"}")
}

// startDaemonHTTP is startDaemon with the http section given (its addr must be
// 127.0.0.1:0, the listener reported on stdout).
func startDaemonHTTP(t *testing.T, yaml, http string) *daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cycled.yaml")
	yaml += "\nhttp: " + http + "\nstate_dir: " + filepath.Join(dir, "state") + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "run", "--config", cfg)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CYCLED_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return &daemon{base: a, config: cfg}
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not start:\n%s", stderr.String())
	}
	return nil
}

const adminToken = "check-admin-token"
