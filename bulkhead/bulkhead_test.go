package bulkhead_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/clock"
)

func TestTryAcquireCapsInFlight(t *testing.T) {
	b := bulkhead.New(bulkhead.Settings{Name: "db", MaxInFlight: 2})
	for i := range 2 {
		if !b.TryAcquire(true) {
			t.Fatalf("permit %d of two was refused", i+1)
		}
	}
	if b.TryAcquire(true) {
		t.Fatal("a third permit of two was given")
	}
	b.Release()
	if !b.TryAcquire(true) {
		t.Fatal("a released permit was not given again")
	}
	s := b.Snapshot()
	if s.InFlight != 2 || s.Admitted != 3 || s.Rejections != 1 || s.MaxInFlight != 2 || s.Name != "db" {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestUpdateKeepsPermitsHeld(t *testing.T) {
	b := bulkhead.New(bulkhead.Settings{MaxInFlight: 3})
	for range 3 {
		b.TryAcquire(true)
	}
	b.Update(bulkhead.Settings{MaxInFlight: 2})
	b.Release()
	if b.TryAcquire(true) {
		t.Fatal("a permit was given with 2 held of a new limit of 2")
	}
	b.Release()
	if !b.TryAcquire(true) {
		t.Fatal("no permit with 1 held of 2")
	}
}

func TestAcquireWithinWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := bulkhead.New(bulkhead.Settings{MaxInFlight: 1, Wait: 10 * time.Millisecond})
		b.TryAcquire(true)
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(1)
		var got bool
		go func() {
			defer wg.Done()
			got = b.AcquireWithin(clock.Real(), b.Wait(), nil)
		}()
		synctest.Wait()
		if s := b.Snapshot(); s.Waiting != 1 {
			t.Fatalf("waiting %d, want 1", s.Waiting)
		}
		time.Sleep(4 * time.Millisecond) // virtual time: the holder returns after 4ms
		b.Release()
		wg.Wait()
		if !got || time.Since(start) != 4*time.Millisecond {
			t.Fatalf("acquired %v after %v, want true after 4ms", got, time.Since(start))
		}
		// Nobody releases: the wait ends at its bound, refused and counted.
		if b.AcquireWithin(clock.Real(), 10*time.Millisecond, nil) || time.Since(start) != 14*time.Millisecond {
			t.Fatalf("a full bulkhead gave a permit, or the wait did not last 10ms (%v)", time.Since(start))
		}
		// done ends it early.
		done := make(chan struct{})
		close(done)
		if b.AcquireWithin(clock.Real(), time.Hour, done) {
			t.Fatal("acquired after done")
		}
		if s := b.Snapshot(); s.Rejections != 2 || s.Waiting != 0 {
			t.Fatalf("snapshot %+v, want 2 rejections, none waiting", s)
		}
	})
}

// TestReleasesWakeEveryWaiter: two permits freed at once reach both waiters.
func TestReleasesWakeEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := bulkhead.New(bulkhead.Settings{MaxInFlight: 2})
		b.TryAcquire(true)
		b.TryAcquire(true)
		var wg sync.WaitGroup
		res := make([]bool, 2)
		for i := range res {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i] = b.AcquireWithin(clock.Real(), time.Second, nil)
			}()
		}
		synctest.Wait()
		b.Release()
		b.Release()
		wg.Wait()
		if !res[0] || !res[1] {
			t.Fatalf("waiters got %v, want both", res)
		}
	})
}

func TestRefund(t *testing.T) {
	b := bulkhead.New(bulkhead.Settings{MaxInFlight: 1})
	b.TryAcquire(true)
	b.Refund()
	if s := b.Snapshot(); s.InFlight != 0 || s.Admitted != 0 || s.Rejections != 1 {
		t.Fatalf("after a refund: %+v, want nothing in flight or admitted, 1 rejection", s)
	}
}
