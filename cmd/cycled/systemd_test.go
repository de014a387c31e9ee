package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit checks deploy/systemd/cycled.service with systemd-analyze verify (skipped
// where systemd-analyze is absent), the unit's ExecStart pointed at the binary under
// test, and that the unit keeps its promises: a dedicated user, state_dir in its
// StateDirectory, the filesystem protections, and a command line the binary accepts.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "cycled.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"User=cycled", "StateDirectory=cycled", "Environment=CYCLED_STATE_DIR=%S/cycled",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n",
		"ExecReload=/bin/kill -HUP $MAINPID", "LimitRTPRIO="} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	const exe = "/usr/local/bin/cycled"
	var args []string
	for _, l := range strings.Split(unit, "\n") {
		if cmd, ok := strings.CutPrefix(l, "ExecStart="+exe+" "); ok {
			args = strings.Fields(cmd)
		}
	}
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("ExecStart is not %s run …: %q", exe, args)
	}
	bin := binary(t)
	// The command line parses: "run --help" with the unit's flags answers 0.
	if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v --help: %v\n%s", exe, args, err, out)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	path := filepath.Join(t.TempDir(), "cycled.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "ExecStart="+exe, "ExecStart="+bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
