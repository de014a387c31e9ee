package breaker_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStateString(t *testing.T) {
	for s, want := range map[breaker.State]string{
		breaker.Closed:    "closed",
		breaker.Open:      "open",
		breaker.HalfOpen:  "half_open",
		breaker.State(42): "state(42)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}

func TestPermitKindString(t *testing.T) {
	for k, want := range map[breaker.PermitKind]string{
		breaker.Refused:        "refused",
		breaker.Pass:           "pass",
		breaker.Probe:          "probe",
		breaker.PermitKind(42): "permit_kind(42)",
	} {
		if got := k.String(); got != want {
			t.Errorf("PermitKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestSettingsDefaults(t *testing.T) {
	want := breaker.Settings{
		Name:              "m",
		FailureThreshold:  5,
		Cooldown:          30 * time.Second,
		HalfOpenProbes:    1,
		HalfOpenSuccesses: 1,
		TripOn:            fault.AllFaults,
	}
	for _, in := range []breaker.Settings{
		{Name: "m"},
		{Name: "m", FailureThreshold: -1, Cooldown: -time.Second, HalfOpenProbes: -2, HalfOpenSuccesses: -3},
	} {
		b := breaker.New(in)
		if got := b.Settings(); got != want {
			t.Errorf("New(%+v).Settings() = %+v, want %+v", in, got, want)
		}
		if got := b.Snapshot().Settings; got != want {
			t.Errorf("Snapshot().Settings = %+v, want %+v", got, want)
		}
		if b.Name() != "m" {
			t.Errorf("Name() = %q, want %q", b.Name(), "m")
		}
	}
	custom := breaker.Settings{Name: "x", FailureThreshold: 2, Cooldown: time.Minute, HalfOpenProbes: 3,
		HalfOpenSuccesses: 4, TripOn: fault.SetOf(fault.KindTransient)}
	if got := breaker.New(custom).Settings(); got != custom {
		t.Errorf("Settings() = %+v, want %+v", got, custom)
	}
}

func TestNewIsClosed(t *testing.T) {
	b := breaker.New(breaker.Settings{Name: "m"})
	if s := b.State(); s != breaker.Closed {
		t.Fatalf("State() = %v, want closed", s)
	}
	if p := b.Acquire(); p.Kind() != breaker.Pass || !p.Allowed() {
		t.Fatalf("Acquire() = %v, want pass", p.Kind())
	}
	var zero breaker.Permit
	if zero.Allowed() || zero.Kind() != breaker.Refused {
		t.Fatalf("zero Permit = %v allowed=%v, want refused", zero.Kind(), zero.Allowed())
	}
}

// op is one step of a state-machine script.
type op struct {
	do    string        // acquire, success, failure, release, advance, reset, state
	p     int           // permit index (order of acquire) for success, failure, release
	k     fault.Kind    // for failure
	d     time.Duration // for advance
	want  breaker.PermitKind
	state breaker.State // expected state after the step (checked through Snapshot)
}

func acquire(want breaker.PermitKind, state breaker.State) op {
	return op{do: "acquire", want: want, state: state}
}
func success(p int, state breaker.State) op { return op{do: "success", p: p, state: state} }
func failure(p int, k fault.Kind, state breaker.State) op {
	return op{do: "failure", p: p, k: k, state: state}
}
func release(p int, state breaker.State) op           { return op{do: "release", p: p, state: state} }
func advance(d time.Duration, state breaker.State) op { return op{do: "advance", d: d, state: state} }
func reset(state breaker.State) op                    { return op{do: "reset", state: state} }
func stateIs(state breaker.State) op                  { return op{do: "state", state: state} }

const (
	closed   = breaker.Closed
	open     = breaker.Open
	halfOpen = breaker.HalfOpen
	pass     = breaker.Pass
	probe    = breaker.Probe
	refused  = breaker.Refused
	trans    = fault.KindTransient
)

// run executes a script and returns the permits it acquired.
func run(t *testing.T, b *breaker.Breaker, clk *clock.Fake, script []op) []breaker.Permit {
	t.Helper()
	var permits []breaker.Permit
	for i, o := range script {
		switch o.do {
		case "acquire":
			p := b.Acquire()
			if p.Kind() != o.want {
				t.Fatalf("step %d: Acquire() = %v, want %v", i, p.Kind(), o.want)
			}
			permits = append(permits, p)
		case "success":
			b.Success(permits[o.p])
		case "failure":
			b.Failure(permits[o.p], o.k)
		case "release":
			b.Release(permits[o.p])
		case "advance":
			clk.Advance(o.d)
		case "reset":
			b.Reset()
		case "state":
			if got := b.State(); got != o.state {
				t.Fatalf("step %d: State() = %v, want %v", i, got, o.state)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, o.do)
		}
		if got := b.Snapshot().State; got != o.state {
			t.Fatalf("step %d (%s): state = %v, want %v", i, o.do, got, o.state)
		}
	}
	return permits
}

func TestStateMachine(t *testing.T) {
	base := breaker.Settings{Name: "m", FailureThreshold: 3, Cooldown: 10 * time.Second}
	with := func(f func(*breaker.Settings)) breaker.Settings { s := base; f(&s); return s }
	tests := []struct {
		name     string
		settings breaker.Settings
		script   []op
	}{
		{"closed stays closed below threshold", base, []op{
			acquire(pass, closed), failure(0, trans, closed),
			acquire(pass, closed), failure(1, trans, closed),
			acquire(pass, closed),
		}},
		{"closed to open at threshold", base, []op{
			acquire(pass, closed), failure(0, trans, closed),
			acquire(pass, closed), failure(1, trans, closed),
			acquire(pass, closed), failure(2, trans, open),
			acquire(refused, open),
		}},
		{"success in closed resets the consecutive count", base, []op{
			acquire(pass, closed), failure(0, trans, closed),
			acquire(pass, closed), failure(1, trans, closed),
			acquire(pass, closed), success(2, closed),
			acquire(pass, closed), failure(3, trans, closed),
			acquire(pass, closed), failure(4, trans, closed),
			acquire(pass, closed), failure(5, trans, open),
		}},
		{"concurrent pass permits each count", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
		}},
		{"threshold one opens on the first failure", with(func(s *breaker.Settings) { s.FailureThreshold = 1 }), []op{
			acquire(pass, closed), failure(0, trans, open),
		}},
		{"open refuses until the cooldown has elapsed", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(9*time.Second, open), acquire(refused, open),
			advance(time.Second-time.Nanosecond, open), acquire(refused, open),
			advance(time.Nanosecond, halfOpen),
		}},
		{"acquire half-opens and admits a probe", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(time.Minute, halfOpen), acquire(probe, halfOpen),
		}},
		{"State half-opens lazily", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen), stateIs(halfOpen),
		}},
		{"successful probe closes", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), success(3, closed),
			acquire(pass, closed),
		}},
		{"half-open needs HalfOpenSuccesses successes", with(func(s *breaker.Settings) { s.HalfOpenSuccesses = 3 }), []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), success(3, halfOpen),
			acquire(probe, halfOpen), success(4, halfOpen),
			acquire(probe, halfOpen), success(5, closed),
		}},
		{"failed probe reopens with a fresh cooldown", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), advance(5*time.Second, halfOpen), failure(3, trans, open),
			advance(9*time.Second, open), acquire(refused, open),
			advance(time.Second, halfOpen), acquire(probe, halfOpen),
		}},
		{"failed probe after some successes reopens", with(func(s *breaker.Settings) { s.HalfOpenSuccesses = 2 }), []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), success(3, halfOpen),
			acquire(probe, halfOpen), failure(4, trans, open),
		}},
		{"probe cap refuses extra probes", with(func(s *breaker.Settings) { s.HalfOpenProbes = 2; s.HalfOpenSuccesses = 5 }), []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), acquire(probe, halfOpen), acquire(refused, halfOpen),
			success(3, halfOpen), acquire(probe, halfOpen), acquire(refused, halfOpen),
			release(4, halfOpen), acquire(probe, halfOpen), acquire(refused, halfOpen),
			failure(8, fault.KindCanceled, halfOpen), acquire(probe, halfOpen), acquire(refused, halfOpen),
		}},
		{"refused permit records are no-ops", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			acquire(refused, open), success(3, open), failure(3, trans, open), release(3, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), acquire(refused, halfOpen),
			success(5, halfOpen), failure(5, trans, halfOpen), release(5, halfOpen),
			success(4, closed),
		}},
		{"kinds outside trip_on never count in closed", with(func(s *breaker.Settings) { s.FailureThreshold = 1 }), []op{
			acquire(pass, closed),
			failure(0, fault.KindCanceled, closed), failure(0, fault.KindControl, closed),
			failure(0, fault.KindNone, closed),
			failure(0, trans, open),
		}},
		{"kinds outside trip_on never change half-open", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen),
			acquire(probe, halfOpen), failure(3, fault.KindCanceled, halfOpen),
			acquire(probe, halfOpen), failure(4, fault.KindControl, halfOpen),
			acquire(probe, halfOpen), success(5, closed),
		}},
		{"reset from open", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			reset(closed), acquire(pass, closed),
		}},
		{"reset from half-open", base, []op{
			acquire(pass, closed), acquire(pass, closed), acquire(pass, closed),
			failure(0, trans, closed), failure(1, trans, closed), failure(2, trans, open),
			advance(10*time.Second, halfOpen), acquire(probe, halfOpen),
			reset(closed), acquire(pass, closed),
			failure(3, trans, closed), success(3, closed), // stale probe
		}},
		{"reset from closed clears the count", base, []op{
			acquire(pass, closed), failure(0, trans, closed),
			acquire(pass, closed), failure(1, trans, closed),
			reset(closed),
			acquire(pass, closed), failure(2, trans, closed),
			acquire(pass, closed), failure(3, trans, closed),
			acquire(pass, closed), failure(4, trans, open),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			b := breaker.New(tt.settings, breaker.WithClock(clk))
			run(t, b, clk, tt.script)
		})
	}
}

