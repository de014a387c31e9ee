package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

func okCmd(_, out string, code int) error { return ok(out, code) }

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
		{cmd: regexp.MustCompile(`^go install \./cmd/cycled`), timeout: 0, check: func(_, out string, code int) error {
			if _, err := os.Stat(filepath.Join(gopath, "bin", "cycled")); err != nil {
				return fmt.Errorf("exit %d, no cycled in $GOPATH/bin: %v", code, err)
			}
			return ok(out, code)
		}},
		{cmd: regexp.MustCompile(`^export PATH=`), check: okCmd},
		{cmd: regexp.MustCompile(`^cd examples/python-module`), check: okCmd},
		{cmd: regexp.MustCompile(`^cycled run --config cycled\.yaml &`), check: func(_, out string, code int) error {
			return docPollUntil(15*time.Second, "the daemon to tick", func() bool { return getJSON(base+"/readyz", nil) == 200 })
		}},
		{cmd: regexp.MustCompile(`python3 module\.py &`), check: func(_, out string, code int) error {
			return docPollUntil(15*time.Second, "py-recall to run", func() bool {
				var m module
				return getJSON(base+"/modules/py-recall", &m) == 200 && m.Last != nil && m.Last.Status == "ok"
			})
		}},
		{cmd: regexp.MustCompile(`^curl -s localhost:8080/modules/py-recall`), timeout: 5 * time.Second, check: func(_, out string, code int) error {
			var m module
			if err := json.Unmarshal([]byte(jsonPart(out)), &m); err != nil || m.Last == nil || m.Last.Status != "ok" {
				return fmt.Errorf("want the module with \"status\": \"ok\" (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`^curl -s localhost:8080/blackboard/py-recall\.result`), timeout: 5 * time.Second, check: func(_, out string, code int) error {
			var e struct {
				Value struct {
					Clear  map[string]any `json:"clear"`
					Source string         `json:"source"`
				} `json:"value"`
			}
			if err := json.Unmarshal([]byte(jsonPart(out)), &e); err != nil || e.Value.Source != "live" || e.Value.Clear["obstacles"] != 0.0 {
				return fmt.Errorf("want {\"value\": {\"clear\": {\"obstacles\": 0}, \"source\": \"live\"}} (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`^kill %2; wait %2; kill %1`), check: func(_, out string, code int) error {
			if !strings.Contains(out, "deregistered py-recall") {
				return fmt.Errorf("the module did not print \"deregistered py-recall\"")
			}
			return docPollUntil(10*time.Second, "the daemon to stop", func() bool { return getJSON(base+"/healthz", nil) == 0 })
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

// docPollUntil polls cond until it holds or timeout passes.
func docPollUntil(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		<-time.After(50 * time.Millisecond)
	}
	return nil
}

// startDaemonCmd matches a documented command that starts the daemon in the background.
var startDaemonCmd = regexp.MustCompile(`^(go run \./cmd/cycled|cycled|\./bin/cycled|bin/cycled)( run)?( [^&]*)?&$`)

// TestReadmeFirstTenSeconds pastes the commands of README.md's section headed "… first
// ten seconds …" (its ```sh blocks) into one shell, on the embedded demo, and checks that
// each gives what the README says. The section's contract, for the README's writers:
//   - commands one a line in ```sh blocks; a trailing "# comment" says what it shows;
//   - the daemon is started in the background by `go run ./cmd/cycled &` (or `cycled &`,
//     `cycled run &`); without such a line the test starts it as the README's opening does;
//   - every other command must match a check below (the test fails on one it does not
//     know), and localhost:8080 is rewritten to the test's port;
//   - a long-poll `?after=N&wait=D` must answer tick N+1 when D is long enough for it
//     (the demo ticks at 10 Hz: tick 101 exists 10 s after the start).
func TestReadmeFirstTenSeconds(t *testing.T) {
	needTools(t, "go", "curl", "jq", "bash", "timeout")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := docCommands(string(md), regexp.MustCompile(`(?i)first ten seconds`))
	if err != nil {
		t.Fatal(err)
	}
	started := false
	for _, c := range cmds {
		started = started || startDaemonCmd.MatchString(strings.TrimSpace(c))
	}
	if !started {
		cmds = append([]string{"go run ./cmd/cycled &"}, cmds...)
	}
	addr := freeLoopbackAddr(t)
	base := "http://" + addr
	sh := newShell(t, root, "CYCLED_HTTP_ADDR="+addr, "CYCLED_STATE_DIR="+t.TempDir(), "PATH="+filepath.Dir(binary(t))+":"+os.Getenv("PATH"))
	rewrite := rewriteAddr(addr)
	stream := func(c string) string {
		c = rewrite(c)
		if strings.Contains(c, "/ticks/stream") {
			c = "timeout 2 " + c // a stream never ends: two seconds of it
		}
		return c
	}
	driveDoc(t, sh, cmds, stream, readmeChecks(base))
}

// readmeChecks are what the README says of its first-ten-seconds commands.
func readmeChecks(base string) []docCheck {
	jsonOut := func(out string, code int, v any) error {
		if code != 0 {
			return fmt.Errorf("exit %d", code)
		}
		return json.Unmarshal([]byte(jsonPart(out)), v)
	}
	longPoll := regexp.MustCompile(`after=(\d+)`)
	longWait := regexp.MustCompile(`wait=([0-9.]+[a-z]*)`)
	tickIDOut := regexp.MustCompile(`"tick_id": ?(\d+)`)
	return []docCheck{
		{cmd: startDaemonCmd, check: func(string, string, int) error {
			return docPollUntil(60*time.Second, "the daemon's first tick", func() bool { return getJSON(base+"/readyz", nil) == 200 })
		}},
		{cmd: regexp.MustCompile(`^until curl -sf [^ ]*/readyz\b`), check: func(_, out string, code int) error {
			if err := ok(out, code); err != nil || getJSON(base+"/readyz", nil) != 200 {
				return fmt.Errorf("want the daemon ready once the wait ends (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`^until curl -s [^ ]*/emergency \| grep -q '"active":true'`), check: func(_, out string, code int) error {
			var e struct{ Active bool }
			if err := ok(out, code); err != nil || getJSON(base+"/emergency", &e) != 200 || !e.Active {
				return fmt.Errorf("want emergency mode once the wait ends (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`/ticks/latest\?.*(after=.*wait=|wait=.*after=)`), check: func(cmd, out string, code int) error {
			after, _ := strconv.ParseUint(longPoll.FindStringSubmatch(cmd)[1], 10, 64)
			var w []string
			if w = longWait.FindStringSubmatch(cmd); w == nil {
				return fmt.Errorf("no wait= in %q", cmd)
			}
			wait, err := parseDocWait(w[1])
			if err != nil {
				return err
			}
			var got uint64
			m := tickIDOut.FindStringSubmatch(out)
			if m == nil {
				return fmt.Errorf("want a tick id (exit %d): none in the answer", code)
			}
			got, err = strconv.ParseUint(m[1], 10, 64)
			switch {
			case err != nil || code != 0:
				return fmt.Errorf("want a tick id (exit %d): %v", code, err)
			case got == after+1:
				return nil
			case wait < 15*time.Second && got <= after:
				return nil // a wait too short for tick after+1 answers the latest: true, but say 30s in the README
			}
			return fmt.Errorf("long-poll after=%d answered tick %d, want %d", after, got, after+1)
		}},
		{cmd: regexp.MustCompile(`/ticks/latest.*select\(\.name=="memory_recall"\)`), timeout: 10 * time.Second, check: func(_, out string, code int) error {
			var m struct {
				Name, Status string
			}
			if err := jsonOut(out, code, &m); err != nil || m.Name != "memory_recall" || m.Status != "retried" {
				return fmt.Errorf("want memory_recall with status retried (its first attempt fails every tick): %+v %v", m, err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`/ticks/latest`), check: func(_, out string, code int) error {
			var s struct {
				TickID uint64 `json:"tick_id"`
			}
			if err := jsonOut(out, code, &s); err != nil || s.TickID == 0 {
				return fmt.Errorf("want a summary with its tick_id: %v", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`/ticks/stream`), check: func(_, out string, code int) error {
			if code != 124 && code != 0 || !strings.Contains(out, "event: tick") || !strings.Contains(out, "data: {") {
				return fmt.Errorf("want SSE tick events (exit %d)", code)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`/modules/memory_recall(\s|$)`), check: func(_, out string, code int) error {
			var m struct {
				Name    string
				Breaker struct{ Name string }
			}
			if err := jsonOut(out, code, &m); err != nil || m.Name != "memory_recall" || m.Breaker.Name != "memory-store" {
				return fmt.Errorf("want memory_recall with its breaker memory-store: %+v %v", m, err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`localhost:8080/emergency(\s|$)|/emergency(\s|$)`), check: func(_, out string, code int) error {
			var e struct {
				Active *bool
			}
			if err := jsonOut(out, code, &e); err != nil || e.Active == nil {
				return fmt.Errorf("want the emergency state with its active flag: %v", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`/breakers`), check: func(_, out string, code int) error {
			if err := ok(out, code); err != nil || !strings.Contains(out, `"memory-store"`) {
				return fmt.Errorf("want every breaker, memory-store among them (%v)", err)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`/modules/collision_guard/faults .*"fail_rate": ?1`), check: func(_, out string, code int) error {
			if err := ok(out, code); err != nil {
				return err
			}
			return docPollUntil(5*time.Second, "emergency mode", func() bool {
				var e struct{ Active bool }
				return getJSON(base+"/emergency", &e) == 200 && e.Active
			})
		}},
		{cmd: regexp.MustCompile(`/modules/collision_guard/faults .*"reset": ?true`), check: func(_, out string, code int) error {
			if err := ok(out, code); err != nil || !strings.Contains(out, "collision_guard") {
				return fmt.Errorf("want the module's faults answered (%v)", err)
			}
			return nil
		}},
	}
}

// parseDocWait parses a documented wait= value: a duration or seconds.
func parseDocWait(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	return time.Duration(f * float64(time.Second)), err
}

// jsonPart returns out from its first line that opens a JSON object or array: a
// background job (the daemon, a module) may print a line of its own before it, as in a
// terminal.
func jsonPart(out string) string {
	for i, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "{") || strings.HasPrefix(l, "[") {
			return strings.Join(strings.SplitAfter(out, "\n")[i:], "")
		}
	}
	return out
}

// TestReadmeSimulation pastes the commands of README.md's section "Rehearse on virtual
// time" into a shell and checks that each gives what the README says of it.
func TestReadmeSimulation(t *testing.T) {
	needTools(t, "go", "bash", "tail")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := docCommands(string(md), regexp.MustCompile(`(?i)rehearse on virtual time`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("the section shows no command")
	}
	sh := newShell(t, root, "CYCLED_STATE_DIR="+t.TempDir())
	driveDoc(t, sh, cmds, func(c string) string { return c }, []docCheck{
		{cmd: regexp.MustCompile(`sim --for 10m`), timeout: 2 * time.Minute, check: func(_, out string, code int) error {
			if code != 0 || !strings.Contains(out, "6000 ticks") || !strings.Contains(out, "memory-store: opened") {
				return fmt.Errorf("want the report of 6000 ticks with the demo's breaker openings (exit %d): %.300s", code, out)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`sim --ticks 600 --out - .*\| tail -n 1`), timeout: 2 * time.Minute, check: func(_, out string, code int) error {
			var s struct {
				Schema string
				TickID uint64 `json:"tick_id"`
			}
			if err := json.Unmarshal([]byte(jsonPart(out)), &s); code != 0 || err != nil || s.TickID != 600 || s.Schema != "cycled.fault_summary/v1" {
				return fmt.Errorf("want the summary of tick 600 as one JSON line (exit %d, %v): %.300s", code, err, out)
			}
			return nil
		}},
		{cmd: regexp.MustCompile(`advise --sim`), timeout: 2 * time.Minute, check: func(_, out string, code int) error {
			if code != 0 || !strings.Contains(out, "No change proposed") {
				return fmt.Errorf("want no change proposed for the demo (exit %d): %.300s", code, out)
			}
			return nil
		}},
	})
}

// readmeFailed marks, in the session's output, a command of a pasted block that failed.
const readmeFailed = "__readme_command_failed__"

// TestReadmeBlocksPastedWhole pastes every ```sh block of README.md, whole, into one bash
// session, one block after the other, as a user copying each block into a terminal does:
// nothing waits between the lines but what the block itself waits for. go run ./cmd/cycled
// is the built binary and localhost:8080 the test's address; the session runs in an empty
// directory (./cycled-state is its own). Every command must succeed (an ERR trap reports
// the first that fails: a curl before the daemon listens, a replay without a recorder), the
// emergency block must show emergency mode, and the recorder block must show a timeline.
// The block that holds make test is the one skipped: it is the test command itself.
func TestReadmeBlocksPastedWhole(t *testing.T) {
	needTools(t, "curl", "bash", "grep", "head")
	bin := binary(t)
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	rewrite := rewriteAddr(addr)
	sh := newShell(t, t.TempDir(), "CYCLED_HTTP_ADDR="+addr) // the daemon the blocks start listens there
	sh.run(`trap 'echo "`+readmeFailed+` rc=$?: $BASH_COMMAND"' ERR`, time.Minute)
	ran := 0
	var all strings.Builder
	for _, block := range shBlocks(string(md)) {
		if regexp.MustCompile(`(?m)^make test\b`).MatchString(block) {
			continue
		}
		ran++
		out, _ := sh.run(strings.ReplaceAll(rewrite(block), "go run ./cmd/cycled", bin), 2*time.Minute)
		all.WriteString(out)
		if i := strings.Index(out, readmeFailed); i >= 0 {
			line, _, _ := strings.Cut(out[i:], "\n")
			t.Errorf("README block, pasted whole, failed at %s\nblock:\n%s\noutput:\n%s", line, block, out)
		}
	}
	if ran < 4 {
		t.Fatalf("%d sh blocks of README.md run, want the first ten seconds, the emergency, the simulation and the recorder", ran)
	}
	out := all.String()
	for _, want := range []string{`"active":true`, `"tick_id":101`, "memory_recall", "event: tick"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's blocks, pasted whole, never printed %q", want)
		}
	}
	if strings.Contains(out, "no recorder database") {
		t.Error("cycled replay after the recorder block found no recorder database")
	}
}
