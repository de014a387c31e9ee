package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cycled/cycled/daemon/recorder"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// rig is a step-mode engine recorded by a recorder on a real database.
type rig struct {
	t    *testing.T
	rec  *Recorder
	eng  *cycle.Engine
	fail atomic.Bool // while set, module "planner" fails (transient)
	sums []*faultsummary.Summary
}

func testTiers() []tiers.Tier {
	br := breaker.Settings{FailureThreshold: 2, Cooldown: time.Hour, HalfOpenSuccesses: 1}
	return []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1, Breaker: br},
		{Name: "planning", Budget: 50 * time.Millisecond, MaxAttempts: 1, Breaker: br},
	}
}

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	rec, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{t: t, rec: rec}
	t.Cleanup(func() { _ = rec.Close() })
	ok := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	planner := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
		if g.fail.Load() {
			return nil, fault.Transient(errors.New("planner down"))
		}
		return 2, nil
	})
	regs := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: ok},
		{Spec: tiers.ModuleSpec{Name: "planner", Tier: "planning"}, Module: planner},
	}
	eng, err := cycle.New(cycle.Config{Tiers: testTiers(), History: 8}, regs,
		cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()), cycle.WithGate(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	g.eng = eng
	return g
}

func (g *rig) tick(n int) {
	g.t.Helper()
	for range n {
		s, err := g.eng.Tick(context.Background())
		if err != nil {
			g.t.Fatal(err)
		}
		g.sums = append(g.sums, s)
	}
}

func (g *rig) close() {
	g.t.Helper()
	_ = g.eng.Close()
	if err := g.rec.Close(); err != nil {
		g.t.Fatal(err)
	}
}

func reader(t *testing.T, dir string) *Reader {
	t.Helper()
	rd, err := OpenReader(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rd.Close() })
	return rd
}

func ids(ts []recorder.Tick) []uint64 {
	out := make([]uint64, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestIDsContinueAfterRestart(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir})
	g.tick(5)
	run1 := g.rec.RunID()
	g.close()
	g = newRig(t, Options{Dir: dir})
	if g.rec.FirstTick() != 6 {
		t.Fatalf("after a clean stop at tick 5, first tick %d; want 6", g.rec.FirstTick())
	}
	g.tick(2)
	if g.sums[0].TickID != 6 || g.sums[0].RunID == run1 || g.sums[0].RunID != g.rec.RunID() {
		t.Fatalf("tick %d run %q (previous run %q)", g.sums[0].TickID, g.sums[0].RunID, run1)
	}
	g.close()
	got, err := reader(t, dir).Ticks(context.Background(), recorder.Query{Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 3, 4, 5, 6, 7}; !equal(ids(got), want) {
		t.Fatalf("recorded ids %v; want %v", ids(got), want)
	}
}

// A process that dies without Close has reserved LeaseTicks ids past its newest tick:
// the next one starts after them, never on an id the dead one may have published.
func TestLeaseCoversUnwrittenTicks(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir, Flush: time.Millisecond})
	g.tick(3)
	rd := reader(t, dir)
	waitPass(t, g.rec, func() bool { b, _ := rd.Tick(context.Background(), 3); return b != nil })
	rp, err := rd.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rp.NextTickID < 3+LeaseTicks {
		t.Fatalf("while running, a restart would start at %d; want past %d", rp.NextTickID, 3+LeaseTicks)
	}
	g.close()
	if rp, _ = rd.Check(context.Background()); rp.NextTickID != 4 || !rp.OK() {
		t.Fatalf("after Close: next id %d integrity %v; want 4, ok", rp.NextTickID, rp.Integrity)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitPass waits until cond holds, asking it again after each pass of rec's writer, which
// is what changes the database. The pass is taken before cond is asked: a pass that cond
// itself starts (a tick it records) then wakes the wait.
func waitPass(t *testing.T, rec *Recorder, cond func() bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		pass := rec.Committed()
		if cond() {
			return
		}
		select {
		case <-pass:
		case <-timeout:
			t.Fatal("condition not met within 30s")
		}
	}
}