func TestTripOn(t *testing.T) {
	shared := fault.SetOf(fault.KindTransient, fault.KindDownstream)
	tests := []struct {
		name  string
		trip  fault.Set
		kind  fault.Kind
		trips bool
	}{
		{"default trips on validation", 0, fault.KindValidation, true},
		{"default trips on contract", 0, fault.KindContract, true},
		{"default trips on transient", 0, fault.KindTransient, true},
		{"default trips on downstream", 0, fault.KindDownstream, true},
		{"default trips on internal", 0, fault.KindInternal, true},
		{"default ignores control", 0, fault.KindControl, false},
		{"default ignores canceled", 0, fault.KindCanceled, false},
		{"default ignores none", 0, fault.KindNone, false},
		{"shared trips on transient", shared, fault.KindTransient, true},
		{"shared trips on downstream", shared, fault.KindDownstream, true},
		{"shared ignores internal", shared, fault.KindInternal, false},
		{"shared ignores contract", shared, fault.KindContract, false},
		{"shared ignores validation", shared, fault.KindValidation, false},
		{"explicit control trips", fault.SetOf(fault.KindControl), fault.KindControl, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 2, TripOn: tt.trip}, breaker.WithClock(clk))
			for range 2 {
				b.Failure(b.Acquire(), tt.kind)
			}
			want := closed
			if tt.trips {
				want = open
			}
			if got := b.State(); got != want {
				t.Fatalf("after 2 %v failures: state %v, want %v", tt.kind, got, want)
			}
			snap := b.Snapshot()
			wantCount := 0
			if tt.trips {
				wantCount = 2
			}
			if snap.TotalFailures != uint64(wantCount) {
				t.Errorf("TotalFailures = %d, want %d", snap.TotalFailures, wantCount)
			}
			if tt.trips {
				return
			}
			// An ignored kind does not break a run of counted failures either.
			b.Failure(b.Acquire(), fault.KindTransient)
			b.Failure(b.Acquire(), tt.kind)
			if tt.trip.Empty() || tt.trip.Has(fault.KindTransient) {
				b.Failure(b.Acquire(), fault.KindTransient)
				if got := b.State(); got != open {
					t.Fatalf("ignored kind reset the consecutive count: state %v", got)
				}
			}
		})
	}
}

