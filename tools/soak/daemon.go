package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// buildDaemon builds cmd/cycled into dir and returns the binary's path.
func buildDaemon(ctx context.Context, dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "cycled")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/cycled/cycled/cmd/cycled")
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// daemon is the running cycled process.
type daemon struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	pid    int
	exited chan struct{} // closed when the process has exited
	err    error         // Wait's error, valid after exited

	mu     sync.Mutex
	stderr []string // every stderr line
}

// startDaemon runs bin with the configuration file cfg and waits for its "listening on"
// line. The environment is the soak's without CYCLED_ variables.
func startDaemon(bin, cfg string) (*daemon, error) {
	cmd := exec.Command(bin, "run", "--config", cfg)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CYCLED_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	addr := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); readListening(stdout, addr) }()
	go func() { defer readers.Done(); d.readLog(stderr) }()
	go func() {
		readers.Wait() // Wait must follow the reads of the pipes
		d.err = cmd.Wait()
		close(d.exited)
	}()
	select {
	case d.base = <-addr:
		return d, nil
	case <-d.exited:
		return nil, fmt.Errorf("the daemon exited before listening (%v):\n%s", d.err, d.tail(40))
	case <-time.After(20 * time.Second):
		d.kill()
		return nil, fmt.Errorf("no \"listening on\" line within 20 s:\n%s", d.tail(40))
	}
}

// readListening reads the daemon's stdout to its end and sends the address of its
// "listening on" line to addr (one, without waiting).
func readListening(stdout io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			select {
			case addr <- a:
			default:
			}
		}
	}
}

// readLog keeps the lines of the daemon's stderr (its log) until its end.
func (d *daemon) readLog(stderr io.Reader) {
	r := bufio.NewReader(stderr)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			d.mu.Lock()
			d.stderr = append(d.stderr, strings.TrimRight(line, "\n"))
			d.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// alive reports whether the process is still running.
func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the exit; it returns the exit code and how long it took.
func (d *daemon) stop(timeout time.Duration) (int, time.Duration, error) {
	t0 := time.Now()
	if !d.alive() {
		return d.cmd.ProcessState.ExitCode(), 0, errors.New("the daemon had already exited")
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, 0, err
	}
	select {
	case <-d.exited:
		return d.cmd.ProcessState.ExitCode(), time.Since(t0), nil
	case <-time.After(timeout):
		d.kill()
		return -1, time.Since(t0), fmt.Errorf("no exit within %s of SIGTERM", timeout)
	}
}

// kill ends the process (cleanup after a failure).
func (d *daemon) kill() {
	if d.alive() {
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// logText returns every stderr line.
func (d *daemon) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.stderr, "\n")
}

// tail returns the last n stderr lines.
func (d *daemon) tail(n int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.stderr
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// writeAtomic replaces path with data through a rename, so that the daemon's file watcher
// never reads a half-written file.
func writeAtomic(path string, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cycled-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.WriteString(tmp, data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
