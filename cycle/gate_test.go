package cycle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

// scriptedGate answers Admit from a table and records what it was asked.
type scriptedGate struct {
	answers []gateAnswer
	asked   []uint64 // the next ids it was asked with
}

type gateAnswer struct {
	id, epoch uint64
	ok        bool
}

func (g *scriptedGate) Admit(_ time.Time, next uint64) (uint64, uint64, bool) {
	a := g.answers[len(g.asked)]
	g.asked = append(g.asked, next)
	return a.id, a.epoch, a.ok
}

// TestGate: a refused tick runs no module and takes no id; an admitted one carries the
// gate's epoch, and an id above the next one makes ids jump (never go back: an id below
// next is raised to next).
func TestGate(t *testing.T) {
	var runs atomic.Int64
	mod := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { runs.Add(1); return 1, nil })
	g := &scriptedGate{answers: []gateAnswer{
		{id: 1, epoch: 7, ok: true},
		{ok: false},
		{id: 100, epoch: 9, ok: true},
		{id: 3, epoch: 9, ok: true},
	}}
	e, err := cycle.New(cycle.Config{Tiers: []tiers.Tier{{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1}}},
		[]cycle.Registration{{Spec: tiers.ModuleSpec{Name: "m", Tier: "safety"}, Module: mod}},
		cycle.WithGate(g), cycle.WithClock(clock.NewFake(time.Unix(0, 0))))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	want := []struct {
		id, epoch uint64
		err       error
		runs      int64
	}{{1, 7, nil, 1}, {0, 0, cycle.ErrNotAdmitted, 1}, {100, 9, nil, 2}, {101, 9, nil, 3}}
	for i, w := range want {
		s, err := e.Tick(context.Background())
		if !errors.Is(err, w.err) {
			t.Fatalf("tick %d: err %v, want %v", i, err, w.err)
		}
		if runs.Load() != w.runs {
			t.Errorf("tick %d: module ran %d times, want %d", i, runs.Load(), w.runs)
		}
		if w.err != nil {
			continue
		}
		if s.TickID != w.id || s.Epoch != w.epoch {
			t.Errorf("tick %d: id %d epoch %d, want %d %d", i, s.TickID, s.Epoch, w.id, w.epoch)
		}
	}
	if wantAsked := []uint64{1, 2, 2, 101}; len(g.asked) != 4 || g.asked[1] != wantAsked[1] || g.asked[3] != wantAsked[3] {
		t.Errorf("asked with %v, want %v", g.asked, wantAsked)
	}
}

// TestTakeOver: a latched emergency handed over stays latched on a healthy tick.
func TestTakeOver(t *testing.T) {
	ok := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	e, err := cycle.New(cycle.Config{Tiers: []tiers.Tier{{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1}},
		Emergency: cycle.EmergencyConfig{Latch: true}},
		[]cycle.Registration{{Spec: tiers.ModuleSpec{Name: "m", Tier: "safety"}, Module: ok}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.TakeOver(cycle.Handover{Emergency: &faultsummary.Emergency{Active: true, SinceTick: 41, Reason: "m failed", Latched: true}})
	if em := e.Emergency(); !em.Active || !em.Latched {
		t.Fatalf("emergency after TakeOver: %+v", em)
	}
	for range 5 {
		s, err := e.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !s.Emergency.Active || !s.Emergency.Latched || s.Emergency.SinceTick != 41 {
			t.Fatalf("tick %d: emergency %+v, want the latched one of tick 41", s.TickID, s.Emergency)
		}
	}
}

// TestTakeOverLastGood: a module that fails in the first tick after a takeover serves the
// previous active's value, stale, with its true age.
func TestTakeOverLastGood(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fails := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
		return nil, errors.New("lidar offline")
	})
	ok := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	e, err := cycle.New(cycle.Config{Tiers: []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1},
		{Name: "work", Budget: 50 * time.Millisecond, MaxAttempts: 1}}},
		[]cycle.Registration{
			{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: ok},
			{Spec: tiers.ModuleSpec{Name: "lidar", Tier: "work", TTL: lastgood.TTL{Fixed: 5 * time.Second}}, Module: fails}},
		cycle.WithClock(clock.NewFake(t0)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.TakeOver(cycle.Handover{LastGood: []lastgood.Entry{
		{Key: "lidar.result", Value: 7, Module: "lidar", TickID: 40, Written: t0.Add(-time.Second)},
		{Key: "never.written"}, // no write time: ignored
	}})
	s, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var served faultsummary.Served
	for _, m := range s.Modules() {
		if m.Name == "lidar" {
			served = m.Served
		}
	}
	if served.Source != blackboard.LastGood || !served.Stale || served.AgeMs != 1000 || served.Value != 7 {
		t.Errorf("lidar served %+v; want the handed-over 7, stale, 1000 ms old", served)
	}
}

// TestTakeOverBreakers: a breaker open on the previous active is open here, and the module
// behind it is not run, until the cooldown counted from its opening has passed.
func TestTakeOverBreakers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := clock.NewFake(t0)
	var runs atomic.Int64
	mod := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { runs.Add(1); return 1, nil })
	ok := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	e, err := cycle.New(cycle.Config{Tiers: []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1},
		{Name: "work", Budget: 50 * time.Millisecond, MaxAttempts: 1,
			Breaker: breaker.Settings{FailureThreshold: 1, Cooldown: 10 * time.Second}}}},
		[]cycle.Registration{
			{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: ok},
			{Spec: tiers.ModuleSpec{Name: "llm", Tier: "work"}, Module: mod}},
		cycle.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.TakeOver(cycle.Handover{OpenBreakers: map[string]time.Time{"llm": t0.Add(-8 * time.Second), "gone": t0}})
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 0 {
		t.Fatalf("the module behind the handed-over open breaker ran")
	}
	c.Advance(2 * time.Second) // the cooldown, counted from the opening, has passed
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Errorf("the module ran %d times after the cooldown, want 1 (a probe)", runs.Load())
	}
}