func TestIgnoredKindInHalfOpenReleasesSlot(t *testing.T) {
	clk := clock.NewFake(epoch)
	b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1, Cooldown: time.Second,
		TripOn: fault.SetOf(fault.KindTransient)}, breaker.WithClock(clk))
	b.Failure(b.Acquire(), fault.KindTransient)
	clk.Advance(time.Second)
	p := b.Acquire()
	if p.Kind() != probe {
		t.Fatalf("Acquire() = %v, want probe", p.Kind())
	}
	if k := b.Acquire().Kind(); k != refused {
		t.Fatalf("second Acquire() = %v, want refused", k)
	}
	b.Failure(p, fault.KindInternal) // outside trip_on
	snap := b.Snapshot()
	if snap.State != halfOpen || snap.ProbesInFlight != 0 || snap.ProbeSuccesses != 0 {
		t.Fatalf("snapshot = %+v, want half_open with no probes", snap)
	}
	if k := b.Acquire().Kind(); k != probe {
		t.Fatalf("Acquire() after ignored failure = %v, want probe", k)
	}
}

func TestStalePermits(t *testing.T) {
	setup := func(t *testing.T, s breaker.Settings) (*breaker.Breaker, *clock.Fake) {
		t.Helper()
		clk := clock.NewFake(epoch)
		s.Name = "m"
		s.Cooldown = time.Second
		return breaker.New(s, breaker.WithClock(clk)), clk
	}
	t.Run("late success from closed does not touch open", func(t *testing.T) {
		b, _ := setup(t, breaker.Settings{FailureThreshold: 1})
		late := b.Acquire()
		b.Failure(b.Acquire(), trans)
		b.Success(late)
		b.Failure(late, trans)
		b.Release(late)
		snap := b.Snapshot()
		if snap.State != open || snap.TotalSuccesses != 0 || snap.TotalFailures != 1 || snap.ConsecutiveFailures != 1 {
			t.Fatalf("snapshot = %+v", snap)
		}
	})
	t.Run("late success from closed does not count in half-open", func(t *testing.T) {
		b, clk := setup(t, breaker.Settings{FailureThreshold: 1})
		late := b.Acquire()
		b.Failure(b.Acquire(), trans)
		clk.Advance(time.Second)
		if b.State() != halfOpen {
			t.Fatal("not half-open")
		}
		b.Success(late)
		if s := b.State(); s != halfOpen {
			t.Fatalf("late pass success moved half-open to %v", s)
		}
		b.Failure(late, trans)
		if s := b.State(); s != halfOpen {
			t.Fatalf("late pass failure moved half-open to %v", s)
		}
	})
	t.Run("late probe success does not close a reopened breaker", func(t *testing.T) {
		b, clk := setup(t, breaker.Settings{FailureThreshold: 1, HalfOpenProbes: 2})
		b.Failure(b.Acquire(), trans)
		clk.Advance(time.Second)
		p1, p2 := b.Acquire(), b.Acquire()
		b.Failure(p1, trans) // reopens
		b.Success(p2)        // from the previous half-open generation
		if s := b.State(); s != open {
			t.Fatalf("state = %v, want open", s)
		}
		clk.Advance(time.Second)
		p3 := b.Acquire()
		b.Success(p2) // still stale in the new half-open generation
		if snap := b.Snapshot(); snap.State != halfOpen || snap.ProbesInFlight != 1 {
			t.Fatalf("snapshot = %+v, want half_open with 1 probe", snap)
		}
		b.Success(p3)
		if s := b.State(); s != closed {
			t.Fatalf("state = %v, want closed", s)
		}
	})
	t.Run("late probe failure does not open a closed breaker", func(t *testing.T) {
		b, clk := setup(t, breaker.Settings{FailureThreshold: 1, HalfOpenProbes: 2})
		b.Failure(b.Acquire(), trans)
		clk.Advance(time.Second)
		p1, p2 := b.Acquire(), b.Acquire()
		b.Success(p1) // closes
		b.Failure(p2, trans)
		if snap := b.Snapshot(); snap.State != closed || snap.ConsecutiveFailures != 0 {
			t.Fatalf("snapshot = %+v, want closed with no failures", snap)
		}
	})
	t.Run("probe recorded twice frees one slot", func(t *testing.T) {
		b, clk := setup(t, breaker.Settings{FailureThreshold: 1, HalfOpenProbes: 2, HalfOpenSuccesses: 10})
		b.Failure(b.Acquire(), trans)
		clk.Advance(time.Second)
		p1, p2 := b.Acquire(), b.Acquire()
		b.Success(p1)
		b.Success(p1)
		b.Release(p1)
		b.Failure(p1, trans)
		snap := b.Snapshot()
		if snap.State != halfOpen || snap.ProbesInFlight != 1 || snap.ProbeSuccesses != 1 {
			t.Fatalf("snapshot = %+v, want half_open, 1 probe in flight, 1 success", snap)
		}
		if k := b.Acquire().Kind(); k != probe {
			t.Fatalf("Acquire() = %v, want probe", k)
		}
		if k := b.Acquire().Kind(); k != refused {
			t.Fatalf("Acquire() = %v, want refused", k)
		}
		b.Release(p2)
	})
	t.Run("permits from before a reset are ignored", func(t *testing.T) {
		b, _ := setup(t, breaker.Settings{FailureThreshold: 2})
		old := []breaker.Permit{b.Acquire(), b.Acquire()}
		b.Reset() // closed → closed: still a new generation
		b.Failure(old[0], trans)
		b.Failure(old[1], trans)
		b.Success(old[0])
		snap := b.Snapshot()
		if snap.State != closed || snap.TotalFailures != 0 || snap.TotalSuccesses != 0 {
			t.Fatalf("snapshot = %+v, want untouched", snap)
		}
	})
}

