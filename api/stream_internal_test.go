package api

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

// The latest tick's stream event is framed once and shared: every subscriber writes the
// same bytes, with no allocation of its own, and a read of the latest tick (its body, and
// the body with its newline) answers with slices of them that an append cannot overwrite.
func TestTickEventSharedOncePerTick(t *testing.T) {
	cfg := cycle.Config{Tiers: []tiers.Tier{{Name: "safety", Budget: time.Second, MaxAttempts: 1,
		Breaker: breaker.Settings{FailureThreshold: 5, Cooldown: time.Hour}}}}
	mod := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	e, err := cycle.New(cfg, []cycle.Registration{{Spec: tiers.ModuleSpec{Name: "m", Tier: "safety"}, Module: mod}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	s := newServer(Options{Engine: e, Logger: zap.NewNop()})
	sum, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.tickEvent(sum)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := s.encode(sum)
	want := "event: tick\nid: " + s.eventID(sum.TickID) + "\ndata: " + string(body) + "\n\n"
	if string(ev) != want {
		t.Fatalf("event %q, want %q", ev, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = s.tickEvent(sum) }); allocs != 0 {
		t.Fatalf("a subscriber's event costs %v allocations; want the shared bytes", allocs)
	}
	again, _ := s.tickEvent(sum)
	if &again[0] != &ev[0] {
		t.Fatal("a second subscriber got bytes of its own")
	}
	c := s.enc.Load()
	if !bytes.Equal(c.wire, append(bytes.Clone(body), '\n')) || cap(c.body) != len(c.body) || cap(c.wire) != len(c.wire) {
		t.Fatalf("body %q and wire %q: a read's answer is not the body and its newline, capped", c.body, c.wire)
	}
}
