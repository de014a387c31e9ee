package modules_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// input returns the engine's view of attempt n of tick id for a module.
func input(tick uint64, attempt int) *tiers.Input {
	in := tiers.NewInput(nil, tiers.ModuleSpec{Name: "m"}, 1)
	in.Begin(tick, time.Time{})
	in.SetAttempt(attempt)
	return in
}

func mustBuiltin(t *testing.T, s modules.Settings, opts ...modules.Option) *modules.Builtin {
	t.Helper()
	b, err := modules.NewBuiltin(s, opts...)
	if err != nil {
		t.Fatalf("NewBuiltin: %v", err)
	}
	return b
}

// constRand returns a rand source that always yields u.
func constRand(u float64) func() float64 { return func() float64 { return u } }

func TestValueReturnedAsIs(t *testing.T) {
	v := map[string]any{"obstacles": 0}
	b := mustBuiltin(t, modules.Settings{Value: v})
	got, err := b.Run(context.Background(), input(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := got.(map[string]any); !ok || m["obstacles"] != 0 {
		t.Fatalf("Run = %#v, want the configured value", got)
	}
	// A nil input is tick 0, attempt 1.
	if _, err := b.Run(context.Background(), nil); err != nil {
		t.Fatalf("Run(nil input) = %v", err)
	}
}

func TestLatency(t *testing.T) {
	tests := []struct {
		name    string
		latency string
		u       float64
		want    time.Duration
	}{
		{"fixed", "2ms", 0.9, 2 * time.Millisecond},
		{"range low", "1ms-5ms", 0, time.Millisecond},
		{"range middle", "1ms-5ms", 0.5, 3 * time.Millisecond},
		{"range high", "1ms-5ms", 0.999999, 5*time.Millisecond - 4*time.Nanosecond},
		{"zero", "0s", 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := modules.ParseLatency(tt.latency)
				if err != nil {
					t.Fatal(err)
				}
				b := mustBuiltin(t, modules.Settings{Value: 1, Faults: modules.Faults{Latency: l}}, modules.WithRand(constRand(tt.u)))
				t0 := time.Now()
				if _, err := b.Run(context.Background(), input(1, 1)); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(t0); got != tt.want {
					t.Fatalf("attempt took %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBuiltin(t, modules.Settings{Value: 1, Faults: modules.Faults{Latency: modules.FixedLatency(time.Second)}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, err := b.Run(ctx, input(1, 1))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
		}
		if got := time.Since(t0); got != 30*time.Millisecond {
			t.Fatalf("returned after %v, want 30ms", got)
		}
	})
}

func TestLatencyOnFakeClock(t *testing.T) {
	fc := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	b := mustBuiltin(t, modules.Settings{Value: "ok", Faults: modules.Faults{Latency: modules.FixedLatency(5 * time.Millisecond)}}, modules.WithClock(fc))
	done := make(chan any)
	go func() {
		v, _ := b.Run(context.Background(), input(1, 1))
		done <- v
	}()
	if err := fc.BlockUntil(context.Background(), 1); err != nil { // the attempt's latency timer
		t.Fatal(err)
	}
	fc.Advance(4 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("attempt returned before its latency elapsed")
	default:
	}
	fc.Advance(time.Millisecond)
	if v := <-done; v != "ok" {
		t.Fatalf("Run = %v", v)
	}
}

func TestHangIgnoresContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBuiltin(t, modules.Settings{Value: 7, Faults: modules.Faults{Hang: 2 * time.Second}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		v, err := b.Run(ctx, input(1, 1))
		if got := time.Since(t0); got != 2*time.Second {
			t.Fatalf("hang returned after %v, want 2s whatever the context says", got)
		}
		if err != nil || v != 7 {
			t.Fatalf("Run after hang = %v, %v", v, err)
		}
	})
}

func TestFailRate(t *testing.T) {
	k := fault.KindDownstream
	tests := []struct {
		name     string
		rate     float64
		u        float64
		kind     fault.Kind
		wantFail bool
		wantKind fault.Kind
	}{
		{"below rate fails", 0.3, 0.2, fault.KindNone, true, fault.KindTransient},
		{"above rate passes", 0.3, 0.5, fault.KindNone, false, fault.KindNone},
		{"rate 1 always fails", 1, 0.999, k, true, k},
		{"rate 0 never fails", 0, 0, k, false, fault.KindNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBuiltin(t, modules.Settings{Value: 1, Faults: modules.Faults{FailRate: tt.rate, FailKind: tt.kind}}, modules.WithRand(constRand(tt.u)))
			_, err := b.Run(context.Background(), input(1, 1))
			if (err != nil) != tt.wantFail {
				t.Fatalf("Run err = %v, want failure %v", err, tt.wantFail)
			}
			if got := fault.Classify(err); got != tt.wantKind {
				t.Fatalf("kind %v, want %v", got, tt.wantKind)
			}
			if tt.wantFail && !errors.Is(err, modules.ErrInjected) {
				t.Fatalf("%v does not wrap ErrInjected", err)
			}
		})
	}
}

func TestFailTicks(t *testing.T) {
	b := mustBuiltin(t, modules.Settings{Value: 1, Faults: modules.Faults{
		FailTicks: []modules.Window{{3, 5}, {9, 9}}, FailKind: fault.KindContract}})
	for tick := uint64(1); tick <= 11; tick++ {
		want := (tick >= 3 && tick <= 5) || tick == 9
		for attempt := 1; attempt <= 3; attempt++ {
			_, err := b.Run(context.Background(), input(tick, attempt))
			if (err != nil) != want {
				t.Fatalf("tick %d attempt %d: err %v, want failure %v", tick, attempt, err, want)
			}
			if want && fault.Classify(err) != fault.KindContract {
				t.Fatalf("tick %d: kind %v", tick, fault.Classify(err))
			}
		}
	}
}

func TestFailAttempts(t *testing.T) {
	b := mustBuiltin(t, modules.Settings{Value: "v", Faults: modules.Faults{FailAttempts: 2}})
	for tick := uint64(1); tick <= 3; tick++ {
		for attempt := 1; attempt <= 4; attempt++ {
			v, err := b.Run(context.Background(), input(tick, attempt))
			if want := attempt <= 2; (err != nil) != want {
				t.Fatalf("tick %d attempt %d: %v, %v", tick, attempt, v, err)
			}
		}
	}
}

func TestPanic(t *testing.T) {
	b := mustBuiltin(t, modules.Settings{Value: 1, Faults: modules.Faults{Panic: true}})
	defer func() {
		p := recover()
		err, ok := p.(error)
		if !ok || !errors.Is(err, modules.ErrInjected) {
			t.Fatalf("recovered %v, want an error wrapping ErrInjected", p)
		}
	}()
	b.Run(context.Background(), input(1, 1))
	t.Fatal("Run did not panic")
}

func TestNewBuiltinRejectsInvalidSettings(t *testing.T) {
	_, err := modules.NewBuiltin(modules.Settings{Faults: modules.Faults{
		Latency:      modules.Latency{Min: 5 * time.Millisecond, Max: time.Millisecond},
		FailRate:     1.5,
		FailTicks:    []modules.Window{{9, 3}, {0, 1}},
		FailAttempts: -1,
		Hang:         -time.Second,
	}})
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want *tiers.ValidationError", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	want := "latency fail_rate fail_ticks[0] fail_ticks[1] fail_attempts hang"
	if got := strings.Join(paths, " "); got != want {
		t.Fatalf("paths %q, want %q", got, want)
	}
}

func TestParseLatency(t *testing.T) {
	tests := []struct {
		in      string
		want    modules.Latency
		wantErr bool
	}{
		{"", modules.Latency{}, false},
		{"0", modules.Latency{}, false},
		{"2ms", modules.FixedLatency(2 * time.Millisecond), false},
		{"1ms-5ms", modules.Latency{Min: time.Millisecond, Max: 5 * time.Millisecond}, false},
		{" 1ms - 5ms ", modules.Latency{Min: time.Millisecond, Max: 5 * time.Millisecond}, false},
		{"-1ms", modules.FixedLatency(-time.Millisecond), false}, // parsed; Validate rejects it
		{"fast", modules.Latency{}, true},
		{"1ms-", modules.Latency{}, true},
		{"1ms-x", modules.Latency{}, true},
		{"5", modules.Latency{}, true},
	}
	for _, tt := range tests {
		got, err := modules.ParseLatency(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseLatency(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for _, s := range []string{"2ms", "1ms-5ms", "0s"} {
		l, _ := modules.ParseLatency(s)
		if l.String() != s {
			t.Errorf("String of %q = %q", s, l.String())
		}
	}
}

func TestSetFaultsAtRuntime(t *testing.T) {
	b := mustBuiltin(t, modules.Settings{Value: 1})
	ctx := context.Background()
	if _, err := b.Run(ctx, input(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetFaults(modules.Faults{FailRate: 1, FailKind: fault.KindDownstream}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Run(ctx, input(2, 1)); fault.Classify(err) != fault.KindDownstream {
		t.Fatalf("after SetFaults: %v", err)
	}
	if err := b.SetFaults(modules.Faults{FailRate: 2}); err == nil {
		t.Fatal("SetFaults accepted fail_rate 2")
	}
	if b.Faults().FailRate != 1 {
		t.Fatal("a refused SetFaults changed the faults")
	}
	if f := b.ResetFaults(); f.FailRate != 0 {
		t.Fatalf("ResetFaults = %+v", f)
	}
	if _, err := b.Run(ctx, input(3, 1)); err != nil {
		t.Fatalf("after reset: %v", err)
	}
}

// TestFaultsSwitchWhileRunning runs attempts and fault changes concurrently; the race
// detector checks that Run never sees a half-written Faults.
func TestFaultsSwitchWhileRunning(t *testing.T) {
	b := mustBuiltin(t, modules.Settings{Value: 1})
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tick := uint64(1); ; tick++ {
			select {
			case <-stop:
				return
			default:
			}
			b.Run(ctx, input(tick, 1))
		}
	}()
	for i := range 200 {
		ticks := []modules.Window{{uint64(i + 1), uint64(i + 10)}}
		if _, err := b.PatchFaults(modules.FaultsPatch{FailTicks: &ticks}); err != nil {
			t.Fatal(err)
		}
		b.Faults()
	}
	close(stop)
	wg.Wait()
	if _, err := b.Run(ctx, input(205, 1)); err == nil {
		t.Fatal("tick 205 is in the last window [200, 209] but did not fail")
	}
}

func TestApplyFaultsJSON(t *testing.T) {
	newB := func() *modules.Builtin {
		return mustBuiltin(t, modules.Settings{Value: 1, Faults: modules.Faults{FailAttempts: 1, Latency: modules.FixedLatency(time.Millisecond)}})
	}
	tests := []struct {
		name      string
		body      string
		wantPaths []string // nil: success
		check     func(t *testing.T, f modules.Faults)
		decode    bool // a *DecodeError (400) rather than a *tiers.ValidationError (422)
	}{
		{name: "partial change keeps the rest", body: `{"fail_rate": 0.5, "fail_kind": "downstream"}`,
			check: func(t *testing.T, f modules.Faults) {
				if f.FailRate != 0.5 || f.FailKind != fault.KindDownstream || f.FailAttempts != 1 || f.Latency != modules.FixedLatency(time.Millisecond) {
					t.Fatalf("faults %+v", f)
				}
			}},
		{name: "all fields", body: `{"latency":"1ms-3ms","fail_ticks":[[3,9]],"fail_attempts":0,"hang":"2s","panic":true}`,
			check: func(t *testing.T, f modules.Faults) {
				if f.Latency.Max != 3*time.Millisecond || len(f.FailTicks) != 1 || f.FailTicks[0] != (modules.Window{3, 9}) ||
					f.FailAttempts != 0 || f.Hang != 2*time.Second || !f.Panic {
					t.Fatalf("faults %+v", f)
				}
			}},
		{name: "reset then set", body: `{"reset": true, "fail_rate": 0.25}`,
			check: func(t *testing.T, f modules.Faults) {
				if f.FailRate != 0.25 || f.FailAttempts != 1 {
					t.Fatalf("faults %+v", f)
				}
			}},
		{name: "unknown field", body: `{"fail_rte": 0.5}`, wantPaths: []string{"fail_rte"}, decode: true},
		{name: "wrong types", body: `{"fail_rate": "high", "hang": 5, "panic": "yes"}`, wantPaths: []string{"fail_rate", "hang", "panic"}, decode: true},
		{name: "invalid values", body: `{"fail_rate": 1.5, "fail_ticks": [[9, 3]], "latency": "5ms-1ms"}`, wantPaths: []string{"latency", "fail_rate", "fail_ticks[0]"}},
		{name: "bad kind", body: `{"fail_kind": "flaky"}`, wantPaths: []string{"fail_kind"}},
		{name: "delays over their bounds", body: `{"latency": "1000000h", "hang": "1000000h", "fail_attempts": 1000000000}`,
			wantPaths: []string{"latency", "fail_attempts", "hang"}},
		{name: "latency range over its bound", body: `{"latency": "1ms-2h"}`, wantPaths: []string{"latency"}},
		{name: "delays at their bounds", body: `{"latency": "1h", "hang": "1h", "fail_attempts": 100}`,
			check: func(t *testing.T, f modules.Faults) {
				if f.Latency.Max != modules.MaxLatency || f.Hang != modules.MaxHang || f.FailAttempts != tiers.MaxAttempts {
					t.Fatalf("faults %+v", f)
				}
			}},
		{name: "window of three ticks", body: `{"fail_ticks": [[3, 9, 12]]}`, wantPaths: []string{"fail_ticks"}, decode: true},
		{name: "window of one tick", body: `{"fail_ticks": [[3]]}`, wantPaths: []string{"fail_ticks"}, decode: true},
		{name: "malformed", body: `{"fail_rate": `, wantPaths: []string{""}, decode: true},
		{name: "not an object", body: `[1]`, wantPaths: []string{""}, decode: true},
		{name: "trailing data", body: `{} {}`, wantPaths: []string{""}, decode: true},
		{name: "empty", body: ``, wantPaths: []string{""}, decode: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newB()
			before := b.Faults()
			f, err := modules.ApplyFaultsJSON(b, []byte(tt.body))
			if tt.wantPaths == nil {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, f)
				if got := b.Faults(); got.FailRate != f.FailRate || got.Panic != f.Panic {
					t.Fatalf("Faults() = %+v, ApplyFaultsJSON returned %+v", got, f)
				}
				return
			}
			var ve *tiers.ValidationError
			var de *modules.DecodeError
			var ps tiers.Problems
			switch {
			case tt.decode && errors.As(err, &de):
				ps = de.Problems
			case !tt.decode && errors.As(err, &ve):
				ps = ve.Problems
			default:
				t.Fatalf("err = %v (%T), want a DecodeError: %v", err, err, tt.decode)
			}
			var paths []string
			for _, p := range ps {
				paths = append(paths, p.Path)
			}
			if strings.Join(paths, ",") != strings.Join(tt.wantPaths, ",") {
				t.Fatalf("paths %q, want %q (%v)", paths, tt.wantPaths, err)
			}
			if got := b.Faults(); got.FailRate != before.FailRate || len(got.FailTicks) != len(before.FailTicks) {
				t.Fatalf("a refused patch changed the faults: %+v", got)
			}
		})
	}
}

func TestApplyFaultsJSONNotInjectable(t *testing.T) {
	m := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return nil, nil })
	_, err := modules.ApplyFaultsJSON(m, []byte(`{"fail_rate": 1}`))
	if !errors.Is(err, modules.ErrNotInjectable) {
		t.Fatalf("err = %v, want ErrNotInjectable", err)
	}
}

func TestFaultsJSON(t *testing.T) {
	f := modules.Faults{Latency: modules.Latency{Min: time.Millisecond, Max: 5 * time.Millisecond}, FailRate: 0.1,
		FailTicks: []modules.Window{{3, 9}}, Hang: 2 * time.Second}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"latency":"1ms-5ms","fail_rate":0.1,"fail_kind":"transient","fail_ticks":[[3,9]],"fail_attempts":0,"hang":"2s","panic":false}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	s, err := json.Marshal(modules.Settings{Value: map[string]int{"x": 1}, Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(s), `{"value":{"x":1},"latency":"1ms-5ms",`) {
		t.Fatalf("settings JSON %s", s)
	}
}

// TestBuiltinDerivedFromStale: a builtin module that reads a key served stale marks its
// own output derived_from_stale, as Go and remote modules do; one that reads a live key
// does not.
func TestBuiltinDerivedFromStale(t *testing.T) {
	source, err := modules.NewBuiltin(modules.Settings{Value: 1, Faults: modules.Faults{FailTicks: []modules.Window{{2, 100}}}})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := modules.NewBuiltin(modules.Settings{Value: 2})
	if err != nil {
		t.Fatal(err)
	}
	e, err := cycle.New(cycle.Config{Tiers: engineTiers(100 * time.Millisecond), DefaultTTL: time.Hour}, []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "source", Tier: "knowledge"}, Module: source},
		{Spec: tiers.ModuleSpec{Name: "reader", Tier: "planning", Reads: []string{"source.result"}}, Module: reader},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	for tick, want := range []bool{false, true} {
		s, err := e.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if src := line(t, s, "source"); tick == 1 && !src.Served.Stale {
			t.Fatalf("tick %d: source not served stale: %+v", s.TickID, src.Served)
		}
		if got := line(t, s, "reader").Served.DerivedFromStale; got != want {
			t.Errorf("tick %d: reader derived_from_stale = %v, want %v", s.TickID, got, want)
		}
	}
}