func TestReset(t *testing.T) {
	clk := clock.NewFake(epoch)
	var got []breaker.Transition
	b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 2, Cooldown: time.Second, HalfOpenProbes: 2, HalfOpenSuccesses: 3},
		breaker.WithClock(clk), breaker.WithListener(func(tr breaker.Transition) { got = append(got, tr) }))

	b.Failure(b.Acquire(), trans)
	b.Reset() // already closed: no transition, but the count is cleared
	if snap := b.Snapshot(); snap.ConsecutiveFailures != 0 || snap.Transitions != 0 || snap.TotalFailures != 1 {
		t.Fatalf("after reset while closed: %+v", snap)
	}
	if len(got) != 0 {
		t.Fatalf("reset while closed emitted %v", got)
	}

	b.Failure(b.Acquire(), trans)
	b.Failure(b.Acquire(), trans)
	clk.Advance(time.Second)
	b.Success(b.Acquire())
	b.Acquire()
	snap := b.Snapshot()
	if snap.State != halfOpen || snap.ProbeSuccesses != 1 || snap.ProbesInFlight != 1 || snap.OpenedAt.IsZero() {
		t.Fatalf("before reset: %+v", snap)
	}
	clk.Advance(time.Millisecond)
	b.Reset()
	snap = b.Snapshot()
	want := breaker.Snapshot{
		Name: "m", State: closed, TotalFailures: 3, TotalSuccesses: 1, Transitions: 3,
		Settings: b.Settings(),
	}
	if snap != want {
		t.Fatalf("after reset:\n got %+v\nwant %+v", snap, want)
	}
	last := got[len(got)-1]
	if wantT := (breaker.Transition{Name: "m", From: halfOpen, To: closed, Reason: "reset", At: epoch.Add(time.Second + time.Millisecond)}); last != wantT {
		t.Fatalf("last transition = %+v, want %+v", last, wantT)
	}
	// Reset from open.
	b.Failure(b.Acquire(), trans)
	b.Failure(b.Acquire(), trans)
	b.Reset()
	if last := got[len(got)-1]; last.From != open || last.To != closed || last.Reason != "reset" {
		t.Fatalf("last transition = %+v", last)
	}
	if len(got) != 5 {
		t.Fatalf("%d transitions, want 5: %+v", len(got), got)
	}
}

