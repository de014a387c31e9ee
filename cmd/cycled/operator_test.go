package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	time.Sleep(200 * time.Millisecond)
	last := waitTickOrNone(d, 0)
	if st := reload("10ms"); st != http.StatusOK {
		t.Fatalf("reload to 10ms: %d", st)
	}
	deadline := time.Now().Add(2 * time.Second)
	var h healthState
	for {
		h = healthState{}
		st := d.do("GET", "/healthz", "", &h)
		if st == http.StatusOK && h.LastTickID > last+20 && h.WatchdogMs <= 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after a reload from 1h back to 10ms: /healthz %d %+v (tick %d before)", st, h, last)
		}
		time.Sleep(20 * time.Millisecond)
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
func waitTickOrNone(d *daemon, after uint64) uint64 {
	var s struct {
		TickID uint64 `json:"tick_id"`
	}
	d.do("GET", fmt.Sprintf("/ticks/latest?wait=1s&after=%d", after), "", &s)
	return s.TickID
}

// runCLI runs the binary with args and returns its combined output and error.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary(t), args...).CombinedOutput()
	return string(out), err
}
