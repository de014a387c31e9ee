package cycle

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// How modules are executed.
//
// A module that has proved fast (its last fastStreak runs each took less than fastLatency)
// runs inline on a small pool of runner goroutines that drain the tier's list of fast
// modules; this costs an atomic increment per module instead of a goroutine start or a
// channel hand-off. Every other module (new, slow, blocking, or one that was abandoned)
// runs on its own dedicated goroutine, so that blocking modules still run fully
// concurrently. Should a fast module block unexpectedly, the engine sees the tier make no
// progress for stallCheck and wakes more runners for the modules not yet claimed.
const (
	fastLatency = 50 * time.Microsecond
	fastStreak  = 3
	stallCheck  = time.Millisecond
)

// tierRun is one tier of one tick in flight.
type tierRun struct {
	tick     uint64
	ctx      context.Context
	deadline time.Time
	backoff  retrybudget.Backoff
	retry    fault.Set

	inline []*worker // fast modules, claimed by runners through next
	done   chan struct{}
	tier   int

	// The counters live on their own cache lines: runners on different cores hit them.
	_        [64]byte
	next     atomic.Int64 // index of the next inline module to claim
	_        [56]byte
	pending  atomic.Int32 // admitted modules not yet finished (+1 while dispatching)
	progress atomic.Int64 // modules finished
	_        [48]byte
}

// The phases of a run. The engine sets phaseRunning at dispatch. When the module returns,
// its goroutine moves running → committing, commits the result (breaker, last-known-good,
// blackboard) and moves to done; at the tier's end the engine moves running → abandoned,
// after which a late result is discarded whole. Whoever wins the compare-and-swap owns
// the result, so a result is never half committed.
const (
	phaseIdle uint32 = iota
	phaseRunning
	phaseCommitting
	phaseDone
	phaseAbandoned
)

// settle decides the outcome of the current run at the tier's end: true if the module
// finished and committed in time, false if it is abandoned.
func (w *worker) settle() bool {
	if w.phase.CompareAndSwap(phaseRunning, phaseAbandoned) {
		return false
	}
	for w.phase.Load() == phaseCommitting {
		runtime.Gosched()
	}
	return w.phase.Load() == phaseDone
}

// claimChunk is how many inline modules a runner claims at once.
const claimChunk = 8

// finish reports n finished modules.
func (tr *tierRun) finish(n int) {
	if n == 0 {
		return
	}
	tr.progress.Add(int64(n))
	if tr.pending.Add(int32(-n)) == 0 {
		close(tr.done)
	}
}

// claim returns the next chunk of unclaimed inline modules, or nil.
func (tr *tierRun) claim() []*worker {
	n := int64(len(tr.inline))
	i := tr.next.Add(claimChunk) - claimChunk
	if i >= n {
		return nil
	}
	return tr.inline[i:min(i+claimChunk, n)]
}

// closeClaims stops further claims and returns the index of the first never-claimed module.
func (tr *tierRun) closeClaims() int {
	n := tr.next.Swap(math.MaxInt32)
	return int(min(n, int64(len(tr.inline))))
}

// result is what an execution leaves for the engine; written before doneTick is stored and
// read by the engine only after it loaded doneTick == its tick.
type result struct {
	res       retrybudget.Result
	value     any
	start     time.Time
	end       time.Time
	readStale bool
	seq       uint64 // last-known-good sequence number of a committed value
}

// worker is a module's execution state. At most one run is outstanding per module: the
// engine sets running at dispatch and the execution clears it when the module returns.
type worker struct {
	e        *Engine
	phase    atomic.Uint32 // phaseIdle … phaseAbandoned: who owns the result of the current run
	running  atomic.Bool
	doneTick atomic.Uint64
	attempts atomic.Int32 // the attempt in progress, for reporting an abandoned run
	fast     atomic.Int32 // consecutive fast runs; ≥ fastStreak: run inline
	mod      atomic.Pointer[modRT]

	// Owned by whoever executes the module (one at a time, see running).
	permit    breaker.Permit // set by the engine before dispatch
	res       result
	in        *tiers.Input
	m         tiers.Module
	attemptFn func(ctx context.Context, n int) error

	// The dedicated goroutine, started on first need; guarded by Engine.tickMu.
	ch        chan *tierRun
	stopped   bool
	unstarted bool // admitted this tick but never claimed before the deadline
}

func (e *Engine) newWorker(rt *modRT) *worker {
	w := &worker{e: e}
	w.attemptFn = w.attempt
	w.mod.Store(rt)
	return w
}

// setModule points the worker at rt (a reload may change the spec but not the implementation).
func (w *worker) setModule(rt *modRT) { w.mod.Store(rt) }

// isFast reports whether the module may run inline on the runner pool.
func (w *worker) isFast() bool { return w.fast.Load() >= fastStreak }