func TestListeners(t *testing.T) {
	clk := clock.NewFake(epoch)
	var mu sync.Mutex
	var first, second []string
	record := func(dst *[]string) breaker.Listener {
		return func(tr breaker.Transition) {
			mu.Lock()
			defer mu.Unlock()
			*dst = append(*dst, fmt.Sprintf("%s %v→%v %q +%v", tr.Name, tr.From, tr.To, tr.Reason, tr.At.Sub(epoch)))
		}
	}
	b := breaker.New(breaker.Settings{Name: "llm", FailureThreshold: 2, Cooldown: 10 * time.Second, HalfOpenSuccesses: 2},
		breaker.WithClock(clk), breaker.WithListener(record(&first)), breaker.WithListener(record(&second)))

	b.Failure(b.Acquire(), trans)
	clk.Advance(time.Second)
	b.Failure(b.Acquire(), trans) // opens at +1s
	clk.Advance(15 * time.Second)
	p := b.Acquire() // half-opens at +16s
	clk.Advance(time.Second)
	b.Failure(p, fault.KindInternal) // reopens at +17s
	clk.Advance(10 * time.Second)
	if b.State() != halfOpen { // half-opens at +27s
		t.Fatal("not half-open")
	}
	b.Success(b.Acquire())
	clk.Advance(time.Second)
	b.Success(b.Acquire()) // closes at +28s
	b.Failure(b.Acquire(), trans)
	b.Failure(b.Acquire(), trans) // opens at +28s
	clk.Advance(2 * time.Second)
	b.Reset() // closes at +30s

	want := []string{
		`llm closed→open "failure threshold reached" +1s`,
		`llm open→half_open "cooldown elapsed" +16s`,
		`llm half_open→open "probe failed" +17s`,
		`llm open→half_open "cooldown elapsed" +27s`,
		`llm half_open→closed "probes succeeded" +28s`,
		`llm closed→open "failure threshold reached" +28s`,
		`llm open→closed "reset" +30s`,
	}
	for name, got := range map[string][]string{"first": first, "second": second} {
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s listener got:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if n := b.Snapshot().Transitions; n != uint64(len(want)) {
		t.Errorf("Transitions = %d, want %d", n, len(want))
	}
}

func TestSnapshotHalfOpensLazily(t *testing.T) {
	clk := clock.NewFake(epoch)
	var got []breaker.Transition
	b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1, Cooldown: time.Second},
		breaker.WithClock(clk), breaker.WithListener(func(tr breaker.Transition) { got = append(got, tr) }))
	b.Failure(b.Acquire(), trans)
	clk.Advance(time.Second)
	snap := b.Snapshot()
	if snap.State != halfOpen || !snap.OpenedAt.Equal(epoch) {
		t.Fatalf("snapshot = %+v, want half_open opened at epoch", snap)
	}
	if len(got) != 2 || got[1].Reason != "cooldown elapsed" {
		t.Fatalf("transitions = %+v", got)
	}
	b.Success(b.Acquire())
	if snap := b.Snapshot(); !snap.OpenedAt.IsZero() {
		t.Fatalf("OpenedAt = %v after closing, want zero", snap.OpenedAt)
	}
}

