package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// runCmd runs the program in-process and returns its exit code and outputs.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// clearEnv unsets every CYCLED_ variable for the test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CYCLED_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, "version")
	if code != 0 || !strings.HasPrefix(out, "cycled ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestUsage(t *testing.T) {
	if code, _, errOut := runCmd(t, "frobnicate"); code != exitUsage || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	for _, h := range []string{"help", "-h", "--help"} { // the program's usage, with its subcommands
		if code, out, _ := runCmd(t, h); code != 0 || !strings.Contains(out, "cycled validate") {
			t.Fatalf("%s: %d %q", h, code, out)
		}
	}
	if code, _, _ := runCmd(t, "run", "--no-such-flag"); code != exitUsage {
		t.Fatalf("bad flag: %d", code)
	}
	if code, _, _ := runCmd(t, "validate", "a.yaml", "b.yaml"); code != exitUsage {
		t.Fatalf("two files: %d", code)
	}
}

// TestFlagErrorsAndHelp: a bad flag prints the error and the command's usage on stderr
// and exits 2; --help prints the usage on stdout and exits 0; validate lists only the
// flag it uses.
func TestFlagErrorsAndHelp(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		args     []string
		code     int
		stdout   []string // substrings
		stderr   []string
		noStdout bool
		absent   []string // in neither output
	}{
		{args: []string{"--bogus"}, code: exitUsage, stderr: []string{"unknown flag: --bogus", "Usage:", "--config"}, noStdout: true},
		{args: []string{"run", "--prot", "1"}, code: exitUsage, stderr: []string{"unknown flag: --prot", "cycled run [flags]"}, noStdout: true},
		{args: []string{"validate", "--confg", "x"}, code: exitUsage, stderr: []string{"unknown flag: --confg", "cycled validate"}, noStdout: true},
		{args: []string{"validate", "--period", "1s"}, code: exitUsage, stderr: []string{"unknown flag: --period"}, noStdout: true},
		{args: []string{"healthcheck", "--nope"}, code: exitUsage, stderr: []string{"unknown flag: --nope", "--url"}, noStdout: true},
		{args: []string{"run", "--help"}, code: exitOK, stdout: []string{"cycled run [flags]", "--http-addr", "--period"}},
		{args: []string{"validate", "--help"}, code: exitOK, stdout: []string{"--config"}, absent: []string{"--http-addr", "--log-level", "--period"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout %q\nstderr %q", code, tc.code, out, errOut)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.noStdout && out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			for _, w := range tc.absent {
				if strings.Contains(out+errOut, w) {
					t.Errorf("output mentions %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
}

const threeMistakes = `
cycle:
  period: 1 second
tiers:
  - name: safety
    budegt: 50ms
modules:
  - name: m
    tier: safety
    builtin: {fail_rate: 2}
`

func TestValidate(t *testing.T) {
	clearEnv(t)
	bad := write(t, "bad.yaml", threeMistakes)
	for _, args := range [][]string{{"validate", "--config", bad}, {"validate", bad}} {
		code, out, errOut := runCmd(t, args...)
		if code != exitError {
			t.Fatalf("%v: exit %d, want 1\n%s%s", args, code, out, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := []string{"cycle.period: ", "tiers[0].budegt: unknown key", "modules[0].builtin.fail_rate: "}
		if len(lines) != len(want) {
			t.Fatalf("%v: %d lines, want one per problem:\n%s", args, len(lines), out)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
			}
		}
		if !strings.Contains(errOut, "3 problem(s)") {
			t.Errorf("stderr %q", errOut)
		}
	}

	good := write(t, "good.yaml", "modules:\n  - {name: m, tier: safety, reads: [nobody.result]}\n")
	code, out, _ := runCmd(t, "validate", "--config", good)
	if code != 0 || !strings.Contains(out, "valid (5 tiers, 1 modules)") || !strings.Contains(out, "warning: modules[0].reads[0]") {
		t.Fatalf("good file: %d %q", code, out)
	}
	if code, out, _ := runCmd(t, "validate"); code != 0 || !strings.Contains(out, "embedded demo: valid") {
		t.Fatalf("demo: %d %q", code, out)
	}
	syntax := write(t, "syntax.yaml", "cycle: {period: [\n")
	if code, out, _ := runCmd(t, "validate", syntax); code != exitError || !strings.Contains(out, "invalid YAML") {
		t.Fatalf("syntax error: %d %q", code, out)
	}
	if code, out, _ := runCmd(t, "validate", filepath.Join(t.TempDir(), "missing.yaml")); code != exitError || !strings.Contains(out, "no such file") {
		t.Fatalf("missing file: %d %q", code, out)
	}
	// The environment applies, as it would to the daemon.
	t.Setenv("CYCLED_LOG_LEVEL", "loud")
	if code, out, _ := runCmd(t, "validate", good); code != exitError || !strings.Contains(out, "log.level") || !strings.Contains(out, "CYCLED_LOG_LEVEL") {
		t.Fatalf("env: %d %q", code, out)
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	if code, _, errOut := runCmd(t, "healthcheck", "--url", srv.URL+"/healthz"); code != 0 {
		t.Fatalf("healthy: %d %s", code, errOut)
	}
	status = http.StatusServiceUnavailable
	if code, _, _ := runCmd(t, "healthcheck", "--url", srv.URL+"/healthz"); code != exitError {
		t.Fatalf("unhealthy: %d", code)
	}
	t.Setenv("CYCLED_HTTP_ADDR", strings.TrimPrefix(srv.URL, "http://"))
	status = http.StatusOK
	if code, _, errOut := runCmd(t, "healthcheck"); code != 0 {
		t.Fatalf("default URL from CYCLED_HTTP_ADDR: %d %s", code, errOut)
	}
}

func TestLocalAddr(t *testing.T) {
	for in, want := range map[string]string{
		"": "127.0.0.1:8080", "0.0.0.0:8080": "127.0.0.1:8080", ":9000": "127.0.0.1:9000",
		"[::]:80": "[::1]:80", "10.0.0.1:81": "10.0.0.1:81",
	} {
		if got := localAddr(in); got != want {
			t.Errorf("localAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRuntimeStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", []byte(`{"name": "a"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("b", []byte(`{"name": "b"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", []byte(`{"name": "a", "tier": "x"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}
	s2, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	saved := s2.Saved()
	var body bytes.Buffer
	if len(saved) == 1 {
		json.Compact(&body, saved[0].Body)
	}
	if len(saved) != 1 || saved[0].Name != "a" || body.String() != `{"name":"a","tier":"x"}` {
		t.Fatalf("saved %+v", saved)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
	// No state_dir: nothing is written.
	none, _ := openStore("")
	if err := none.Put("a", []byte(`{}`)); err != nil || len(none.Saved()) != 0 {
		t.Fatal("a store without a directory kept something")
	}
}

// A registration whose save failed is forgotten: the next successful save does not
// write it.
func TestRuntimeStorePutFailureForgets(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("lost", []byte(`{"name": "lost"}`)); err == nil {
		t.Fatal("Put into a state_dir that is a file succeeded")
	}
	if got := s.Saved(); len(got) != 0 {
		t.Fatalf("a failed Put kept %+v", got)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("kept", []byte(`{"name": "kept"}`)); err != nil {
		t.Fatal(err)
	}
	s2, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Saved(); len(got) != 1 || got[0].Name != "kept" {
		t.Fatalf("saved %+v, want only kept", got)
	}
}

func TestRuntimeStoreCorruptFileMovedAside(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":        "{not json",
		"truncated":      `{"version": 1, "modules": [{"name": "a", "body": {"name": "a"`,
		"null":           "null",
		"wrong version":  `{"version": 7, "modules": []}`,
		"unknown field":  `{"version": 1, "modules": [], "extra": 1}`,
		"no name":        `{"version": 1, "modules": [{"body": {}}]}`,
		"duplicate":      `{"version": 1, "modules": [{"name": "a", "body": {}}, {"name": "a", "body": {}}]}`,
		"body not obj":   `{"version": 1, "modules": [{"name": "a", "body": 3}]}`,
		"trailing data":  `{"version": 1, "modules": []} {}`,
		"empty file":     ``,
		"binary garbage": "\x00\xff\xfe",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, stateFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := openStore(dir)
			if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "moved aside to") {
				t.Fatalf("openStore = %v, want a corrupt-file error naming where it went", err)
			}
			if len(s.Saved()) != 0 {
				t.Fatalf("restored %v from a corrupt file", s.Saved())
			}
			matches, _ := filepath.Glob(path + ".corrupt-*")
			if len(matches) != 1 || !strings.Contains(err.Error(), matches[0]) {
				t.Fatalf("moved aside to %v; error %v", matches, err)
			}
			if b, _ := os.ReadFile(matches[0]); string(b) != content {
				t.Fatalf("the corrupt file's content was not kept: %q", b)
			}
			// The store works: a new registration writes a fresh file next to the old one.
			if err := s.Put("b", []byte(`{"name": "b"}`)); err != nil {
				t.Fatal(err)
			}
			s2, err := openStore(dir)
			if err != nil || len(s2.Saved()) != 1 {
				t.Fatalf("reopen: %v %v", err, s2.Saved())
			}
			if b, _ := os.ReadFile(matches[0]); string(b) != content {
				t.Fatal("the moved-aside file was touched")
			}
		})
	}
}

func TestRuntimeStoreUnreadableFileNotOverwritten(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be: it cannot be read, so the store must not
	// replace it either.
	if err := os.Mkdir(filepath.Join(dir, stateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := openStore(dir)
	if err == nil || !strings.Contains(err.Error(), "not overwritten") {
		t.Fatalf("openStore = %v", err)
	}
	if err := s.Put("a", []byte(`{"name": "a"}`)); err == nil {
		t.Fatal("a store whose file cannot be read wrote anyway")
	}
	// The failed Put kept nothing: there is nothing to delete, and nothing is written.
	if err := s.Delete("a"); err != nil || len(s.Saved()) != 0 {
		t.Fatalf("Delete after a failed Put: %v, saved %+v", err, s.Saved())
	}
	if fi, err := os.Stat(filepath.Join(dir, stateFile)); err != nil || !fi.IsDir() {
		t.Fatalf("the unreadable path was replaced: %v", err)
	}
}

// TestBuildInfo: the ldflags version and commit reach both `cycled version` and the
// cycled_build_info metric.
func TestBuildInfo(t *testing.T) {
	oldV, oldC := version, commit
	t.Cleanup(func() { version, commit = oldV, oldC })
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"

	if code, out, _ := runCmd(t, "version"); code != 0 || !strings.HasPrefix(out, "cycled v1.2.3 (go") || !strings.Contains(out, "commit 0123456789ab)") {
		t.Errorf("version: %d %q", code, out)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoCollector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "cycled_build_info" {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["version"] != "v1.2.3" || labels["commit"] != commit || labels["goversion"] != runtime.Version() {
		t.Errorf("cycled_build_info = %v %v", m.GetGauge().GetValue(), labels)
	}
}

// TestCLI: the command line behaves like its peers' (cobra's conventions): --version,
// help COMMAND, a suggestion for a misspelled command, each command with only its own
// flags and a long help with an example, shell completion, and a top-level help that
// lists every command.
func TestCLI(t *testing.T) {
	clearEnv(t)
	if code, out, _ := runCmd(t, "--version"); code != exitOK || out != versionString()+"\n" {
		t.Errorf("--version = %d %q, want %q", code, out, versionString())
	}
	if code, out, _ := runCmd(t, "help", "sim"); code != exitOK || !strings.Contains(out, "cycled sim [flags]") || !strings.Contains(out, "--scenario") {
		t.Errorf("help sim = %d\n%s", code, out)
	}
	if code, out, errOut := runCmd(t, "simm"); code != exitUsage || out != "" || !strings.Contains(errOut, `unknown command "simm"`) || !strings.Contains(errOut, "Did you mean this?\n\tsim") {
		t.Errorf("a misspelled command = %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "recorder"); code != exitUsage || !strings.Contains(errOut, "give a subcommand: check, vacuum") {
		t.Errorf("recorder without a subcommand = %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "ha", "stat"); code != exitUsage || !strings.Contains(errOut, `unknown command "stat"`) {
		t.Errorf("ha with an unknown subcommand = %d, stderr %q", code, errOut)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if code, out, _ := runCmd(t, "completion", shell); code != exitOK || !strings.Contains(out, "cycled") || len(out) < 1000 {
			t.Errorf("completion %s = %d, %d bytes", shell, code, len(out))
		}
	}
	_, top, _ := runCmd(t, "--help")
	for _, want := range []string{"cycled healthcheck", "--metrics URL", "cycled completion bash|zsh|fish", "cycled help COMMAND"} {
		if !strings.Contains(top, want) {
			t.Errorf("the top-level help lacks %q", want)
		}
	}
	// Every command: a long help with an example, and only its own flags (the daemon's
	// configuration flags belong to run and to cycled alone).
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			return
		}
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "cycled")), "--help")
		code, out, _ := runCmd(t, args...)
		if code != exitOK || !strings.Contains(out, "Examples:\n  cycled") || c.Long == "" {
			t.Errorf("cycled %s = %d: want a long help with an example\n%s", strings.Join(args, " "), code, out)
		}
		daemon := c.Name() == "run" || !c.HasParent()
		for _, flag := range []string{"--http-addr", "--period", "--log-level"} {
			if strings.Contains(out, flag) != daemon {
				t.Errorf("cycled %s: lists %s: %v, want %v", strings.Join(args, " "), flag, !daemon, daemon)
			}
		}
	}
	walk(newRoot(io.Discard, io.Discard))
}