// dispatch hands the module to its dedicated goroutine, starting it if needed. Called
// with tickMu held, after running was set.
func (w *worker) dispatch(tr *tierRun) {
	if w.stopped {
		return
	}
	if w.ch == nil {
		w.ch = make(chan *tierRun, 1)
		w.e.workersWG.Add(1)
		go w.loop()
	}
	w.ch <- tr
}

// retire ends the dedicated goroutine of a module that now runs inline. Called with tickMu
// held while the module is idle.
func (w *worker) retire() {
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// stop ends the dedicated goroutine (after its current run, if any). Called with tickMu held.
func (w *worker) stop() {
	if !w.stopped && w.ch != nil {
		close(w.ch)
	}
	w.stopped = true
}

func (w *worker) loop() {
	defer w.e.workersWG.Done()
	for tr := range w.ch {
		w.execute(tr, time.Time{})
		tr.finish(1)
	}
}

// execute runs the module once under the tier's retry budget and reports to tr. start is
// the time the run starts if the caller knows it (zero: read the clock). It returns the
// time the run ended.
func (w *worker) execute(tr *tierRun, start time.Time) time.Time {
	rt := w.mod.Load()
	if w.in == nil || w.m != rt.mod || w.in.Module() != rt.name {
		w.in = tiers.NewInput(w.e.board, rt.spec, rt.planned.TierIndex)
		w.m = rt.mod
	}
	if start.IsZero() {
		start = w.e.clock.Now()
	}
	w.in.Begin(tr.tick, tr.deadline)
	w.res.value = nil
	w.res.start = start
	b := retrybudget.Budget{MaxAttempts: rt.planned.Attempts, Backoff: tr.backoff, Retryable: tr.retry}
	w.res.res = w.e.runner.RunFrom(tr.ctx, start, b, w.attemptFn)
	end := w.e.clock.Now()
	w.res.end = end
	w.res.readStale = w.in.ReadStale()
	if end.Sub(start) < fastLatency && w.res.res.Attempts <= 1 {
		if w.fast.Load() < fastStreak {
			w.fast.Add(1)
		}
	} else {
		w.fast.Store(0)
	}
	if w.phase.CompareAndSwap(phaseRunning, phaseCommitting) {
		if w.res.res.Err == nil {
			w.commit(tr, rt)
		}
		w.doneTick.Store(tr.tick)
		w.phase.Store(phaseDone)
	}
	w.running.Store(false)
	return end
}

// commit records a success: breaker, last-known-good and blackboard.
func (w *worker) commit(tr *tierRun, rt *modRT) {
	r := &w.res
	rt.br.Success(w.permit)
	lge := rt.lslot.Put(lastgood.Entry{Value: r.value, Module: rt.name, TickID: tr.tick, Written: r.end})
	r.seq = lge.Seq
	w.e.board.Set(rt.bslot, tr.tier, blackboard.Entry{Value: r.value, Module: rt.name, TickID: tr.tick, Seq: lge.Seq,
		Written: r.end, Source: blackboard.Live, DerivedFromStale: r.readStale})
}

// attempt runs the module once, recovering a panic as an internal fault.
func (w *worker) attempt(ctx context.Context, n int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &fault.PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	w.in.SetAttempt(n)
	w.attempts.Store(int32(n))
	v, err := w.m.Run(ctx, w.in)
	if err == nil {
		w.res.value = v
	}
	return err
}

// pool is the set of runner goroutines that execute fast modules inline.
type pool struct {
	e       *Engine
	mu      sync.Mutex
	idle    []*runner // guarded by mu
	closed  bool      // guarded by mu
	maxIdle int
}

type runner struct {
	ch chan *tierRun
}

// wake hands tr to n runners, reusing idle ones and starting new ones as needed.
func (p *pool) wake(tr *tierRun, n int) {
	for ; n > 0; n-- {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		var r *runner
		if k := len(p.idle); k > 0 {
			r = p.idle[k-1]
			p.idle = p.idle[:k-1]
		}
		p.mu.Unlock()
		if r == nil {
			r = &runner{ch: make(chan *tierRun, 1)}
			p.e.workersWG.Add(1)
			go p.loop(r)
		}
		r.ch <- tr
	}
}

func (p *pool) loop(r *runner) {
	defer p.e.workersWG.Done()
	for tr := range r.ch {
		var t time.Time
		n := 0
		for ws := tr.claim(); ws != nil; ws = tr.claim() {
			for _, w := range ws {
				t = w.execute(tr, t)
			}
			if n += len(ws); n >= 64 {
				tr.finish(n)
				n = 0
			}
		}
		tr.finish(n)
		p.mu.Lock()
		if p.closed || len(p.idle) >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, r)
		p.mu.Unlock()
	}
}

// close stops every idle runner; busy ones exit when they come back.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, r := range p.idle {
		close(r.ch)
	}
	p.idle = nil
}

func newPool(e *Engine) *pool {
	return &pool{e: e, maxIdle: 2 * runtime.GOMAXPROCS(0)}
}