// A listener may call back into its breaker without deadlocking, and transitions caused
// from inside a listener are still delivered in order.
func TestListenerReentrant(t *testing.T) {
	clk := clock.NewFake(epoch)
	var b *breaker.Breaker
	var reasons []string
	b = breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1},
		breaker.WithClock(clk), breaker.WithListener(func(tr breaker.Transition) {
			reasons = append(reasons, tr.Reason)
			_ = b.Snapshot()
			if tr.To == open {
				b.Reset()
			}
		}))
	b.Failure(b.Acquire(), trans)
	if got := strings.Join(reasons, ","); got != "failure threshold reached,reset" {
		t.Fatalf("reasons = %s", got)
	}
	if s := b.State(); s != closed {
		t.Fatalf("state = %v, want closed", s)
	}
}

// A panicking listener does not wedge delivery for later transitions.
func TestListenerPanic(t *testing.T) {
	var calls int
	b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1},
		breaker.WithListener(func(tr breaker.Transition) {
			calls++
			if calls == 1 {
				panic("boom")
			}
		}))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("listener panic was swallowed")
			}
		}()
		b.Failure(b.Acquire(), trans)
	}()
	b.Reset()
	if calls != 2 {
		t.Fatalf("listener called %d times, want 2", calls)
	}
}

func TestRegistry(t *testing.T) {
	clk := clock.NewFake(epoch)
	var events []string
	r := breaker.NewRegistry(breaker.WithClock(clk), breaker.WithListener(func(tr breaker.Transition) {
		events = append(events, tr.Name+":"+tr.To.String())
	}))
	llm, err := r.GetOrCreate(breaker.Settings{Name: "llm", FailureThreshold: 3, Cooldown: 10 * time.Second,
		TripOn: fault.SetOf(fault.KindTransient, fault.KindDownstream)})
	if err != nil {
		t.Fatal(err)
	}
	// Same settings, spelled with defaults explicitly: no conflict.
	again, err := r.GetOrCreate(breaker.Settings{Name: "llm", FailureThreshold: 3, Cooldown: 10 * time.Second,
		HalfOpenProbes: 1, HalfOpenSuccesses: 1, TripOn: fault.SetOf(fault.KindDownstream, fault.KindTransient)})
	if err != nil || again != llm {
		t.Fatalf("GetOrCreate(same) = %p, %v; want %p, nil", again, err, llm)
	}
	// Different settings: the first registration wins.
	other, err := r.GetOrCreate(breaker.Settings{Name: "llm", FailureThreshold: 5, Cooldown: 10 * time.Second})
	if other != llm {
		t.Fatalf("GetOrCreate(conflict) returned a different breaker")
	}
	if !errors.Is(err, breaker.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	for _, s := range []string{`"llm"`, "failure_threshold: registered 3, requested 5", "trip_on: registered [transient,downstream], requested [validation,contract,transient,downstream,internal]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "cooldown") {
		t.Errorf("error %q mentions an equal field", err)
	}
	if got := llm.Settings().FailureThreshold; got != 3 {
		t.Fatalf("FailureThreshold = %d after conflict, want 3", got)
	}
	_, err = r.GetOrCreate(breaker.Settings{Name: "llm", FailureThreshold: 3, Cooldown: time.Second, HalfOpenProbes: 2, HalfOpenSuccesses: 4,
		TripOn: fault.SetOf(fault.KindTransient, fault.KindDownstream)})
	for _, s := range []string{"cooldown: registered 10s, requested 1s", "half_open_probes: registered 1, requested 2", "half_open_successes: registered 1, requested 4"} {
		if !errors.Is(err, breaker.ErrConflict) || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not mention %q", err, s)
		}
	}

	if _, err := r.GetOrCreate(breaker.Settings{Name: "db"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetOrCreate(breaker.Settings{Name: "audio"}); err != nil {
		t.Fatal(err)
	}
	if b, ok := r.Get("llm"); !ok || b != llm {
		t.Fatalf("Get(llm) = %p, %v", b, ok)
	}
	if _, ok := r.Get("nope"); ok {
		t.Fatal("Get(nope) found a breaker")
	}

	// Registry options reach every breaker: the fake clock and the listener.
	for range 3 {
		llm.Failure(llm.Acquire(), trans)
	}
	clk.Advance(10 * time.Second)
	list := r.List()
	var names []string
	for _, s := range list {
		names = append(names, s.Name+"="+s.State.String())
	}
	if got := strings.Join(names, " "); got != "audio=closed db=closed llm=half_open" {
		t.Fatalf("List() = %s", got)
	}
	if got := strings.Join(events, " "); got != "llm:open llm:half_open" {
		t.Fatalf("events = %s", got)
	}

	r.Remove("db")
	r.Remove("db")
	if _, ok := r.Get("db"); ok {
		t.Fatal("db still registered")
	}
	if n := len(r.List()); n != 2 {
		t.Fatalf("len(List()) = %d, want 2", n)
	}
	// After removal the name is free again, with new settings.
	db, err := r.GetOrCreate(breaker.Settings{Name: "db", FailureThreshold: 9})
	if err != nil || db.Settings().FailureThreshold != 9 {
		t.Fatalf("re-created db: %v, %v", db.Settings(), err)
	}
	if got := breaker.NewRegistry().List(); len(got) != 0 {
		t.Fatalf("empty registry List() = %v", got)
	}
}

func TestRegistryConcurrentFirstWins(t *testing.T) {
	r := breaker.NewRegistry()
	const n = 16
	var wg sync.WaitGroup
	got := make([]*breaker.Breaker, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = r.GetOrCreate(breaker.Settings{Name: "shared", FailureThreshold: 1 + i%2})
			r.List()
		})
	}
	wg.Wait()
	winner := got[0].Settings().FailureThreshold
	for i := range n {
		if got[i] != got[0] {
			t.Fatalf("goroutine %d got a different breaker", i)
		}
		conflict := 1+i%2 != winner
		if conflict != errors.Is(errs[i], breaker.ErrConflict) {
			t.Fatalf("goroutine %d: threshold %d vs winner %d, err %v", i, 1+i%2, winner, errs[i])
		}
	}
}

