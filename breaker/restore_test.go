package breaker_test

import (
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
)

// TestOpenSince: a closed breaker opened since an earlier time half-opens when the
// cooldown counted from that time has passed; an open one is left alone.
func TestOpenSince(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	r := breaker.NewRegistry(breaker.WithClock(c))
	b, err := r.GetOrCreate(breaker.Settings{Name: "llm", FailureThreshold: 1, Cooldown: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !b.OpenSince(c.Now().Add(-4 * time.Second)) {
		t.Fatal("OpenSince refused on a closed breaker")
	}
	if s := b.State(); s != breaker.Open {
		t.Fatalf("state %v, want open", s)
	}
	if b.OpenSince(c.Now()) {
		t.Error("OpenSince accepted on an open breaker")
	}
	c.Advance(5 * time.Second) // 9 s of the 10 s cooldown
	if s := b.State(); s != breaker.Open {
		t.Fatalf("after 9 s: state %v, want open", s)
	}
	c.Advance(time.Second)
	if s := b.State(); s != breaker.HalfOpen {
		t.Fatalf("after 10 s: state %v, want half-open", s)
	}
}