// The recorded JSON is the summary's own encoding, and filters give the same ticks from
// the database as Filter.Match does on the summaries.
func TestFiltersMatchDatabase(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir})
	g.tick(3)
	g.fail.Store(true)
	g.tick(4) // failed, failed, then open, open
	g.fail.Store(false)
	g.tick(2)
	g.close()
	rd := reader(t, dir)
	mid := g.sums[4].StartedAt
	for _, f := range []recorder.Filter{
		{}, {Severity: faultsummary.Degraded}, {Severity: faultsummary.OK}, {Module: "planner"},
		{Module: "planner", Status: faultsummary.StatusFailed}, {Status: faultsummary.StatusOpen},
		{Module: "guard"}, {Since: mid}, {Until: mid}, {Since: mid, Severity: faultsummary.Degraded},
	} {
		got, err := rd.Ticks(context.Background(), recorder.Query{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var want []uint64
		for i := len(g.sums) - 1; i >= 0; i-- {
			if f.Match(g.sums[i]) {
				want = append(want, g.sums[i].TickID)
			}
		}
		if !equal(ids(got), want) {
			t.Errorf("filter %+v: database %v; memory %v", f, ids(got), want)
		}
	}
	if n, _ := rd.Ticks(context.Background(), recorder.Query{Filter: recorder.Filter{Module: "planner", Status: faultsummary.StatusFailed}}); len(n) != 2 {
		t.Errorf("planner failed in %d ticks; want 2", len(n))
	}
	b, err := rd.Tick(context.Background(), g.sums[5].TickID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(g.sums[5])
	if string(b) != string(want) {
		t.Errorf("recorded JSON differs from the summary's:\n%s\n%s", b, want)
	}
}

func TestLinesCarryOutcomeInputs(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir})
	g.fail.Store(true)
	g.tick(1)
	g.close()
	ls, err := reader(t, dir).Lines(context.Background(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Name != "planner" || ls[0].Status != "failed" || ls[0].FaultKind != "transient" ||
		ls[0].Attempts != 1 || ls[0].Abandoned || ls[0].Error == "" {
		t.Fatalf("lines %+v", ls)
	}
}

func TestEventsRecorded(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir})
	g.fail.Store(true)
	g.tick(2) // the planner's breaker opens
	g.rec.Event("admin", map[string]string{"route": "POST /breakers/{name}/reset", "token": "sha256:ab"})
	g.close()
	evs, err := reader(t, dir).Events(context.Background(), recorder.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	want := "recorder_started config_applied breaker admin recorder_stopped"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events %q; want %q", got, want)
	}
	if !strings.Contains(string(evs[2].Data), `"to":"open"`) || evs[2].TickID != 2 {
		t.Errorf("breaker event %s at tick %d", evs[2].Data, evs[2].TickID)
	}
	only, _ := reader(t, dir).Events(context.Background(), recorder.EventQuery{Kind: "admin", After: evs[1].ID})
	if len(only) != 1 || only[0].ID != evs[3].ID {
		t.Errorf("kind and after filter: %+v", only)
	}
}

func TestRetentionByCount(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir, KeepTicks: 10})
	g.fail.Store(true)
	g.tick(30)
	g.rec.retainNow(t)
	g.close()
	got, _ := reader(t, dir).Ticks(context.Background(), recorder.Query{Ascending: true})
	if len(got) != 10 || got[0].ID != 21 || got[9].ID != 30 {
		t.Fatalf("kept %v; want 21..30", ids(got))
	}
	ls, _ := reader(t, dir).Lines(context.Background(), 1, 20)
	if len(ls) != 0 {
		t.Fatalf("lines of deleted ticks kept: %d", len(ls))
	}
}

func TestRetentionByAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	g := newRig(t, Options{Dir: dir, KeepFor: time.Hour, Now: func() time.Time { return *clock.Load() }})
	g.tick(5)
	later := now.Add(time.Hour + time.Second) // every tick so far is older than keep_for
	clock.Store(&later)
	g.rec.retainNow(t)
	g.close()
	got, _ := reader(t, dir).Ticks(context.Background(), recorder.Query{Ascending: true})
	if len(got) != 1 || got[0].ID != 5 {
		t.Fatalf("kept %v; want only the newest (5), which ids continue after", ids(got))
	}
}

