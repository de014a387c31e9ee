package tiers

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/lastgood"
)

func TestPolicyText(t *testing.T) {
	for p, name := range map[Policy]string{PolicyDefault: "", Degrade: "degrade", FailFast: "fail_fast", Abort: "abort"} {
		if got := p.String(); got != name {
			t.Errorf("Policy(%d).String() = %q, want %q", uint8(p), got, name)
		}
		b, err := p.MarshalText()
		if err != nil || string(b) != name {
			t.Errorf("Policy(%d).MarshalText() = %q, %v; want %q", uint8(p), b, err, name)
		}
		back := Policy(99)
		if err := back.UnmarshalText(b); err != nil || back != p {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, p)
		}
	}
	if got := Policy(9).String(); got != "policy(9)" {
		t.Errorf("Policy(9).String() = %q", got)
	}
	for _, bad := range []string{"Degrade", "fail-fast", "stop", " abort"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q) succeeded, want an error", bad)
		}
		var p Policy
		if err := p.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) succeeded, want an error", bad)
		}
	}
}

func TestOnOpenText(t *testing.T) {
	for o, name := range map[OnOpen]string{Bypass: "bypass", Fail: "fail"} {
		b, err := o.MarshalText()
		if err != nil || string(b) != name || o.String() != name {
			t.Errorf("OnOpen(%d) text = %q, %v; want %q", uint8(o), b, err, name)
		}
		back := OnOpen(99)
		if err := back.UnmarshalText(b); err != nil || back != o {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, o)
		}
	}
	if o, err := ParseOnOpen(""); err != nil || o != Bypass {
		t.Errorf(`ParseOnOpen("") = %v, %v; want bypass`, o, err)
	}
	if _, err := ParseOnOpen("skip"); err == nil {
		t.Error(`ParseOnOpen("skip") succeeded, want an error`)
	}
	var o OnOpen
	if err := o.UnmarshalText([]byte("FAIL")); err == nil {
		t.Error(`UnmarshalText("FAIL") succeeded, want an error`)
	}
}

