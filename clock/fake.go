package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Fake is a manually advanced clock. Timers fire, in deadline order, when Advance or Set
// moves the time past them. AfterFunc callbacks run synchronously inside Advance, outside
// the clock's lock. The zero value is not usable; call NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time     // guarded by mu
	timers timerHeap     // guarded by mu
	seq    uint64        // guarded by mu
	waitCh chan struct{} // guarded by mu; closed when a timer is added
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, waitCh: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the fake time reaches Now()+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1), index: -1}
	f.arm(t, d)
	return t
}

// AfterFunc calls fn from Advance once the fake time reaches Now()+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn, index: -1}
	f.arm(t, d)
	return t
}

// WithDeadline returns a context cancelled with context.DeadlineExceeded when the fake
// time reaches deadline. Its Deadline method reports deadline.
func (f *Fake) WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	dc := &deadlineCtx{Context: ctx, deadline: deadline}
	if d := deadline.Sub(f.Now()); d <= 0 {
		cancel(context.DeadlineExceeded)
		return dc, func() {}
	} else {
		t := f.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
		return dc, func() { t.Stop(); cancel(context.Canceled) }
	}
}

// Advance moves the fake time forward by d and fires every timer that falls due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves the fake time to t (never backwards) and fires every timer that falls due.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(t) {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		ft := heap.Pop(&f.timers).(*fakeTimer)
		if ft.when.After(f.now) {
			f.now = ft.when
		}
		if ft.fn == nil {
			// Deliver under the lock, so that a Stop or Reset that returns after this
			// point drains the value (see fakeTimer.drain).
			select {
			case ft.ch <- f.now:
			default:
			}
			f.mu.Unlock()
			continue
		}
		f.mu.Unlock()
		ft.fn()
	}
}

// Timers returns the number of armed timers.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are armed or ctx ends.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.waitCh
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) arm(t *fakeTimer, d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	active := t.index >= 0
	if active {
		heap.Remove(&f.timers, t.index)
	}
	if t.drain() {
		active = true
	}
	f.seq++
	t.seq = f.seq
	t.when = f.now.Add(d)
	heap.Push(&f.timers, t)
	close(f.waitCh)
	f.waitCh = make(chan struct{})
	return active
}

type fakeTimer struct {
	f     *Fake
	ch    chan time.Time
	fn    func()
	when  time.Time // guarded by f.mu
	seq   uint64    // guarded by f.mu
	index int       // guarded by f.mu; -1 when not armed
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	active := t.index >= 0
	if active {
		heap.Remove(&t.f.timers, t.index)
	}
	if t.drain() {
		active = true
	}
	return active
}

// drain discards a fired but unreceived time from t's channel and reports whether there
// was one. Like a real timer since Go 1.23, a fake timer delivers no stale time after
// Stop or Reset returns, and a timer whose time was never received counts as active.
// The caller holds t.f.mu.
func (t *fakeTimer) drain() bool {
	if t.ch == nil {
		return false
	}
	select {
	case <-t.ch:
		return true
	default:
		return false
	}
}

func (t *fakeTimer) Reset(d time.Duration) bool { return t.f.arm(t, d) }

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}

type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		if cause := context.Cause(c.Context); cause == context.DeadlineExceeded {
			return context.DeadlineExceeded
		}
		return err
	}
	return nil
}
