package faultsummary

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

func tick(id uint64) Event { return Event{Type: EventTick, Summary: &Summary{TickID: id}} }

// drain returns the tick ids buffered in s without blocking.
func drain(s *Subscription) []uint64 {
	var out []uint64
	for {
		select {
		case e, ok := <-s.C():
			if !ok {
				return out
			}
			out = append(out, e.Summary.TickID)
		default:
			return out
		}
	}
}

func TestHubDeliversInOrder(t *testing.T) {
	h := NewHub()
	a, b := h.Subscribe(8), h.Subscribe(8)
	defer a.Close()
	defer b.Close()
	if h.Subscribers() != 2 {
		t.Fatalf("Subscribers() = %d, want 2", h.Subscribers())
	}
	for id := uint64(1); id <= 5; id++ {
		h.Publish(tick(id))
	}
	h.Publish(Event{Type: EventBreaker, Breaker: &BreakerEvent{Breaker: "llm", To: "open"}})
	for name, s := range map[string]*Subscription{"a": a, "b": b} {
		for want := uint64(1); want <= 5; want++ {
			e := <-s.C()
			if e.Type != EventTick || e.Summary.TickID != want {
				t.Fatalf("%s: got %+v, want tick %d", name, e, want)
			}
		}
		if e := <-s.C(); e.Type != EventBreaker || e.Breaker.Breaker != "llm" {
			t.Errorf("%s: got %+v, want the breaker event", name, e)
		}
		if s.Dropped() != 0 {
			t.Errorf("%s: Dropped() = %d, want 0", name, s.Dropped())
		}
	}
}

// TestHubSlowSubscriberSkipsAhead: a subscriber that never reads does not block Publish;
// it keeps the newest events, in order, and counts the ones it skipped. A subscriber that
// keeps up, on the same hub, loses nothing.
func TestHubSlowSubscriberSkipsAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub()
		slow := h.Subscribe(3)
		defer slow.Close()
		fast := h.Subscribe(1)
		defer fast.Close()
		var got []uint64
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			for e := range fast.C() {
				got = append(got, e.Summary.TickID)
			}
		}()

		const n = 100
		published := make(chan struct{})
		go func() {
			defer close(published)
			for id := uint64(1); id <= n; id++ {
				h.Publish(tick(id))
				synctest.Wait() // let the fast reader take it before the next one
			}
		}()
		// If Publish blocked on the slow subscriber, the publisher would be durably blocked
		// here and published would stay open.
		<-published

		if d := slow.Dropped(); d != n-3 {
			t.Errorf("slow: Dropped() = %d, want %d", d, n-3)
		}
		if ids := drain(slow); !slices.Equal(ids, []uint64{n - 2, n - 1, n}) {
			t.Errorf("slow subscriber holds %v, want the newest three in order", ids)
		}
		fast.Close()
		<-readerDone
		if len(got) != n || fast.Dropped() != 0 {
			t.Errorf("fast subscriber got %d events, dropped %d; want %d and 0", len(got), fast.Dropped(), n)
		}
		for i, id := range got {
			if id != uint64(i+1) {
				t.Fatalf("fast subscriber got %v, want 1..%d in order", got, n)
			}
		}
	})
}

func TestHubPublishNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub()
		subs := make([]*Subscription, 16)
		for i := range subs {
			subs[i] = h.Subscribe(1)
		}
		done := make(chan struct{})
		go func() {
			for id := uint64(1); id <= 1000; id++ {
				h.Publish(tick(id))
			}
			close(done)
		}()
		synctest.Wait() // returns once the publisher has finished or is durably blocked
		select {
		case <-done:
		default:
			t.Fatal("Publish blocked on subscribers that never read")
		}
		for i, s := range subs {
			if s.Dropped() != 999 {
				t.Errorf("sub %d: Dropped() = %d, want 999", i, s.Dropped())
			}
			if ids := drain(s); !slices.Equal(ids, []uint64{1000}) {
				t.Errorf("sub %d holds %v, want [1000]", i, ids)
			}
			s.Close()
		}
	})
}

func TestSubscribeDefaultBuffer(t *testing.T) {
	h := NewHub()
	for _, buf := range []int{0, -1} {
		s := h.Subscribe(buf)
		for id := uint64(1); id <= 16; id++ {
			h.Publish(tick(id))
		}
		if s.Dropped() != 0 || len(s.C()) != 16 || cap(s.C()) != 16 {
			t.Errorf("Subscribe(%d): dropped %d, buffered %d/%d; want a buffer of 16", buf, s.Dropped(), len(s.C()), cap(s.C()))
		}
		h.Publish(tick(17))
		if s.Dropped() != 1 {
			t.Errorf("Subscribe(%d): Dropped() = %d after the 17th event, want 1", buf, s.Dropped())
		}
		s.Close()
	}
}

