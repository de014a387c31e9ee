package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

const tailConfig = `
cycle: {period: 0}
emergency: {recover_after: 1}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}}}
  - {name: recall, tier: knowledge, builtin: {value: 1}}
  - {name: plan, tier: planning, builtin: {value: go}}
http: {addr: "%s"}
state_dir: %s
`

// tailProc is a running "cycled tail" with its output lines.
type tailProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout chan string
	stderr chan string
	mu     sync.Mutex
	all    []string
}

// startTail runs "cycled tail" with args and returns once it follows the stream.
func startTail(t *testing.T, args ...string) *tailProc {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"tail"}, args...)...)
	cmd.Env = append(cmd.Environ(), "NO_COLOR=") // colour is decided by the output, a pipe here
	p := &tailProc{t: t, cmd: cmd, stdout: make(chan string, 1024), stderr: make(chan string, 1024)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	for pipe, ch := range map[*bufio.Scanner]chan string{bufio.NewScanner(out): p.stdout, bufio.NewScanner(errPipe): p.stderr} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for pipe.Scan() {
				p.mu.Lock()
				p.all = append(p.all, pipe.Text())
				p.mu.Unlock()
				ch <- pipe.Text()
			}
		}()
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		readers.Wait()
		_ = cmd.Wait()
	})
	p.expect(p.stderr, "cycled tail: following ")
	return p
}

// expect waits for a line on ch containing want, and returns it; lines before it are
// skipped.
func (p *tailProc) expect(ch chan string, want string) string {
	p.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-ch:
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("no line with %q; the output:\n%s", want, strings.Join(p.all, "\n"))
		}
	}
}

// next returns the next line on ch.
func (p *tailProc) next(ch chan string) string {
	p.t.Helper()
	select {
	case l := <-ch:
		return l
	case <-time.After(10 * time.Second):
		p.t.Fatal("no line")
		return ""
	}
}

// TestTail runs "cycled tail" against the real daemon in step mode: a line per tick with
// only the modules off nominal, an emergency's line, the --module, --severity and --json
// filters, no colour on a pipe, and a daemon restart that it reconnects to and recognises.
func TestTail(t *testing.T) {
	addr := freeAddr(t)
	cfg := write(t, "cycled.yaml", fmt.Sprintf(tailConfig, addr, t.TempDir()))
	d := start(t, nil, "--config", cfg)
	all := startTail(t, "--addr", "http://"+addr)
	onlyRecall := startTail(t, "--addr", addr, "--module", "recall", "--json")
	critical := startTail(t, "--addr", addr, "--severity", "critical")
	step := func(d *daemon) {
		t.Helper()
		if st := d.do("POST", "/ticks", "", nil); st != 200 {
			t.Fatalf("POST /ticks: %d", st)
		}
	}
	faults := func(module, body string) {
		t.Helper()
		if st := d.do("POST", "/modules/"+module+"/faults", body, nil); st != 200 {
			t.Fatalf("faults %s: %d", module, st)
		}
	}

	step(d) // 1: nominal
	l := all.expect(all.stdout, "tick 1 ")
	if !strings.Contains(l, " ok wall ") || !strings.Contains(l, " lag ") || strings.Contains(l, "guard") || strings.Contains(l, "\x1b[") {
		t.Errorf("nominal tick: %q", l)
	}

	faults("recall", `{"fail_rate": 1}`)
	step(d) // 2: recall fails
	l = all.expect(all.stdout, "tick 2 ")
	if !strings.Contains(l, " degraded ") || !strings.Contains(l, "recall=failed/") || !strings.Contains(l, "served=last_good,stale") ||
		strings.Contains(l, "guard=") || strings.Contains(l, "plan=") {
		t.Errorf("tick with a failed module: %q", l)
	}

	faults("guard", `{"fail_rate": 1}`)
	step(d) // 3: the safety tier fails: emergency
	all.expect(all.stdout, "EMERGENCY entered at tick 3")
	l = all.expect(all.stdout, "tick 3 ")
	if !strings.Contains(l, " critical ") || !strings.Contains(l, "guard=failed/") {
		t.Errorf("emergency tick: %q", l)
	}
	faults("guard", `{"reset": true}`)
	faults("recall", `{"reset": true}`)
	step(d) // 4: healthy again: emergency left (recover_after 1)
	all.expect(all.stdout, "emergency left at tick 4")
	all.expect(all.stdout, "tick 4 ")

	// --module recall --json: the summary of tick 2 only, as JSON (in tick 3 the emergency
	// skipped recall's tier: skipped is nominal).
	for _, want := range []uint64{2} {
		var s struct {
			TickID  uint64 `json:"tick_id"`
			Modules []struct{ Name, Status string }
		}
		line := onlyRecall.next(onlyRecall.stdout)
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.TickID != want || len(s.Modules) != 3 {
			t.Fatalf("--module recall --json: want tick %d, got %q (%v)", want, line, err)
		}
	}
	// --severity critical: tick 3 only (and the emergency's lines).
	for l := critical.next(critical.stdout); !strings.Contains(l, " tick 3 critical "); l = critical.next(critical.stdout) {
		if strings.Contains(l, " tick 1 ") || strings.Contains(l, " tick 2 ") {
			t.Errorf("--severity critical showed %q", l)
		}
	}

	// A restart: the tail says it lost the daemon, reconnects, and recognises a new run.
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	all.expect(all.stderr, "reconnecting in")
	d = start(t, nil, "--config", cfg)
	all.expect(all.stderr, "cycled tail: following ")
	step(d)
	all.expect(all.stderr, "the daemon restarted")
	all.expect(all.stdout, "tick 1 ")

	// A reload that changes the configuration: a line of its own.
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.Replace(string(b), "http:", "  - {name: extra, tier: planning, builtin: {value: 2}}\nhttp:", 1)
	if err := os.WriteFile(cfg, []byte(extra), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := d.do("POST", "/config/reload", "", nil); st != 200 {
		t.Fatalf("reload: %d", st)
	}
	step(d)
	all.expect(all.stdout, "configuration generation")
	onlyRecall.mu.Lock()
	defer onlyRecall.mu.Unlock()
	for _, l := range onlyRecall.all {
		if strings.HasPrefix(l, "{") && (strings.Contains(l, `"tick_id":3`) || strings.Contains(l, `"tick_id":4`)) {
			t.Errorf("--module recall passed a tick where recall was nominal: %.60s…", l)
		}
	}
}

// TestTailColour checks when "cycled tail" colours its lines: only on a terminal, and not
// with NO_COLOR set.
func TestTailColour(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noColor string
		w       func(t *testing.T) io.Writer
		want    bool
	}{
		{"buffer", "", func(*testing.T) io.Writer { return &bytes.Buffer{} }, false},
		{"regular file", "", func(t *testing.T) io.Writer { return tempFile(t) }, false},
		{"terminal with NO_COLOR", "1", func(t *testing.T) io.Writer { return tempFile(t) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tc.noColor)
			if got := useColor(tc.w(t)); got != tc.want {
				t.Errorf("useColor = %v, want %v", got, tc.want)
			}
		})
	}
	tl := &tailer{o: tailOptions{color: true}}
	if got := tl.paint(colorRed, "critical"); got != "\x1b[31mcritical\x1b[0m" {
		t.Errorf("paint with colour: %q", got)
	}
	tl.o.color = false
	if got := tl.paint(colorRed, "critical"); got != "critical" {
		t.Errorf("paint without colour: %q", got)
	}
}

func tempFile(t *testing.T) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
