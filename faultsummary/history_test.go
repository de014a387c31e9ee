package faultsummary

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func ids(ss []*Summary) []uint64 {
	out := make([]uint64, len(ss))
	for i, s := range ss {
		out[i] = s.TickID
	}
	return out
}

func appendTicks(h *History, ids ...uint64) {
	for _, id := range ids {
		h.Append(&Summary{TickID: id})
	}
}

func TestHistoryEmpty(t *testing.T) {
	h := NewHistory(3)
	if h.Latest() != nil {
		t.Error("Latest() before the first tick is not nil")
	}
	if s, ok := h.Get(1); ok || s != nil {
		t.Errorf("Get(1) on an empty history = %v, %v", s, ok)
	}
	if l := h.List(10, 0); len(l) != 0 || l == nil {
		t.Errorf("List on an empty history = %#v, want an empty non-nil slice", l)
	}
	for n, want := range map[int]int{-5: 1, 0: 1, 1: 1, 1000: 1000} {
		if got := NewHistory(n).Cap(); got != want {
			t.Errorf("NewHistory(%d).Cap() = %d, want %d", n, got, want)
		}
	}
}

func TestHistoryRingEviction(t *testing.T) {
	h := NewHistory(3)
	appendTicks(h, 1, 2)
	if got := ids(h.List(0, 0)); !slices.Equal(got, []uint64{2, 1}) {
		t.Fatalf("List before the ring is full = %v", got)
	}
	appendTicks(h, 3, 4, 5)
	if l := h.Latest(); l == nil || l.TickID != 5 {
		t.Fatalf("Latest() = %v, want tick 5", l)
	}
	for id, want := range map[uint64]bool{0: false, 1: false, 2: false, 3: true, 4: true, 5: true, 6: false, 1 << 63: false} {
		s, ok := h.Get(id)
		if ok != want || (ok && s.TickID != id) || (!ok && s != nil) {
			t.Errorf("Get(%d) = %v, %v; want found=%v", id, s, ok, want)
		}
	}
	if got := ids(h.List(0, 0)); !slices.Equal(got, []uint64{5, 4, 3}) {
		t.Errorf("List(0, 0) = %v, want [5 4 3]", got)
	}
	if h.Cap() != 3 {
		t.Errorf("Cap() = %d", h.Cap())
	}
	// Wrap around several times.
	for id := uint64(6); id <= 100; id++ {
		appendTicks(h, id)
		if s, ok := h.Get(id - 2); !ok || s.TickID != id-2 {
			t.Fatalf("after %d: Get(%d) = %v, %v", id, id-2, s, ok)
		}
		if _, ok := h.Get(id - 3); ok {
			t.Fatalf("after %d: Get(%d) found an evicted tick", id, id-3)
		}
	}
}

// Tick ids must increase but need not be consecutive: Get still finds what is kept.
func TestHistoryGetWithGaps(t *testing.T) {
	h := NewHistory(4)
	appendTicks(h, 1, 5, 6, 10)
	for id, want := range map[uint64]bool{1: true, 2: false, 4: false, 5: true, 6: true, 7: false, 10: true, 11: false} {
		if s, ok := h.Get(id); ok != want || (ok && s.TickID != id) {
			t.Errorf("Get(%d) = %v, %v; want found=%v", id, s, ok, want)
		}
	}
	appendTicks(h, 20) // evicts 1
	if _, ok := h.Get(1); ok {
		t.Error("Get(1) found an evicted tick")
	}
	if s, ok := h.Get(5); !ok || s.TickID != 5 {
		t.Errorf("Get(5) = %v, %v", s, ok)
	}
}

func TestHistoryList(t *testing.T) {
	h := NewHistory(5)
	appendTicks(h, 1, 2, 3, 4, 5, 6, 7) // keeps 3..7
	tests := []struct {
		limit  int
		before uint64
		want   []uint64
	}{
		{0, 0, []uint64{7, 6, 5, 4, 3}},
		{-1, 0, []uint64{7, 6, 5, 4, 3}},
		{2, 0, []uint64{7, 6}},
		{100, 0, []uint64{7, 6, 5, 4, 3}},
		{0, 6, []uint64{5, 4, 3}},
		{2, 6, []uint64{5, 4}},
		{1, 4, []uint64{3}},
		{10, 3, []uint64{}},
		{10, 2, []uint64{}},
		{0, 100, []uint64{7, 6, 5, 4, 3}},
	}
	for _, tt := range tests {
		if got := ids(h.List(tt.limit, tt.before)); !slices.Equal(got, tt.want) {
			t.Errorf("List(%d, %d) = %v, want %v", tt.limit, tt.before, got, tt.want)
		}
	}
	// The result is the caller's: changing it does not change the history.
	l := h.List(0, 0)
	l[0] = &Summary{TickID: 999}
	if got := ids(h.List(1, 0)); !slices.Equal(got, []uint64{7}) {
		t.Errorf("List after mutating a result = %v", got)
	}
}

