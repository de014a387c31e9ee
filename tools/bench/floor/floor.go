// Package floor measures the floor under the engine's tick cost: the work per module that
// cycled's tick semantics require, done with cycled's own components in a bare loop on one
// goroutine, against the engine's tick with the same modules. It answers how much of a
// tick is the components (timing, breaker, last-known-good, blackboard, the summary line)
// and how much the engine's orchestration (tiers, runners, claims, admission, the stall
// check, settling): BENCHMARKS.md, "Targets". The comparison harness runs the loop
// as a contender too (tools/bench/peers.Floor), so that every full run says what the components
// alone cost next to the peers.
//
// The loop does, for each module: take the run (two compare-and-swaps and two stores on a
// phase word, as the engine's admission, start, commit and end do), ask the breaker, run
// the module under a recover, time it (clock.Elapsed, the processor's counter where the
// engine uses it), record the breaker's success, store the value as last known good
// (lastgood.Slot.PutValue) and publish it on the blackboard (Board.SetLive), and fill the
// module's summary line and value, in lines allocated per tick as the engine does when it
// has none to reuse. It does not do what an engine needs besides: tiers, deadlines, runner
// hand-offs, admission checks (due, emergency-only, busy), the fast or slow decision, the
// tier's context, settling and the summary itself, a failure's fault path (its line is
// only marked failed); nor a few things a module's run also needs that are cheap: the
// input's tick, deadline and attempt (tiers.Input), whether an input was stale. So it is a
// bound, not a peer: no engine built on these components does less for a module that
// succeeds, and on one core none takes less time.
//
// make bench-floor REPS=7 runs every case of its benchmarks once per repetition, so that
// they alternate.
package floor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

// mod is one module's state in the loop, each part its own allocation as in the engine.
type mod struct {
	phase  *atomic.Uint64
	m      tiers.Module
	in     *tiers.Input
	br     *breaker.Breaker
	lslot  *lastgood.Slot
	bslot  *blackboard.Slot
	name   string
	result any
}

// Line is a module's summary line, the 40 bytes of the engine's lineRec.
type Line struct {
	Latency  time.Duration
	Seq      uint64 // the last-known-good value's sequence number
	Written  int64  // when the value was written, in Unix nanoseconds
	Attempts int32
	Ex       int32 // 1 for a failed run (the engine's index of the line's extras)
	Status   uint8 // StatusOK for a success, 0 otherwise
	Kind     uint8
	Circuit  uint8 // the breaker's state at admission
	Flags    uint8
}

// StatusOK is a Line's Status after a run that succeeded.
const StatusOK = 1

// run is one attempt under a recover, as the engine's.
func (m *mod) run(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return m.runBare(ctx)
}

// runBare is run without the recover.
func (m *mod) runBare(ctx context.Context) error {
	v, err := m.m.Run(ctx, m.in)
	if err == nil {
		m.result = v
	}
	return err
}

// Loop is the bare loop over a set of modules: each Tick runs every module once.
type Loop struct {
	c     clock.Clock
	lg    *lastgood.Store
	board *blackboard.Board
	mods  []*mod
	held  []Line // the last tick's lines, kept past it as a summary keeps them
	skip  Part   // parts left out, to measure what each costs
	lines []Line // with skip&PartLines: the lines every tick reuses
	vals  []any
}

// Part is a part of the per-module work that a Loop can leave out, to measure what it
// costs.
type Part uint

// The parts.
const (
	PartTime     Part = 1 << iota // clock.Elapsed (the written time is then the tick's start)
	PartBreaker                   // Acquire and Success
	PartLastGood                  // lastgood.Slot.PutValue
	PartBoard                     // blackboard.Board.SetLive
	PartLines                     // fresh lines every tick (left out: one set reused)
	PartRecover                   // the deferred recover around the run
)

// New returns a loop over mods, whose names are names (one each), on the real clock, with
// the parts in without left out (0: the whole work).
func New(names []string, mods []tiers.Module, without Part) *Loop {
	if len(names) != len(mods) {
		panic(fmt.Sprintf("floor: %d names for %d modules", len(names), len(mods)))
	}
	lg := lastgood.New()
	l := &Loop{c: clock.Real(), lg: lg, board: blackboard.New(lg), mods: make([]*mod, len(mods)), skip: without}
	for i := range l.mods {
		name := names[i]
		l.mods[i] = &mod{phase: new(atomic.Uint64), m: mods[i], in: new(tiers.Input),
			br:    breaker.New(breaker.Settings{Name: name, FailureThreshold: 1 << 30, Cooldown: time.Second}),
			lslot: lg.Slot(name), bslot: l.board.Slot(name), name: name}
	}
	return l
}

// Tick runs every module once as tick id (ids must grow from 1) and returns the tick's
// lines and values, which later ticks do not write (unless PartLines is left out).
func (l *Loop) Tick(ctx context.Context, id uint64) ([]Line, []any) {
	n := len(l.mods)
	l.board.Begin(id, l.c.Now())
	var lines []Line
	var vals []any
	if l.skip&PartLines == 0 {
		lines, vals = make([]Line, n), make([]any, n)
	} else {
		if l.lines == nil {
			l.lines, l.vals = make([]Line, n), make([]any, n)
		}
		lines, vals = l.lines, l.vals
	}
	t := clock.NewStamp(l.c)
	for i, m := range l.mods {
		old := m.phase.Load()
		if !m.phase.CompareAndSwap(old, id<<4|1) { // admitting
			continue
		}
		ln := &lines[i]
		var p breaker.Permit
		if l.skip&PartBreaker == 0 {
			ln.Circuit = uint8(m.br.Peek()) // the state at admission, as the engine's line has it
			if p = m.br.Acquire(); !p.Allowed() {
				m.phase.Store(id<<4 | 4)
				continue
			}
		}
		m.phase.Store(id<<4 | 2 | 8) // running, busy
		var err error
		if l.skip&PartRecover == 0 {
			err = m.run(ctx)
		} else {
			err = m.runBare(ctx)
		}
		var d time.Duration
		if l.skip&PartTime == 0 {
			d, t = clock.Elapsed(l.c, t)
		}
		if !m.phase.CompareAndSwap(id<<4|2|8, id<<4|3|8) { // committing
			continue
		}
		ln.Latency, ln.Attempts = d, 1
		if err != nil {
			ln.Kind, ln.Ex = 1, 1 // the engine's settling fills the rest of a failure's line
		} else {
			if l.skip&PartBreaker == 0 {
				m.br.Success(p)
			}
			end := t.Time()
			if l.skip&PartLastGood == 0 {
				ln.Seq = m.lslot.PutValue(m.result, m.name, id, end)
			}
			if l.skip&PartBoard == 0 {
				l.board.SetLive(m.bslot, m.lslot, 0, false)
			}
			ln.Written, ln.Status, ln.Flags = end.UnixNano(), StatusOK, 1
			vals[i] = m.result
		}
		m.phase.Store(id<<4 | 4) // done, not busy
	}
	l.held = lines
	return lines, vals
}