func TestSubscriptionClose(t *testing.T) {
	h := NewHub()
	s := h.Subscribe(4)
	other := h.Subscribe(4)
	defer other.Close()
	h.Publish(tick(1))
	s.Close()
	if h.Subscribers() != 1 {
		t.Errorf("Subscribers() after Close = %d, want 1", h.Subscribers())
	}
	// What was buffered before Close can still be read; then the channel is closed.
	if e, ok := <-s.C(); !ok || e.Summary.TickID != 1 {
		t.Errorf("first receive after Close = %+v, %v; want the buffered tick 1", e, ok)
	}
	if _, ok := <-s.C(); ok {
		t.Error("channel still open after Close")
	}
	// Publishing after Close neither panics nor delivers to the closed subscription.
	h.Publish(tick(2))
	if s.Dropped() != 0 {
		t.Errorf("closed subscription counted %d drops", s.Dropped())
	}
	if ids := drain(other); !slices.Equal(ids, []uint64{1, 2}) {
		t.Errorf("other subscriber got %v, want [1 2]", ids)
	}
	s.Close() // idempotent
	if h.Subscribers() != 1 {
		t.Errorf("Subscribers() after a second Close = %d, want 1", h.Subscribers())
	}
}

// TestHubConcurrent publishes from several goroutines while subscribers read at their own
// pace and others close mid-stream (under -race). Every subscriber sees each publisher's
// events in order, and what it received plus what it dropped is everything.
func TestHubConcurrent(t *testing.T) {
	h := NewHub()
	const publishers, perPublisher = 3, 2000
	type sub struct {
		s        *Subscription
		received int
		err      error
	}
	subs := make([]*sub, 6)
	var readers sync.WaitGroup
	for i := range subs {
		sb := &sub{s: h.Subscribe(1 + 7*i)}
		subs[i] = sb
		readers.Go(func() {
			last := make([]uint64, publishers)
			for e := range sb.s.C() {
				if e.Type != EventTick {
					sb.received++
					continue
				}
				p, id := e.Summary.TickID/perPublisher, e.Summary.TickID%perPublisher
				if id < last[p] && sb.err == nil {
					sb.err = fmt.Errorf("publisher %d: event %d after %d", p, id, last[p])
				}
				last[p] = id
				sb.received++
			}
		})
	}
	// Subscribers that come and go while events flow.
	var churn sync.WaitGroup
	churn.Go(func() {
		for range 200 {
			s := h.Subscribe(2)
			h.Publish(Event{Type: EventEmergency, Emergency: &EmergencyEvent{Reason: "churn"}})
			s.Close()
		}
	})
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Go(func() {
			for i := 1; i <= perPublisher-1; i++ {
				h.Publish(tick(uint64(p*perPublisher + i)))
			}
		})
	}
	pubs.Wait()
	churn.Wait()
	for _, sb := range subs {
		sb.s.Close()
	}
	readers.Wait()
	if h.Subscribers() != 0 {
		t.Errorf("Subscribers() = %d after closing all, want 0", h.Subscribers())
	}
	const total = publishers*(perPublisher-1) + 200
	for i, sb := range subs {
		if sb.err != nil {
			t.Errorf("sub %d: %v", i, sb.err)
		}
		if got := uint64(sb.received) + sb.s.Dropped(); got != total {
			t.Errorf("sub %d: received %d + dropped %d = %d, want %d", i, sb.received, sb.s.Dropped(), got, total)
		}
	}
}

func BenchmarkHubPublish16(b *testing.B) {
	b.Run("full-buffers", func(b *testing.B) {
		// Subscribers that never read: every Publish drops the oldest event of each.
		h := NewHub()
		for range 16 {
			defer h.Subscribe(8).Close()
		}
		e := tick(1)
		b.ReportAllocs()
		for b.Loop() {
			h.Publish(e)
		}
	})
	b.Run("reading", func(b *testing.B) {
		h := NewHub()
		var wg sync.WaitGroup
		subs := make([]*Subscription, 16)
		for i := range subs {
			subs[i] = h.Subscribe(64)
			wg.Go(func() {
				for range subs[i].C() {
				}
			})
		}
		e := tick(1)
		b.ReportAllocs()
		for b.Loop() {
			h.Publish(e)
		}
		b.StopTimer()
		for _, s := range subs {
			s.Close()
		}
		wg.Wait()
	})
}