// TestHalfOpenProbeCapConcurrent hammers a half-open breaker from many goroutines and checks
// that it never has more than HalfOpenProbes probes out at once.
func TestHalfOpenProbeCapConcurrent(t *testing.T) {
	const (
		probes     = 3
		goroutines = 32
		iterations = 2000
	)
	clk := clock.NewFake(epoch)
	b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1, Cooldown: time.Second,
		HalfOpenProbes: probes, HalfOpenSuccesses: 1 << 30, TripOn: fault.SetOf(fault.KindTransient)},
		breaker.WithClock(clk))
	b.Failure(b.Acquire(), trans)
	clk.Advance(time.Second)
	if b.State() != halfOpen {
		t.Fatal("not half-open")
	}

	var inFlight, maxSeen, admitted, successes atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range iterations {
				p := b.Acquire()
				switch p.Kind() {
				case refused:
					continue
				case pass:
					t.Error("pass permit while half-open")
					return
				}
				n := inFlight.Add(1)
				admitted.Add(1)
				for {
					m := maxSeen.Load()
					if n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
				runtime.Gosched() // hold the probe so that probes overlap
				inFlight.Add(-1)
				switch rng.IntN(3) {
				case 0:
					successes.Add(1)
					b.Success(p)
				case 1:
					b.Failure(p, fault.KindInternal) // outside trip_on: releases only
				default:
					b.Release(p)
				}
			}
		})
	}
	wg.Wait()
	if m := maxSeen.Load(); m > probes {
		t.Fatalf("%d probes in flight at once, cap is %d", m, probes)
	}
	if admitted.Load() == 0 {
		t.Fatal("no probe was admitted")
	}
	snap := b.Snapshot()
	if snap.State != halfOpen || snap.ProbesInFlight != 0 || snap.ProbeSuccesses != int(successes.Load()) {
		t.Fatalf("snapshot = %+v, want half_open, no probes in flight, %d successes", snap, successes.Load())
	}
	t.Logf("admitted %d probes, max %d in flight", admitted.Load(), maxSeen.Load())
}

func TestAcquireSuccessClosedAllocs(t *testing.T) {
	b := breaker.New(breaker.Settings{Name: "m"})
	if n := testing.AllocsPerRun(1000, func() {
		b.Success(b.Acquire())
		b.Release(b.Acquire())
	}); n != 0 {
		t.Fatalf("Acquire+Success on a closed breaker allocates %v times per run, want 0", n)
	}
}

func BenchmarkAcquireSuccessClosed(b *testing.B) {
	br := breaker.New(breaker.Settings{Name: "m"})
	b.ReportAllocs()
	for b.Loop() {
		br.Success(br.Acquire())
	}
}

func BenchmarkAcquireParallel(b *testing.B) {
	br := breaker.New(breaker.Settings{Name: "m"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br.Success(br.Acquire())
		}
	})
}