func TestHistoryWaitAlreadyAvailable(t *testing.T) {
	h := NewHistory(10)
	appendTicks(h, 1, 2, 3, 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing may block: the answer is already there
	for after, want := range map[uint64]uint64{0: 1, 1: 2, 2: 3, 3: 4} {
		s, err := h.Wait(ctx, after)
		if err != nil || s == nil || s.TickID != want {
			t.Errorf("Wait(after %d) = %v, %v; want tick %d", after, s, err, want)
		}
	}
	// A reader that fell behind the history skips ahead to the latest.
	small := NewHistory(2)
	appendTicks(small, 1, 2, 3, 4, 5)
	if s, err := small.Wait(ctx, 1); err != nil || s.TickID != 5 {
		t.Errorf("Wait(after 1) past the history = %v, %v; want the latest (5)", s, err)
	}
}

func TestHistoryWaitWakesOnAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory(10)
		appendTicks(h, 1)
		type result struct {
			s   *Summary
			err error
		}
		res := make(chan result, 1)
		go func() {
			s, err := h.Wait(t.Context(), 1)
			res <- result{s, err}
		}()
		synctest.Wait()
		select {
		case r := <-res:
			t.Fatalf("Wait returned %v, %v before a newer tick", r.s, r.err)
		default:
		}
		time.Sleep(time.Hour) // virtual time: a long quiet period changes nothing
		synctest.Wait()
		if len(res) != 0 {
			t.Fatal("Wait returned without an Append")
		}
		h.Append(&Summary{TickID: 2})
		synctest.Wait()
		select {
		case r := <-res:
			if r.err != nil || r.s == nil || r.s.TickID != 2 {
				t.Fatalf("Wait = %v, %v; want tick 2", r.s, r.err)
			}
		default:
			t.Fatal("Wait did not return after Append")
		}
	})
}

func TestHistoryWaitManyWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory(10)
		var wg sync.WaitGroup
		got := make([]uint64, 5)
		for i := range got {
			wg.Go(func() {
				s, err := h.Wait(t.Context(), 0)
				if err == nil {
					got[i] = s.TickID
				}
			})
		}
		synctest.Wait()
		h.Append(&Summary{TickID: 1})
		wg.Wait()
		if !slices.Equal(got, []uint64{1, 1, 1, 1, 1}) {
			t.Errorf("waiters got %v, want tick 1 each", got)
		}
	})
}

func TestHistoryWaitContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory(10)
		// Nothing ever appended: the deadline ends the wait with a nil summary.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		s, err := h.Wait(ctx, 0)
		if !errors.Is(err, context.DeadlineExceeded) || s != nil {
			t.Fatalf("Wait = %v, %v; want nil, DeadlineExceeded", s, err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Wait returned after %v, want exactly 5s of virtual time", d)
		}

		// With a summary but none newer: cancellation returns the latest with the error.
		appendTicks(h, 1, 2)
		ctx2, cancel2 := context.WithCancel(t.Context())
		done := make(chan struct{})
		var s2 *Summary
		var err2 error
		go func() {
			s2, err2 = h.Wait(ctx2, 2)
			close(done)
		}()
		synctest.Wait()
		cancel2()
		<-done
		if !errors.Is(err2, context.Canceled) || s2 == nil || s2.TickID != 2 {
			t.Errorf("Wait after cancel = %v, %v; want the latest (2), Canceled", s2, err2)
		}
	})
}

// TestHistoryConcurrent appends while readers Get, List, Latest and Wait (under -race).
func TestHistoryConcurrent(t *testing.T) {
	h := NewHistory(16)
	const n = 3000
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 3 {
		wg.Go(func() {
			var last uint64
			for last < n {
				l := h.Latest()
				if l != nil {
					if l.TickID < last {
						errs <- "Latest went backwards"
						return
					}
					last = l.TickID
					if s, ok := h.Get(l.TickID); ok && s.TickID != l.TickID {
						errs <- "Get returned the wrong tick"
						return
					}
					list := h.List(8, 0)
					for i := 1; i < len(list); i++ {
						if list[i].TickID != list[i-1].TickID-1 {
							errs <- "List not newest-first consecutive"
							return
						}
					}
				}
				if last == n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				s, err := h.Wait(ctx, last)
				cancel()
				if err != nil || s.TickID <= last {
					errs <- fmt.Sprintf("Wait(after %d) = %v, %v", last, s, err)
					return
				}
				last = s.TickID
			}
		})
	}
	for id := uint64(1); id <= n; id++ {
		h.Append(&Summary{TickID: id})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func BenchmarkHistoryAppend(b *testing.B) {
	appendEach(b, NewHistory(1000), make([]Summary, 2048))
}

// appendEach appends the summaries of ss to h in turn, b.N in all, with increasing tick ids.
func appendEach(b *testing.B, h *History, ss []Summary) {
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id++
		s := &ss[id%uint64(len(ss))]
		s.TickID = id
		h.Append(s)
	}
}
