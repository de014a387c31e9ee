package cycle

import (
	"context"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

// This file is the mechanism of asynchronous modules (spec Async): started after a tick
// has published its summary, outside any tier and its budget, under their own timeout;
// their value is written at the next tick boundary, tagged with the tick after which the
// run started. What a run's end means is decide.JudgeAsync's.

// AsyncEvent is a change of state of an asynchronous module's runs: its first failure
// after a success (or after it started), or its first success after failures.
type AsyncEvent struct {
	// Module is the module's name.
	Module string
	// TickID is the tick whose summary reports the run's end.
	TickID uint64
	// Failing is true when the runs started failing, false when they recovered.
	Failing bool
	// Failures counts the consecutive failed runs (for a recovery, those before it).
	Failures int
	// Kind and Err describe the failure that started the failing state.
	Kind fault.Kind
	Err  string
}

// defaultAsyncTimeout is an asynchronous module's timeout when its spec has none.
const defaultAsyncTimeout = time.Second

// asyncRT is an asynchronous module's runtime. It outlives a reload that keeps the
// registration (same identity), so that the run in flight still counts.
type asyncRT struct {
	id    uint64
	name  string
	key   string
	spec  *tiers.ModuleSpec // points into the plan of the state that made or kept it
	mod   tiers.Module
	tier  int // the tier count: an asynchronous module reads what every tier wrote
	lslot *lastgood.Slot
	bslot *blackboard.Slot
	// inFlight is set from the start of a run until the module returns, also past its
	// timeout: at most one run at a time.
	inFlight atomic.Bool
	state    decide.AsyncState // guarded by tickMu
}

// asyncEnd is one ended run, kept until the next tick boundary.
type asyncEnd struct {
	rt       *asyncRT
	origin   uint64
	value    any
	end      decide.AsyncEnd
	err      string
	latency  time.Duration
	finished time.Time
}

// asyncBook holds the asynchronous runtimes and the runs that ended.
type asyncBook struct {
	rts    map[string]*asyncRT // by name; guarded by tickMu
	forSt  *state              // the state rts was made for; guarded by tickMu
	list   []*asyncRT          // rts in plan order; guarded by tickMu
	mu     sync.Mutex
	ended  []asyncEnd // guarded by mu
	ctx    context.Context
	cancel context.CancelFunc // ends every run: Close
}

// syncAsync makes the runtimes of st's asynchronous modules, keeping those of unchanged
// registrations.
func (e *Engine) syncAsync(st *state) {
	b := &e.async
	if b.forSt == st {
		return
	}
	b.forSt = st
	if len(st.async) == 0 && len(b.rts) == 0 {
		return // none before, none now: nothing to build at the tick boundary
	}
	if b.ctx == nil && len(st.async) > 0 { // none ever: collectAsync is never asked
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	old := b.rts
	b.rts, b.list = make(map[string]*asyncRT, len(st.async)), b.list[:0]
	for _, pm := range st.async {
		ref := st.regs[pm.Spec.Name]
		rt := old[pm.Spec.Name]
		if rt == nil || rt.id != ref.id {
			key := pm.Spec.Key()
			e.lg.SetTTL(key, pm.Spec.TTL)
			rt = &asyncRT{id: ref.id, name: pm.Spec.Name, key: key, lslot: e.lg.Slot(key), bslot: e.board.Slot(key)}
		}
		rt.spec, rt.mod, rt.tier = &pm.Spec, ref.module, len(st.cfg.Tiers)
		b.rts[rt.name], b.list = rt, append(b.list, rt)
	}
}

// collectAsync writes the values of the runs that ended since the last tick boundary and
// lists every ended run in s. Called at the tick boundary, after the board began tick s.
func (e *Engine) collectAsync(s *faultsummary.Summary) {
	b := &e.async
	b.mu.Lock()
	ended := b.ended
	b.ended = nil
	b.mu.Unlock()
	for _, x := range ended {
		rt := x.rt
		if b.rts[rt.name] != rt {
			continue // removed or replaced by a reload meanwhile: its result is discarded
		}
		v := decide.JudgeAsync(x.end)
		if v.Write {
			seq := rt.lslot.PutValue(x.value, rt.name, x.origin, x.finished)
			e.board.Set(rt.bslot, -1, blackboard.Entry{Value: x.value, Module: rt.name, TickID: x.origin, Seq: seq,
				Written: x.finished, Source: blackboard.Live})
		}
		next, change := rt.state.Next(v)
		rt.state = next
		run := faultsummary.AsyncRun{Name: rt.name, OriginTick: x.origin, Status: v.Status.Public(),
			LatencyMs: blackboard.Millis(x.latency), Error: x.err, Failures: next.Failures}
		if x.end.Failed || x.end.TimedOut {
			run.FaultKind = x.end.Kind.String()
		}
		s.Async = append(s.Async, run)
		if change != decide.AsyncSame {
			e.emit(event{kind: evAsync, tick: s.TickID, async: AsyncEvent{Module: rt.name, TickID: s.TickID,
				Failing: change == decide.AsyncNowFailing, Failures: next.Failures, Kind: x.end.Kind, Err: x.err}})
		}
	}
}

// startAsync starts every asynchronous module whose previous run has returned, after
// tick id, unless the cycle is starting. Called under tickMu, after the tick's summary was published.
func (e *Engine) startAsync(id uint64) {
	if e.guard.startup.Starting {
		return // fail closed while starting, as for the tiers after the safety tier
	}
	for _, rt := range e.async.list {
		if !decide.StartAsync(rt.inFlight.Load()) || !rt.inFlight.CompareAndSwap(false, true) {
			continue
		}
		e.workersWG.Add(1)
		// The run takes its spec, module and tier now: a reload that keeps the runtime may
		// replace them while it runs.
		go e.runAsync(rt, asyncJob{spec: *rt.spec, mod: rt.mod, tier: rt.tier, origin: id})
	}
}

// asyncJob is what one run of an asynchronous module needs, copied when it starts.
type asyncJob struct {
	spec   tiers.ModuleSpec
	mod    tiers.Module
	tier   int
	origin uint64
}

// runAsync runs rt once after tick job.origin under its timeout. At the timeout the run is
// reported timed out and its context cancelled; a module that ignores it keeps inFlight
// until it returns, and its late result is discarded.
func (e *Engine) runAsync(rt *asyncRT, job asyncJob) {
	defer e.workersWG.Done()
	defer rt.inFlight.Store(false)
	origin := job.origin
	timeout := job.spec.Timeout
	if timeout <= 0 {
		timeout = defaultAsyncTimeout
	}
	start := e.clock.Now()
	ctx, cancel := e.clock.WithDeadline(e.async.ctx, start.Add(timeout))
	defer cancel()
	var claimed atomic.Bool // the run's end is reported once: by its return or by its timeout
	t := e.clock.AfterFunc(timeout, func() {
		if claimed.CompareAndSwap(false, true) {
			e.async.put(asyncEnd{rt: rt, origin: origin, end: decide.AsyncEnd{TimedOut: true, Kind: fault.KindTransient},
				err: "still running at its timeout: abandoned, its late result discarded", latency: timeout, finished: start.Add(timeout)})
		}
	})
	defer t.Stop()
	in := tiers.NewInput(e.board, job.spec, job.tier)
	in.Begin(origin, start.Add(timeout))
	in.SetAttempt(1)
	v, err := runGuarded(ctx, job.mod, in)
	if !claimed.CompareAndSwap(false, true) {
		return
	}
	end := e.clock.Now()
	x := asyncEnd{rt: rt, origin: origin, value: v, latency: end.Sub(start), finished: end}
	if err != nil {
		x.end, x.err, x.value = decide.AsyncEnd{Failed: true, Kind: fault.Classify(err)}, err.Error(), nil
	}
	e.async.put(x)
}

// put keeps an ended run for the next tick boundary.
func (b *asyncBook) put(x asyncEnd) {
	b.mu.Lock()
	b.ended = append(b.ended, x)
	b.mu.Unlock()
}

// stop cancels every run in flight (Close).
func (b *asyncBook) stop() {
	if b.cancel != nil {
		b.cancel()
	}
}

// runGuarded runs m once, recovering a panic as an internal fault.
func runGuarded(ctx context.Context, m tiers.Module, in *tiers.Input) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, &fault.PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return m.Run(ctx, in)
}

// validateAsync checks the asynchronous modules of mods: they run outside the tiers, so
// what belongs to a tier (a breaker, emergency-only, the safety tier) is refused.
func validateAsync(c Config, mods []Registration) tiers.Problems {
	var ps tiers.Problems
	safety := ""
	if len(c.Tiers) > 0 {
		safety = c.Tiers[0].Name
	}
	for i, m := range mods {
		s := m.Spec
		p := "modules[" + strconv.Itoa(i) + "]"
		if !s.Async {
			if s.Timeout != 0 {
				ps = append(ps, tiers.Problem{Path: p + ".timeout", Message: "only an asynchronous module (async: true) has a timeout"})
			}
			continue
		}
		switch {
		case s.Timeout < 0:
			ps = append(ps, tiers.Problem{Path: p + ".timeout", Message: "must be >= 0 (0 means 1s)"})
		case s.Breaker != "":
			ps = append(ps, tiers.Problem{Path: p + ".breaker", Message: "an asynchronous module has no breaker: it never fails a tick"})
		case s.Emergency:
			ps = append(ps, tiers.Problem{Path: p + ".emergency", Message: "an asynchronous module cannot be emergency-only: it runs outside the tiers"})
		case s.Tier != "" && s.Tier == safety:
			ps = append(ps, tiers.Problem{Path: p + ".tier", Message: "an asynchronous module cannot be in the safety tier: the safety tier fails closed"})
		}
	}
	return ps
}

// asyncEntries appends to out the entries of the asynchronous modules as of summary s:
// live for a module whose run ended ok at s's boundary (its value was written then),
// else its last-known-good value as any reader of tick s saw it. Each is tagged with the
// tick its value came from.
func (e *Engine) asyncEntries(s *faultsummary.Summary, out []blackboard.Entry) []blackboard.Entry {
	st := e.activeView.Load()
	if st == nil {
		return out
	}
	for _, pm := range st.async {
		key := pm.Spec.Key()
		ent, ok := blackboard.FromLastGood(e.lg.Get(key, s.StartedAt))
		if !ok {
			ent = blackboard.Entry{Key: key, Source: blackboard.None}
		}
		ent.Key, ent.Module = key, pm.Spec.Name
		for _, a := range s.Async {
			if a.Name == pm.Spec.Name && a.Status == faultsummary.StatusOK && a.OriginTick == ent.TickID {
				ent.Source, ent.Stale, ent.Age = blackboard.Live, false, 0
			}
		}
		out = append(out, ent)
	}
	return out
}

// asyncInfos appends what the engine knows of st's asynchronous modules to out (for
// Modules), and marks them seen. They have no line, no breaker and no attempts count.
func (e *Engine) asyncInfos(st *state, now time.Time, seen map[string]bool, out []ModuleInfo) []ModuleInfo {
	for _, pm := range st.async {
		seen[pm.Spec.Name] = true
		r := st.regs[pm.Spec.Name]
		out = append(out, ModuleInfo{Spec: pm.Spec, TierIndex: pm.TierIndex, Attempts: 1, Policy: pm.Policy,
			Origin: r.origin, Module: r.module, LastGood: e.lg.Get(pm.Spec.Key(), now)})
	}
	return out
}