func TestRetentionBySize(t *testing.T) {
	dir := t.TempDir()
	const limit = 128 << 10
	g := newRig(t, Options{Dir: dir, MaxBytes: limit})
	g.fail.Store(true)
	g.tick(400)
	g.rec.retainNow(t)
	g.close()
	rd := reader(t, dir)
	rp, err := rd.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rp.UsedBytes > limit || rp.LastTick != 400 || rp.Ticks < 20 || rp.Ticks >= 400 || !rp.OK() {
		t.Fatalf("after size retention: %s", rp)
	}
}

// A writer that cannot keep up never blocks a tick; every record it drops is counted,
// and the summaries report the drops.
func TestSlowWriterDropsOldest(t *testing.T) {
	release := make(chan struct{})
	began := make(chan struct{}, 2) // a commit began: the first two are waited for
	var commits atomic.Int64
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir, Queue: 8, beforeCommit: func() error {
		n := commits.Add(1)
		if n <= 2 {
			began <- struct{}{}
		}
		if n > 1 { // the first commit (the start event) passes
			<-release
		}
		return nil
	}})
	<-began
	g.tick(1)
	<-began // the writer is now stuck
	start := time.Now()
	g.tick(100)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("100 ticks took %v with a stuck writer", d)
	}
	close(release)
	g.close()
	rd := reader(t, dir)
	rp, _ := rd.Check(context.Background())
	pushes := uint64(1 + 1 + 101 + 1) // start, config_applied, ticks, stop
	if got := uint64(rp.Ticks+rp.Events) + g.rec.Dropped(); got != pushes || g.rec.Dropped() == 0 {
		t.Fatalf("recorded %d + dropped %d = %d; want %d records pushed", rp.Ticks+rp.Events, g.rec.Dropped(), got, pushes)
	}
	var said uint64
	for _, s := range g.sums {
		said += s.Recorder.Dropped
	}
	if last := g.sums[len(g.sums)-1].Recorder; said != last.DroppedTotal || said == 0 {
		t.Fatalf("summaries reported %d drops; the last says %d in all", said, last.DroppedTotal)
	}
}

// A database that fails during a run is logged once, counted, reported, and the cycle
// keeps ticking; writing resumes when it can.
func TestFailingWriterKeepsTicking(t *testing.T) {
	var broken atomic.Bool
	core, logs := observer.New(zapcore.InfoLevel)
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir, Flush: time.Millisecond, Logger: zap.New(core), beforeCommit: func() error {
		if broken.Load() {
			return errors.New("disk full")
		}
		return nil
	}})
	broken.Store(true)
	for range 20 {
		pass := g.rec.Committed()
		g.tick(1)
		select { // one failed commit a tick, not one for all twenty
		case <-pass:
		case <-time.After(30 * time.Second):
			t.Fatal("the writer made no pass within 30s")
		}
	}
	waitPass(t, g.rec, func() bool { return g.rec.WriteErrors() >= 2 })
	if n := logs.FilterMessageSnippet("cannot write").Len(); n != 1 {
		t.Fatalf("failure logged %d times; want once", n)
	}
	g.tick(1)
	if s := g.sums[len(g.sums)-1]; !s.Recorder.Failing || s.Recorder.DroppedTotal == 0 {
		t.Fatalf("summary does not report the failure: %+v", s.Recorder)
	}
	broken.Store(false)
	g.tick(1)
	g.close()
	if logs.FilterMessageSnippet("writing the database again").Len() != 1 {
		t.Fatal("recovery not logged")
	}
	last := g.sums[len(g.sums)-1].TickID
	if b, err := reader(t, dir).Tick(context.Background(), last); err != nil || b == nil {
		t.Fatalf("tick %d after recovery not recorded: %v", last, err)
	}
}

func TestUnwritableStateDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "state")
	_, err := Open(context.Background(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %v does not name %s", err, dir)
	}
}

