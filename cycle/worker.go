package cycle

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// tierRun counts the outstanding modules of one tier of one tick.
type tierRun struct {
	pending atomic.Int32
	done    chan struct{}
}

func (tr *tierRun) finish() {
	if tr.pending.Add(-1) == 0 {
		close(tr.done)
	}
}

// job is one tick's run of one module.
type job struct {
	tick     uint64
	ctx      context.Context
	deadline time.Time
	budget   retrybudget.Budget
	tr       *tierRun
}

// result is what a worker leaves for the engine; written by the worker before doneTick is
// stored, read by the engine only after it loaded doneTick == its tick.
type result struct {
	res       retrybudget.Result
	value     any
	start     time.Time
	end       time.Time
	readStale bool
}

// worker is a module's persistent goroutine. At most one job is outstanding per worker.
type worker struct {
	e        *Engine
	ch       chan job
	running  atomic.Bool   // set by the engine at dispatch, cleared by the worker after the run
	doneTick atomic.Uint64 // the tick whose result is in res
	stopped  atomic.Bool
	mod      atomic.Pointer[modRT]
	attempts atomic.Int32 // the attempt in progress, for reporting an abandoned run

	// Owned by the worker goroutine while running; read by the engine after doneTick.
	res       result
	in        *tiers.Input
	cur       job
	m         tiers.Module
	attemptFn func(ctx context.Context, n int) error
}

func (e *Engine) startWorker(rt *modRT) *worker {
	w := &worker{e: e, ch: make(chan job, 1)}
	w.attemptFn = w.attempt
	w.mod.Store(rt)
	e.workersWG.Add(1)
	go w.loop()
	return w
}

// setModule points the worker at rt (a reload may change the spec but not the implementation).
func (w *worker) setModule(rt *modRT) { w.mod.Store(rt) }

func (w *worker) stop() {
	if !w.stopped.Swap(true) {
		close(w.ch)
	}
}

func (w *worker) loop() {
	defer w.e.workersWG.Done()
	for j := range w.ch {
		rt := w.mod.Load()
		if w.in == nil || w.m != rt.mod || w.in.Module() != rt.name {
			w.in = tiers.NewInput(w.e.board, rt.spec, rt.planned.TierIndex)
			w.m = rt.mod
		}
		w.cur = j
		w.in.Begin(j.tick, j.deadline)
		w.res.value = nil
		w.res.start = w.e.clock.Now()
		r := w.e.runner.Run(j.ctx, j.budget, w.attemptFn)
		w.res.end = w.e.clock.Now()
		w.res.res = r
		w.res.readStale = w.in.ReadStale()
		w.cur = job{}
		w.doneTick.Store(j.tick)
		w.running.Store(false)
		j.tr.finish()
	}
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

func lastgoodEntry(rt *modRT, tick uint64, r *result) lastgood.Entry {
	return lastgood.Entry{Key: rt.key, Value: r.value, Module: rt.name, TickID: tick, Written: r.end}
}
