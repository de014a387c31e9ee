package cycle

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// nextResult is what pool.next returned.
type nextResult struct {
	job runJob
	ok  bool
}

// TestRunnerNext covers an idle runner's wait for its next job (pool.next) on a fake clock:
// with spinning off it parks; with it on it polls while its last wait was short, parks once
// runnerSpin has passed, and after a long wait parks at once; a closed pool ends it either
// way. A runner that spun where it should park would keep synctest.Wait from returning.
func TestRunnerNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &readCounter{Fake: clock.NewFake(time.Unix(0, 0))}
		p := &pool{e: &Engine{clock: f}}
		r := &runner{ch: make(chan runJob, 1)}
		tr := &tierRun{}
		out := make(chan nextResult)
		next := func() { go func() { j, ok := p.next(r); out <- nextResult{j, ok} }() }
		expect := func(what string, waited time.Duration) {
			t.Helper()
			got := <-out
			if !got.ok || got.job.tr != tr {
				t.Fatalf("%s: got %+v, want the job sent", what, got)
			}
			if r.waited != waited {
				t.Fatalf("%s: waited %v, want %v", what, r.waited, waited)
			}
		}

		// Spinning off: the runner parks at once, and forgets how long it waited.
		r.waited = time.Hour
		next()
		synctest.Wait()
		r.ch <- runJob{tr: tr}
		expect("spinning off", 0)

		// Spinning on, the last wait short: it polls (reads the clock again and again), and
		// the job sent meanwhile is taken there.
		p.spin.Store(true)
		n := f.reads.Load()
		next()
		within(t, "polling", func() bool { return f.reads.Load() >= n+3 })
		f.Advance(runnerSpin / 5)
		r.ch <- runJob{tr: tr}
		if got := <-out; !got.ok || got.job.tr != tr || r.waited >= runnerSpin {
			t.Fatalf("polling: got %+v after %v, want the job within %v", got, r.waited, runnerSpin)
		}

		// No job within runnerSpin: it parks, and times the whole wait.
		r.waited = 0
		n = f.reads.Load()
		next()
		within(t, "start read", func() bool { return f.reads.Load() > n }) // before the clock moves
		f.Advance(runnerSpin)
		synctest.Wait()
		f.Advance(time.Millisecond)
		r.ch <- runJob{tr: tr}
		expect("spun out", runnerSpin+time.Millisecond)

		// After that long wait it parks at once.
		next()
		synctest.Wait()
		f.Advance(time.Millisecond)
		r.ch <- runJob{tr: tr}
		expect("after a long wait", time.Millisecond)

		// The pool closes: a polling runner and a parked one both stop.
		r.waited = 0
		next()
		close(r.ch)
		if got := <-out; got.ok {
			t.Fatalf("closed while polling: ok")
		}
		r.waited = time.Hour
		next()
		if got := <-out; got.ok {
			t.Fatalf("closed while parked: ok")
		}
	})
}

// within yields until cond holds, and fails the test if it does not within a million
// yields (a spinning goroutine keeps a synctest bubble from ever being idle, so the test
// cannot wait for it otherwise).
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1_000_000 {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%s: not within a million yields", what)
}

// readCounter is a fake clock that counts its readings. A reading is counted once its
// time is read: a test that sees the count move and then advances the clock knows that
// reading was taken before the advance (counted first, a runner's first reading could
// come after it, and the runner would then poll for runnerSpin on a clock that no longer
// moves, keeping synctest.Wait from ever returning).
type readCounter struct {
	*clock.Fake
	reads atomic.Int64
}

func (c *readCounter) Now() time.Time {
	t := c.Fake.Now()
	c.reads.Add(1)
	return t
}

// TestSpinWait covers the engine's spin for a segment's end on a fake clock: it reports the
// end, gives up after engineSpin or after d if sooner, and keeps a timer with a function
// armed while it spins (the timer that gets an engine stranded in the run queue back on a
// processor), stopped when it returns.
func TestSpinWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := clock.NewFake(time.Unix(0, 0))
		e := &Engine{clock: f}
		for _, c := range []struct {
			name    string
			d       time.Duration
			advance time.Duration // 0: the segment ends instead
			ended   bool
		}{
			{"segment ends", time.Second, 0, true},
			{"spun out", time.Second, engineSpin, false},
			{"deadline first", engineSpin / 2, engineSpin / 2, false},
			{"segment ends again", time.Second, 0, true},
		} {
			seg := &segment{done: make(chan struct{})}
			res := make(chan bool)
			go func() { res <- e.spinWait(seg, f.Now(), c.d) }()
			within(t, c.name+": timer armed", func() bool { return f.Timers() == 1 })
			if c.advance > 0 {
				f.Advance(c.advance)
			} else {
				close(seg.done)
			}
			if got := <-res; got != c.ended {
				t.Fatalf("%s: ended %v, want %v", c.name, got, c.ended)
			}
			if n := f.Timers(); n != 0 {
				t.Fatalf("%s: %d timers armed after the spin, want 0", c.name, n)
			}
		}
	})
}

// TestPreciseHandOffs runs precise ticks on the real clock with more than one P, where the
// hand-offs spin: every status stays right, and a tier whose module ignores its context
// (blocked on tick 6, keeping its core busy on tick 8) is still taken at its deadline: the
// tick returns while the module runs on.
func TestPreciseHandOffs(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("hand-offs spin only with more than one P")
	}
	release := make(chan struct{})
	var spinning atomic.Bool
	var returned atomic.Int32
	hung := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
		switch in.TickID() {
		case 6:
			<-release
			returned.Add(1)
		case 8:
			for spinning.Load() {
			}
			returned.Add(1)
		}
		return in.TickID(), nil
	}}
	var regs []Registration
	for i := range 30 {
		regs = append(regs, reg(fmt.Sprintf("m%d", i), testTiers()[i%3].Name, ok(i)))
	}
	// Last in its tier, so that no module waits behind it in its runner's claim: those the
	// stall check hands to other runners, which this test is not about.
	regs = append(regs, reg("hung", "knowledge", hung))
	cfg := Config{Timing: Precise, Tiers: testTiers()}
	// Long enough that the other knowledge modules finish before the deadline even when
	// the race detector and parallel test packages hold this process off its cores for
	// tens of milliseconds; ticks 6 and 8 each take the whole budget.
	cfg.Tiers[1].Budget = 250 * time.Millisecond
	e := newEngine(t, cfg, regs)
	spinning.Store(true)
	for id := uint64(1); id <= 8; id++ {
		s := tick(t, e)
		for _, m := range s.Modules() {
			want := faultsummary.StatusOK
			if m.Name == "hung" && (id == 6 || id == 8) {
				want = faultsummary.StatusTimedOut
			}
			if m.Status != want {
				t.Errorf("tick %d: %s %q, want %q", s.TickID, m.Name, m.Status, want)
			}
		}
		var before int32 // hung modules that had returned before this tick
		switch id {
		case 6:
			before = 0
		case 8:
			before = 1
		default:
			continue
		}
		if returned.Load() != before {
			t.Errorf("tick %d ended after the hung module returned", id)
		}
		if id == 6 {
			close(release)
		} else {
			spinning.Store(false)
		}
		for returned.Load() == before { // back before the next tick, which would find it busy
			runtime.Gosched()
		}
	}
}
