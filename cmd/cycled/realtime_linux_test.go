package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemonRealtimePriority: with cycle.realtime_priority the daemon runs every thread
// under SCHED_FIFO at that priority, threads started after start-up included (the HTTP
// server's, those the ticks need).
func TestDaemonRealtimePriority(t *testing.T) {
	if err := rtProbe(t); err != nil {
		t.Skipf("real-time scheduling is not permitted here: %v", err)
	}
	d := start(t, []string{"CYCLED_HTTP_ADDR=127.0.0.1:0", "CYCLED_STATE_DIR=", "CYCLED_CYCLE_PERIOD=10ms", "CYCLED_CYCLE_REALTIME_PRIORITY=1"})
	d.waitLog("real-time scheduling")
	waitForTick(d)
	waitForTick(d)
	pid := d.cmd.Process.Pid
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if a.Policy != unix.SCHED_FIFO || a.Priority != 1 {
			t.Errorf("thread %d: policy %d priority %d, want SCHED_FIFO (%d) at 1", tid, a.Policy, a.Priority, unix.SCHED_FIFO)
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("only %d threads checked", checked)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, d.stderr())
	}
}

// TestDaemonRealtimePriorityNotPermitted: a daemon that may not use real-time scheduling
// exits 1 at start-up, naming the key and what it needs, instead of running without it.
func TestDaemonRealtimePriorityNotPermitted(t *testing.T) {
	bin := binary(t)
	var cred *syscall.Credential
	if rtProbe(t) == nil {
		if os.Geteuid() != 0 {
			t.Skip("RLIMIT_RTPRIO permits real-time scheduling and there is no user to drop to")
		}
		// As root: run a copy of the binary as nobody (no CAP_SYS_NICE, RLIMIT_RTPRIO 0).
		dir, err := os.MkdirTemp("", "cycled-rt-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "cycled")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	// Bounded: a daemon that ignored the setting would run until killed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run")
	cmd.Env = []string{"CYCLED_HTTP_ADDR=127.0.0.1:0", "CYCLED_STATE_DIR=", "CYCLED_CYCLE_REALTIME_PRIORITY=5"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if cred != nil && errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot run the daemon as nobody here: %v", err)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitError {
		t.Fatalf("exit %d, want %d:\n%s", code, exitError, out)
	}
	for _, want := range []string{"cycle.realtime_priority", "operation not permitted", "CAP_SYS_NICE"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "listening on") {
		t.Errorf("the daemon listened before giving up:\n%s", out)
	}
}

// rtProbe reports whether a process started by this one may run under SCHED_FIFO 1, by
// trying in a child process: capabilities and RLIMIT_RTPRIO are not the whole answer (a
// container's cgroup may have no real-time runtime).
func rtProbe(t *testing.T) error {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), rtProbeEnv+"=1")
	out, err := cmd.Output()
	if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 3 {
		return errors.New(strings.TrimSpace(string(out)))
	}
	if err != nil {
		t.Fatalf("real-time probe: %v\n%s", err, out)
	}
	return nil
}
