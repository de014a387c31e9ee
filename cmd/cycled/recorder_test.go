package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
)

const recorderConfig = `
cycle: {period: 10ms}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    builtin: {value: 1, fail_attempts: 1}
http: {addr: 127.0.0.1:0}
recorder: {enabled: true, flush: 100ms}
state_dir: STATE
`

// Killed with SIGKILL at random moments, the daemon at 100 Hz keeps a sound database:
// integrity holds, ids increase across restarts without repeating any id a client saw,
// and a kill loses at most recorder.flush plus one tick of records.
func TestRecorderSurvivesSIGKILL(t *testing.T) {
	state := t.TempDir()
	cfg := write(t, "rec.yaml", strings.ReplaceAll(recorderConfig, "STATE", state))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	const period, flush = 10 * time.Millisecond, 100 * time.Millisecond
	maxLost := uint64(flush/period) + 1
	var prevMax uint64 // the highest id recorded or seen before this run
	for kill := range 20 {
		d := start(t, nil, "--config", cfg)
		first, seen := pollUntil(d, time.Now().Add(time.Duration(100+rng.IntN(500))*time.Millisecond))
		if err := d.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-d.exited
		if first <= prevMax {
			t.Fatalf("kill %d: the run's first tick seen is %d, not after %d", kill, first, prevMax)
		}
		rp := check(t, state)
		if !rp.OK() {
			t.Fatalf("kill %d: integrity %v", kill, rp.Integrity)
		}
		// The run's own last record: a run killed before its first commit of a tick has
		// none (the database's newest tick is then the previous run's, a lease below).
		recorded := first - 1
		if rp.LastTick >= first {
			recorded = rp.LastTick
		}
		if seen > recorded+maxLost { // (ticks after the last poll, before the kill, may be recorded too)
			t.Fatalf("kill %d: ticks %d..%d seen, last recorded %d: more than %d ticks lost", kill, first, seen, rp.LastTick, maxLost)
		}
		prevMax = max(seen, rp.LastTick)
	}
	rd, err := sqlite.OpenReader(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	metas, err := rd.Metas(context.Background(), 0, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]bool{}
	for i, m := range metas {
		if i > 0 && m.ID <= metas[i-1].ID {
			t.Fatalf("ids not strictly increasing: %d after %d", m.ID, metas[i-1].ID)
		}
		if i > 0 && m.RunID != metas[i-1].RunID && runs[m.RunID] {
			t.Fatalf("run %s resumes after another run: ids of two runs interleave", m.RunID)
		}
		runs[m.RunID] = true
	}
	starts, err := rd.Events(context.Background(), recorder.EventQuery{Kind: recorder.KindStart})
	if err != nil {
		t.Fatal(err)
	}
	// A run killed before its first commit of a tick has no ticks, but its start is
	// recorded when it opens the database.
	if len(starts) != 20 || len(runs) > 20 {
		t.Fatalf("%d runs started, %d with ticks; want 20 and at most 20", len(starts), len(runs))
	}
}

// pollUntil polls GET /ticks/latest until deadline and returns the first and last tick
// ids seen.
func pollUntil(d *daemon, deadline time.Time) (first, last uint64) {
	for first == 0 || time.Now().Before(deadline) {
		var s summary
		if d.do("GET", "/ticks/latest", "", &s) == 200 {
			if first == 0 {
				first = s.TickID
			}
			last = s.TickID
		}
	}
	return first, last
}

func check(t *testing.T, state string) recorder.Report {
	t.Helper()
	rd, err := sqlite.OpenReader(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rp, err := rd.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

// A state_dir the recorder cannot create is a clear error naming the path at start.
func TestRecorderUnwritableStateDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(file, "state")
	cfg := write(t, "rec.yaml", strings.ReplaceAll(recorderConfig, "STATE", state))
	var stderr bytes.Buffer
	cmd := exec.Command(binary(t), "--config", cfg)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v; want 1\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), state) || !strings.Contains(stderr.String(), "state_dir") {
		t.Fatalf("the error does not name state_dir %s:\n%s", state, stderr.String())
	}
}

// After a clean stop, ids continue at the next one; replay and check read the database.
func TestRecorderRestartReplayCheck(t *testing.T) {
	state := t.TempDir()
	cfg := write(t, "rec.yaml", strings.ReplaceAll(strings.Replace(recorderConfig, "period: 10ms", "period: 0", 1), "STATE", state))
	d := start(t, nil, "--config", cfg)
	var s summary
	for range 3 {
		d.do("POST", "/ticks", "{}", &s)
	}
	if code, _ := d.stop(); code != 0 || s.TickID != 3 {
		t.Fatalf("exit %d after tick %d", code, s.TickID)
	}
	d = start(t, nil, "--config", cfg)
	d.do("POST", "/ticks", "{}", &s)
	if s.TickID != 4 {
		t.Fatalf("after a restart the first tick is %d; want 4", s.TickID)
	}
	var old struct {
		TickID uint64 `json:"tick_id"`
		RunID  string `json:"run_id"`
	}
	if code := d.do("GET", "/ticks/2", "", &old); code != 200 || old.TickID != 2 || old.RunID == "" {
		t.Fatalf("GET /ticks/2 of the previous run: %d %+v", code, old)
	}
	d.stop()
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--state", state}, &out, &errb); code != 0 {
		t.Fatalf("replay: %d %s", code, errb.String())
	}
	text := out.String()
	for _, want := range []string{"tick 1 ", "recall", "retried", "recorder_started", "recorder_stopped"} {
		if !strings.Contains(text, want) {
			t.Errorf("replay lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if code := run([]string{"recorder", "check", "--state", state}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "integrity: ok") || !strings.Contains(out.String(), "ticks: 4 (1..4)") {
		t.Fatalf("check: %d\n%s%s", code, out.String(), errb.String())
	}
}