// TestNoIDPastTheReservation: while the reservation cannot be written (a full disk), no
// tick takes an id past the last one reserved: ticks are refused (ErrNotAdmitted), which
// is logged once and reported, rather than handed out and reused after a restart. A
// process that then dies without a clean stop is followed by one that starts past every
// id published; once the disk is writable, ticks resume where they stopped.
func TestNoIDPastTheReservation(t *testing.T) {
	var broken atomic.Bool
	core, logs := observer.New(zapcore.InfoLevel)
	dir := t.TempDir()
	opts := Options{Dir: dir, Flush: time.Millisecond, Logger: zap.New(core), beforeCommit: func() error {
		if broken.Load() {
			return errors.New("no space left on device")
		}
		return nil
	}}
	g := newRig(t, opts)
	g.tick(3)
	broken.Store(true)
	var last uint64
	for i := 0; ; i++ {
		s, err := g.eng.Tick(context.Background())
		if errors.Is(err, cycle.ErrNotAdmitted) {
			break
		}
		if err != nil || i > 2*LeaseTicks {
			t.Fatalf("tick %d: %v (still admitted after %d ticks on a failing disk)", i, err, i)
		}
		last = s.TickID
	}
	if last != g.rec.Reserved() || g.rec.IDsExhausted() == nil {
		t.Fatalf("ticks stopped after %d, reserved %d, exhausted %v; want stopped at the reservation", last, g.rec.Reserved(), g.rec.IDsExhausted())
	}
	if _, err := g.eng.Tick(context.Background()); !errors.Is(err, cycle.ErrNotAdmitted) {
		t.Fatalf("a second tick past the reservation: %v", err)
	}
	if n := logs.FilterMessageSnippet("no tick id is reserved").Len(); n != 1 {
		t.Errorf("exhaustion logged %d times; want once", n)
	}
	broken.Store(false)
	waitPass(t, g.rec, func() bool { _, err := g.eng.Tick(context.Background()); return err == nil })
	if g.rec.IDsExhausted() != nil || logs.FilterMessageSnippet("reserved again").Len() != 1 {
		t.Errorf("recovery: exhausted %v, logged %d", g.rec.IDsExhausted(), logs.FilterMessageSnippet("reserved again").Len())
	}
	s, err := g.eng.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	published := s.TickID
	broken.Store(true) // the disk fills again, and the process dies: Close cannot write either
	_ = g.eng.Close()
	_ = g.rec.Close()
	broken.Store(false)
	g = newRig(t, Options{Dir: dir})
	if g.rec.FirstTick() <= published {
		t.Fatalf("after a stop on a full disk, first tick %d; want past %d, the last published", g.rec.FirstTick(), published)
	}
}

// TestRulesEventsAreDeltas: each registration applied records a rules event of its own
// module only, not of every module, so the events do not grow with the registrations;
// applied in order, they give the whole rules of every generation.
func TestRulesEventsAreDeltas(t *testing.T) {
	dir := t.TempDir()
	g := newRig(t, Options{Dir: dir, Flush: time.Millisecond})
	g.rec.Watch(g.eng)
	ok := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	const n = 150
	for i := range n {
		name := fmt.Sprintf("rt%03d", i)
		if err := g.eng.Register(cycle.Registration{Spec: tiers.ModuleSpec{Name: name, Tier: "planning"}, Module: ok}); err != nil {
			t.Fatal(err)
		}
		g.tick(1)
	}
	g.close()
	evs, err := reader(t, dir).Events(context.Background(), recorder.EventQuery{Kind: recorder.KindRules})
	if err != nil {
		t.Fatal(err)
	}
	var whole map[string]recorder.ModuleRules
	largest := 0
	for i, ev := range evs {
		var r recorder.Rules
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			t.Fatal(err)
		}
		if i%recorder.RulesFullEvery != 0 {
			largest = max(largest, len(ev.Data))
		}
		whole = r.ApplyDelta(whole).Modules
	}
	if len(whole) != n+2 {
		t.Fatalf("the deltas give %d modules; want %d", len(whole), n+2)
	}
	if largest > 300 {
		t.Errorf("a delta event of %d bytes after %d registrations; want one module's worth", largest, n)
	}
}