// AcquireAt refuses an open breaker until its cooldown ends at the time given, and from
// then on is Acquire: the first call at or after the end half-opens it.
func TestAcquireAt(t *testing.T) {
	cases := []struct {
		name  string
		after time.Duration // since the breaker opened, as passed to AcquireAt
		want  breaker.PermitKind
		state breaker.State
	}{
		{"just opened", 0, refused, breaker.Open},
		{"before the cooldown ends", time.Second - time.Nanosecond, refused, breaker.Open},
		{"at the cooldown's end", time.Second, probe, halfOpen},
		{"long after", time.Hour, probe, halfOpen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1, Cooldown: time.Second,
				TripOn: fault.SetOf(fault.KindTransient)}, breaker.WithClock(clk))
			b.Failure(b.Acquire(), fault.KindTransient)
			opened := clk.Now()
			clk.Advance(c.after)
			if k := b.AcquireAt(opened.Add(c.after)).Kind(); k != c.want {
				t.Fatalf("AcquireAt = %v, want %v", k, c.want)
			}
			if s := b.Snapshot().State; s != c.state {
				t.Fatalf("state %v, want %v", s, c.state)
			}
		})
	}
	t.Run("closed after a reset", func(t *testing.T) {
		clk := clock.NewFake(epoch)
		b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 1, Cooldown: time.Second,
			TripOn: fault.SetOf(fault.KindTransient)}, breaker.WithClock(clk))
		b.Failure(b.Acquire(), fault.KindTransient)
		b.Reset()
		if k := b.AcquireAt(clk.Now()).Kind(); k != breaker.Pass {
			t.Fatalf("AcquireAt after Reset = %v, want pass", k)
		}
	})
}

// Passing gives Acquire's pass while the breaker is closed with nothing counted, and
// nothing once a failure is counted, it opens or half-opens, or after a reset until the
// state is closed again; a success of its permit is counted as Acquire's.
func TestPassing(t *testing.T) {
	clk := clock.NewFake(epoch)
	b := breaker.New(breaker.Settings{Name: "m", FailureThreshold: 2, Cooldown: time.Second, HalfOpenSuccesses: 1,
		TripOn: fault.SetOf(fault.KindTransient)}, breaker.WithClock(clk))
	p, ok := b.Passing()
	if !ok || p != b.Acquire() {
		t.Fatalf("a new breaker: Passing = %+v, %v; want Acquire's pass", p, ok)
	}
	b.Success(p)
	if s := b.Snapshot(); s.TotalSuccesses != 1 {
		t.Fatalf("a success of Passing's permit: %d successes, want 1", s.TotalSuccesses)
	}
	b.Failure(b.Acquire(), fault.KindTransient) // one failure counted: closed, not fast
	if _, ok := b.Passing(); ok {
		t.Fatal("Passing with a failure counted")
	}
	b.Failure(b.Acquire(), fault.KindTransient) // open
	if _, ok := b.Passing(); ok {
		t.Fatal("Passing while open")
	}
	clk.Advance(time.Second)
	p = b.Acquire() // the probe: half-open
	if _, ok := b.Passing(); ok {
		t.Fatal("Passing while half-open")
	}
	b.Success(p) // closed again, nothing counted
	if p, ok := b.Passing(); !ok || p.Kind() != breaker.Pass {
		t.Fatalf("closed again: Passing = %+v, %v", p, ok)
	}
}

// Prepare hands back the registered breaker while its settings are the ones asked for,
// else a new one that the registry does not hold until Put, which replaces the old one.
func TestRegistryPreparePut(t *testing.T) {
	r := breaker.NewRegistry()
	s := breaker.Settings{Name: "db", FailureThreshold: 2, Cooldown: time.Second}
	b, fresh := r.Prepare(s)
	if !fresh {
		t.Fatal("a name the registry lacks: want a fresh breaker")
	}
	if _, ok := r.Get("db"); ok {
		t.Fatal("Prepare registered the breaker")
	}
	r.Put(b)
	if got, fresh := r.Prepare(s); fresh || got != b {
		t.Fatal("same settings: want the registered breaker")
	}
	s.Cooldown = 2 * time.Second
	nb, fresh := r.Prepare(s)
	if !fresh || nb == b {
		t.Fatal("changed settings: want a fresh breaker")
	}
	if got, _ := r.Get("db"); got != b {
		t.Fatal("Prepare replaced the registered breaker")
	}
	r.Put(nb)
	if got, _ := r.Get("db"); got != nb || got.Settings().Cooldown != 2*time.Second {
		t.Fatal("Put did not replace the breaker")
	}
}

// A breaker fits the 288-byte size class (a breaker per module: the next class is 320).
func TestBreakerSize(t *testing.T) {
	if n := unsafe.Sizeof(breaker.Breaker{}); n > 288 {
		t.Fatalf("a breaker is %d bytes; keep it within 288", n)
	}
}
