package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file drives documented shell commands as a user pasting them would: the commands
// of the ```sh blocks of a Markdown section run one by one in one bash session (so that
// `&` jobs, `cd` and `export` carry over), and each command's output is checked against
// what the document says of it (a table of checks per document).

// docCommands returns the commands of the ```sh (or bash, shell, console) fenced blocks
// in the section of md whose heading matches heading, up to the next heading of the same
// or a higher level: one command a line, a line ending in '\' continuing on the next,
// blank lines and whole-line comments skipped.
func docCommands(md string, heading *regexp.Regexp) ([]string, error) {
	lines := strings.Split(md, "\n")
	level, start := 0, -1
	for i, l := range lines {
		if h := strings.TrimLeft(l, "#"); h != l && strings.HasPrefix(h, " ") && heading.MatchString(h) {
			level, start = len(l)-len(h), i+1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no heading matching %q", heading)
	}
	var cmds []string
	in, cont := false, ""
	for _, l := range lines[start:] {
		t := strings.TrimSpace(l)
		if !in {
			if h := strings.TrimLeft(l, "#"); h != l && strings.HasPrefix(h, " ") && len(l)-len(h) <= level {
				break // the next section
			}
			if lang, ok := strings.CutPrefix(t, "```"); ok {
				in = lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
			}
			continue
		}
		if t == "```" {
			in = false
			continue
		}
		if t == "" || (cont == "" && strings.HasPrefix(t, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(t, "\\"); ok {
			cont += c + " "
			continue
		}
		cmds = append(cmds, strings.TrimPrefix(cont+t, "$ "))
		cont = ""
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("no sh commands under the heading matching %q", heading)
	}
	return cmds, nil
}

// shell is one bash session fed commands on its stdin.
type shell struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	n   int
	log string // file collecting background jobs' stderr
}

const shellMarker = "__cycled_test_rc__"

// newShell starts bash in dir with env added to the environment (CYCLED_ variables
// removed first), in its own process group, killed at the end of the test.
func newShell(t *testing.T, dir string, env ...string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CYCLED_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &shell{t: t, cmd: cmd, in: in, out: bufio.NewReader(pr), log: filepath.Join(t.TempDir(), "jobs.log")}
	cmd.WaitDelay = 2 * time.Second // a job that keeps the output pipe open is not waited for
	t.Cleanup(func() {
		// Jobs run in process groups of their own (set -m): kill every group the session
		// started, then the session's own.
		fmt.Fprintln(in, "for p in $(jobs -p); do kill -9 -- -$p 2>/dev/null; done; exit")
		in.Close()
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, s.out); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		pw.Close()
		cmd.Wait()
	})
	s.run("set -m", time.Minute) // job control: %1, %2 as when pasted into a terminal
	return s
}

// run runs one command and returns its output (stdout and stderr) and exit code; a
// command still running after timeout fails the test.
func (s *shell) run(command string, timeout time.Duration) (string, int) {
	s.t.Helper()
	s.n++
	marker := fmt.Sprintf("%s%d:", shellMarker, s.n)
	if _, err := fmt.Fprintf(s.in, "%s\necho; echo \"%s$?\"\n", command, marker); err != nil {
		s.t.Fatalf("write to the shell: %v", err)
	}
	type result struct {
		out  string
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := s.out.ReadString('\n')
			if err != nil {
				done <- result{b.String(), -1, err}
				return
			}
			if rest, ok := strings.CutPrefix(line, marker); ok {
				code, _ := strconv.Atoi(strings.TrimSpace(rest))
				done <- result{strings.TrimSuffix(b.String(), "\n"), code, nil}
				return
			}
			b.WriteString(line)
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			s.t.Fatalf("%s: the shell ended: %v\n%s", command, r.err, r.out)
		}
		return r.out, r.code
	case <-time.After(timeout):
		s.t.Fatalf("%s: still running after %s", command, timeout)
		return "", -1
	}
}

// docCheck is what a document says of the commands matching cmd: check returns nil when
// the output (and the daemon's state) is what it says. A check that fails is retried
// until timeout, running the command again (the document describes a state reached
// within seconds, as a user pasting the commands one by one sees it).
type docCheck struct {
	cmd     *regexp.Regexp
	timeout time.Duration
	check   func(cmd, out string, code int) error
}

// driveDoc runs the commands of a document's section in sh, each checked by the first
// docCheck whose cmd matches it; a command no check matches fails the test (the table
// must say what every documented command gives).
func driveDoc(t *testing.T, sh *shell, cmds []string, rewrite func(string) string, checks []docCheck) {
	t.Helper()
	for _, c := range cmds {
		var dc *docCheck
		for i := range checks {
			if checks[i].cmd.MatchString(c) {
				dc = &checks[i]
				break
			}
		}
		if dc == nil {
			t.Errorf("documented command %q has no check in the test: add one", c)
			continue
		}
		run := rewrite(c)
		if bg, ok := strings.CutSuffix(strings.TrimSpace(run), "&"); ok {
			// A background job's log goes to a file: in a terminal it scrolls by, here it
			// would mix with the next commands' output.
			run = bg + " 2>>" + sh.log + " &"
		}
		deadline := time.Now().Add(dc.timeout)
		for {
			out, code := sh.run(run, time.Minute)
			err := dc.check(run, out, code)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || strings.HasSuffix(strings.TrimSpace(c), "&") {
				jobs, _ := os.ReadFile(sh.log)
				t.Errorf("documented command %q (run as %q): %v\noutput:\n%s\nbackground jobs' stderr:\n%s", c, run, err, out, jobs)
				break
			}
			<-time.After(100 * time.Millisecond) // polling for the documented state, up to its deadline
		}
	}
}

// freeLoopbackAddr returns a loopback address with a port free at the time of the call.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// shBlocks returns the text of every ```sh fenced block of md, in order.
func shBlocks(md string) []string {
	var blocks []string
	var cur []string
	in := false
	for l := range strings.Lines(md) {
		t := strings.TrimSpace(l)
		switch {
		case !in && t == "```sh":
			in, cur = true, nil
		case in && t == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, ""))
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}