func TestModuleSpecJSON(t *testing.T) {
	in := ModuleSpec{Name: "lidar", Tier: "knowledge", DependsOn: []string{"map"}, Reads: []string{"map.result"},
		Writes: "lidar.scan", Policy: FailFast, Breaker: "llm", OnOpen: Fail, Idempotent: ptr(false),
		MaxAttempts: 1, Every: 3, Emergency: true, Priority: 2}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"lidar","tier":"knowledge","depends_on":["map"],"reads":["map.result"],"writes":"lidar.scan",` +
		`"policy":"fail_fast","breaker":"llm","on_open":"fail","idempotent":false,"max_attempts":1,"every":3,"emergency":true,"priority":2}`
	if string(b) != want {
		t.Fatalf("JSON =\n%s\nwant\n%s", b, want)
	}
	var out ModuleSpec
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Name != in.Name || out.Policy != FailFast || out.OnOpen != Fail || out.IsIdempotent() ||
		!slices.Equal(out.DependsOn, in.DependsOn) || out.Every != 3 || !out.Emergency || out.Priority != 2 {
		t.Errorf("round trip = %+v, want %+v", out, in)
	}
	// The zero spec: policy is omitted (default), on_open is always present.
	b, _ = json.Marshal(ModuleSpec{Name: "x"})
	if string(b) != `{"name":"x","on_open":"bypass"}` {
		t.Errorf("zero spec JSON = %s", b)
	}
	if err := json.Unmarshal([]byte(`{"name":"x","policy":"later"}`), &out); err == nil {
		t.Error("unknown policy in JSON accepted")
	}
}

func TestModuleSpecHelpers(t *testing.T) {
	if k := (ModuleSpec{Name: "cam"}).Key(); k != "cam.result" {
		t.Errorf("default Key() = %q", k)
	}
	if k := (ModuleSpec{Name: "cam", Writes: "vision.frame"}).Key(); k != "vision.frame" {
		t.Errorf("Key() = %q", k)
	}
	for _, tt := range []struct {
		idem *bool
		want bool
	}{{nil, true}, {ptr(true), true}, {ptr(false), false}} {
		if got := (ModuleSpec{Idempotent: tt.idem}).IsIdempotent(); got != tt.want {
			t.Errorf("IsIdempotent(%v) = %v", tt.idem, got)
		}
	}
	for every, want := range map[int]int{-3: 1, 0: 1, 1: 1, 4: 4} {
		if got := (ModuleSpec{Every: every}).EveryN(); got != want {
			t.Errorf("EveryN(%d) = %d, want %d", every, got, want)
		}
	}
}

func TestModuleFunc(t *testing.T) {
	boom := errors.New("boom")
	var m Module = ModuleFunc(func(ctx context.Context, in *Input) (any, error) { return in.Module() + "!", boom })
	v, err := m.Run(context.Background(), NewInput(nil, ModuleSpec{Name: "m"}, 0))
	if v != "m!" || err != boom {
		t.Errorf("Run = %v, %v", v, err)
	}
}

// TestInputReadStale checks derived_from_stale bookkeeping: stale, expired and
// derived-from-stale reads mark the module's input; live and missing reads do not.
func TestInputReadStale(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	lg := lastgood.New()
	lg.SetTTL("old", lastgood.TTL{Fixed: time.Second})
	lg.SetTTL("ancient", lastgood.TTL{Fixed: time.Second})
	lg.Put(lastgood.Entry{Key: "old", Value: "o", Module: "p", TickID: 5, Written: t0.Add(-500 * time.Millisecond)})
	lg.Put(lastgood.Entry{Key: "ancient", Value: "a", Module: "q", TickID: 1, Written: t0.Add(-time.Hour)})
	lg.Put(lastgood.Entry{Key: "fresh", Value: "lg", Module: "f", TickID: 5, Written: t0.Add(-time.Millisecond)})
	board := blackboard.New(lg)
	board.Begin(6, t0)
	board.Put(
		blackboard.Entry{Key: "fresh", Value: "f", Module: "f", TickID: 6, Source: blackboard.Live},
		blackboard.Entry{Key: "derived", Value: "d", Module: "d", TickID: 6, Source: blackboard.Live, DerivedFromStale: true},
	)

	tests := []struct {
		key       string
		ok        bool
		value     any
		readStale bool
	}{
		{"fresh", true, "f", false},
		{"missing", false, nil, false},
		{"old", true, "o", true},
		{"ancient", true, nil, true},
		{"derived", true, "d", true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			in := NewInput(board, ModuleSpec{Name: "reader", Reads: []string{tt.key}}, 2)
			in.Begin(6, t0.Add(time.Second))
			e, ok := in.Get(tt.key)
			if ok != tt.ok || e.Value != tt.value {
				t.Fatalf("Get(%q) = %+v, %v; want value %v, ok %v", tt.key, e, ok, tt.value, tt.ok)
			}
			if in.ReadStale() != tt.readStale {
				t.Errorf("ReadStale() = %v after reading %q, want %v", in.ReadStale(), tt.key, tt.readStale)
			}
			// A live read afterwards does not clear the mark; Begin does.
			in.Get("fresh")
			if in.ReadStale() != tt.readStale {
				t.Errorf("ReadStale() changed to %v after a live read", in.ReadStale())
			}
			in.Begin(7, t0)
			if in.ReadStale() {
				t.Error("Begin did not reset ReadStale")
			}
			if v := in.Value(tt.key); v != tt.value || in.ReadStale() != tt.readStale {
				t.Errorf("Value(%q) = %v (ReadStale %v), want %v (%v)", tt.key, v, in.ReadStale(), tt.value, tt.readStale)
			}
		})
	}
}

func TestInputAccessors(t *testing.T) {
	deadline := time.Date(2025, 1, 1, 0, 0, 0, 50_000_000, time.UTC)
	in := NewInput(nil, ModuleSpec{Name: "lidar", Reads: []string{"a", "b"}}, 3)
	in.Begin(42, deadline)
	in.SetAttempt(2)
	if in.Module() != "lidar" || in.Tier() != 3 || in.TickID() != 42 || in.Attempt() != 2 ||
		!in.Deadline().Equal(deadline) || !slices.Equal(in.Reads(), []string{"a", "b"}) {
		t.Errorf("accessors = %q %d %d %d %v %v", in.Module(), in.Tier(), in.TickID(), in.Attempt(), in.Deadline(), in.Reads())
	}
	in.Begin(43, deadline)
	if in.Attempt() != 0 || in.TickID() != 43 {
		t.Errorf("Begin did not reset the attempt (%d) or set the tick (%d)", in.Attempt(), in.TickID())
	}
	// Without a board nothing is served.
	if e, ok := in.Get("a"); ok || e.Value != nil || in.ReadStale() {
		t.Errorf("Get without a board = %+v, %v", e, ok)
	}
}

// TestInputSeesEarlierTiersOnly: a module in tier k reads the live values of tiers < k and
// the tagged last-known-good value of a key written by its own tier in this tick (which
// counts as a stale read).
func TestInputSeesEarlierTiersOnly(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	lg := lastgood.New()
	lg.Put(lastgood.Entry{Key: "cam.result", Value: "frame-1", Module: "cam", TickID: 1, Written: t0})
	board := blackboard.New(lg)
	board.Begin(2, t0.Add(100*time.Millisecond))
	board.Set(board.Slot("cam.result"), 2, blackboard.Entry{Value: "frame-2", Module: "cam", TickID: 2, Source: blackboard.Live})

	for tier, want := range map[int]struct {
		value string
		stale bool
	}{1: {"frame-1", true}, 2: {"frame-1", true}, 3: {"frame-2", false}} {
		in := NewInput(board, ModuleSpec{Name: "reader"}, tier)
		in.Begin(2, t0.Add(time.Second))
		e, ok := in.Get("cam.result")
		if !ok || e.Value != want.value || e.Stale != want.stale || in.ReadStale() != want.stale {
			t.Errorf("tier %d: Get = %+v, %v (ReadStale %v); want %q stale=%v", tier, e, ok, in.ReadStale(), want.value, want.stale)
		}
	}
}
