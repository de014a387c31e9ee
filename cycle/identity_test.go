package cycle

import (
	"context"
	"testing"

	"github.com/cycled/cycled/faultsummary"
)

// A daemon that records its ticks starts after the last recorded id, stamps its run and
// the configuration's generation on every summary, and may annotate it before publishing.
func TestIdentityStampsSummaries(t *testing.T) {
	annotated := 0
	e := newEngine(t, Config{}, []Registration{reg("s", "safety", ok(1))}, WithIdentity(Identity{
		FirstTick: 42, RunID: "run-a",
		Annotate: func(s *faultsummary.Summary) {
			annotated++
			s.Recorder = &faultsummary.RecorderStatus{Dropped: uint64(annotated)}
		},
	}))
	s1, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(reg("k", "knowledge", ok(2))); err != nil {
		t.Fatal(err)
	}
	s2, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s1.TickID != 42 || s2.TickID != 43 {
		t.Fatalf("tick ids %d, %d; want 42, 43", s1.TickID, s2.TickID)
	}
	if s1.RunID != "run-a" || s2.RunID != "run-a" {
		t.Fatalf("run ids %q, %q", s1.RunID, s2.RunID)
	}
	if s1.Generation == 0 || s2.Generation <= s1.Generation {
		t.Fatalf("generations %d then %d; want a registration to raise it", s1.Generation, s2.Generation)
	}
	if s2.Recorder == nil || s2.Recorder.Dropped != 2 || e.Latest() != s2 {
		t.Fatalf("annotation not carried by the published summary: %+v", s2.Recorder)
	}
}

// Without an identity, ids start at 1 and no run id is stamped (today's behaviour).
func TestNoIdentityStartsAtOne(t *testing.T) {
	e := newEngine(t, Config{}, []Registration{reg("s", "safety", ok(1))})
	s, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.TickID != 1 || s.RunID != "" || s.Recorder != nil {
		t.Fatalf("got id %d run %q recorder %v", s.TickID, s.RunID, s.Recorder)
	}
}
