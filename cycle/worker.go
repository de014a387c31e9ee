package cycle

import (
	"cmp"
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// How a tier runs.
//
// A small pool of runner goroutines (about one per core) claims the tier's modules in
// chunks. For each module a runner decides admission (emergency-only, not due, busy,
// breaker), and then either runs it inline, when the module is fast (new modules are
// presumed fast; two slow runs in a row, or one that blocks, make it slow, and fastStreak
// consecutive runs under fastLatency make it fast again; see nextFast), or hands it to the
// module's dedicated goroutine (slow or blocking modules), so that blocking modules still
// run fully concurrently. The goroutine that ran a module commits a success itself
// (breaker, last-known-good, blackboard, summary line); everything else is left as an
// exception, handled serially once the tier is over by whoever closes it (settle): the
// goroutine that finishes its last module (a runner then starts the next tier itself,
// see segment), or the engine when it takes the tier at its deadline.
// Should a fast module block unexpectedly, the tier's stall check (watchStall) sees it
// make no progress for stallCheck and wakes more runners for the modules not yet claimed.
//
// Ownership of a module's run is decided by compare-and-swap on its phase word (tick id and
// state), so that at the deadline the engine and a late module never both report it.
const (
	fastLatency = 50 * time.Microsecond
	fastStreak  = 3
	stallCheck  = time.Millisecond
	// claimChunk is the size of a tier's first chunk, and the least chunk: the first
	// chunk is small so that a runner soon knows what a module costs (see scale). Later
	// chunks hold about chunkWork of modules at the first chunk's pace, at most maxChunk:
	// two runners on a tier of trivial modules contend for the claim and admit counters
	// once a chunk, so larger chunks let a second runner shorten a tick of trivial modules
	// more (BenchmarkTick), while modules that compute for microseconds keep small chunks,
	// which share them out evenly between runners.
	claimChunk = 8
	maxChunk   = 64
	chunkWork  = 16 * time.Microsecond
	// helpWork is the work a runner does alone: a tier starts with one runner, which wakes
	// another after its first chunk only when what is left looks longer than this: a
	// woken runner on an idle core starts about as late as a small tier takes. Large tiers
	// of trivial modules are helped too, though less than the second core would suggest
	// (the cores contend for the tier's counters and lines), and the gain depends on the
	// host (BenchmarkTick, BenchmarkTickWork).
	helpWork = 50 * time.Microsecond
	// engineSpin and runnerSpin bound the spinning of a hand-off with precise timing: the
	// engine spins at most engineSpin for a segment to end when the last one it waited
	// for ended within that, and an idle runner at most runnerSpin for its next job when
	// its last one came within that (see Engine.spinWait and pool.next). Segments longer
	// than engineSpin, and jobs further apart than runnerSpin, park at once: their
	// wake-up is a small part of them.
	engineSpin = 250 * time.Microsecond
	runnerSpin = 50 * time.Microsecond
	// reanchor is how long a runner times modules one after another from the processor's
	// counter before it reads the clock again: the counter's calibrated rate may be off
	// by NTP's slewing (500 ppm), which over a millisecond is half a µs.
	reanchor = time.Millisecond
)

// The states of a phase word: its low three bits. Bit 3 (busyBit) is set while the
// module's code runs, from admission to return, across ticks if the run is abandoned; the
// upper bits hold the tick id. Keeping the busy flag in the phase word makes admitting,
// running and committing a module one store each instead of two (atomic stores are full
// barriers): a run sets it with phRunning and clears it with phDone; a run the engine
// abandoned clears it alone when it returns (clearBusy), and every other write of a word
// that may be busy keeps the bit by compare-and-swap (swapPhase). No run is admitted while it is set,
// so the bit a late run clears is its own.
const (
	phAdmitting  = iota + 1 // a runner is deciding admission (no module code runs)
	phRunning               // the module runs; the engine may abandon it
	phCommitting            // the module returned in time; its result is being written
	phDone                  // finished and reported (or not admitted)
	phAbandoned             // the engine gave up on it at the deadline
	phUnstarted             // the engine found it never started before the deadline
)

const (
	stateMask = 7
	busyBit   = 8
	tickShift = 4
)

func phase(tick uint64, state uint64) uint64 { return tick<<tickShift | state }

// phaseTick, phaseState and phaseBusy take a phase word apart.
func phaseTick(v uint64) uint64  { return v >> tickShift }
func phaseState(v uint64) uint64 { return v & stateMask }
func phaseBusy(v uint64) uint64  { return v & busyBit }

// tierRun is one tier of one tick in flight. tick, emergency and l repeat its segment's,
// so that a module's run reads one object for them.
type tierRun struct {
	e         *Engine
	seg       *segment
	tick      uint64
	ctx       *tierCtx // cancelled by the engine when it takes the tier, or at the tier's end
	start     time.Time
	deadline  time.Time
	backoff   retrybudget.Backoff
	retry     fault.Set
	tier      int
	mods      []*modRT
	l         *tickLines // the tick's summary lines
	emergency bool
	shedding  bool         // load shedding sheds modules this tick (the segment's shed is set)
	owner     atomic.Int32 // tierOpen, then tierEnded or tierTaken: who closes the tier

	closed          atomic.Bool // set by the engine at the deadline: runners stop claiming
	budgetExhausted atomic.Bool
	dispatched      atomic.Bool // a module runs on its own goroutine (see stallWatch)

	lastProgress atomic.Int64 // modules finished at the last stall check (see watchStall)

	// The counters live on their own cache lines: runners on different cores hit them,
	// and a write to one must not evict the fields above, which every run reads.
	_        [64]byte
	exc      atomic.Pointer[excList] // the modules left as exceptions; made at the first
	excN     atomic.Int32
	_        [52]byte
	next     atomic.Int64 // index of the next module to claim
	chunk    atomic.Int64 // modules a claim takes after the first (0: claimChunk); see scale
	_        [48]byte
	pending  atomic.Int32 // modules not yet finished (+1 while the engine wakes runners)
	runners  atomic.Int32 // runners woken for the tier (not counting sweepers)
	progress atomic.Int64 // modules finished
	_        [44]byte
	admitted atomic.Int64 // modules whose admission is decided
	_        [56]byte
}

// Who closes a tier: the goroutine that finished its last module (tierEnded), or the
// engine at the deadline (tierTaken). Decided by compare-and-swap from tierOpen.
const (
	tierOpen = iota
	tierEnded
	tierTaken
)

// segment is a run of consecutive tiers of one tick that the runners go through without
// the engine. The runner that finishes a tier settles it (its exceptions: fallbacks,
// breaker failures, retry counts, degraded keys) and starts the next: a tick costs the
// engine two thread hand-offs (wake a runner, be woken at the end) instead of two per
// tier, and hand-offs are most of the engine's own work in a tick of trivial modules. A
// tier that fails or aborts the tick or fails the safety tier (the engine decides what
// follows: stop, emergency mode), the last tier, any tier in emergency mode, a tier whose
// last module finished on its own goroutine, and a tier the engine takes at its deadline
// end the segment; the engine settles only the tier it took, and starts a new segment for
// the next.
type segment struct {
	st        *state
	ctx       context.Context // the tick's
	s         *faultsummary.Summary
	tl        *tickLines
	tick      uint64
	tickStart time.Time     // the tick's start (the time fallbacks are aged at)
	emergency bool          // emergency mode at the segment's start: then it never chains
	margin    time.Duration // the precise wait's margin (0 for coarse)
	cur       atomic.Pointer[tierRun]
	done      chan struct{} // closed once end and out are set
	end       *tierRun      // the tier handed back to the engine
	out       tierOutcome   // its outcome, from the goroutine that ended and settled it
	starting  bool          // the cycle is starting (see decide.Startup): it never chains
	shed      []bool        // per summary line: shed by load shedding; nil when none is
}

// spins reports whether the segment's hand-offs spin (see Engine.spinWait): with precise
// timing (a margin) and more than one P.
func (seg *segment) spins(e *Engine) bool { return seg.margin > 0 && e.pool.procs > 1 }

// newTierRun starts tier ti of the segment at now and makes it the segment's current tier.
func (e *Engine) newTierRun(seg *segment, ti int, now time.Time) *tierRun {
	tier := &seg.st.cfg.Tiers[ti]
	mods := seg.st.tierMods[ti]
	deadline := now.Add(tier.Budget)
	tr := &tierRun{e: e, seg: seg, tick: seg.tick, ctx: newTierCtx(seg.ctx, deadline), start: now, deadline: deadline,
		backoff: tier.Backoff, retry: tier.Retryable, tier: ti, mods: mods, l: seg.tl,
		emergency: seg.emergency, shedding: seg.shed != nil}
	seg.cur.Store(tr)
	return tr
}

// finish reports n finished modules. The goroutine that finishes the tier's last module
// closes it (see ended); with chain set it may get the next tier to run.
func (tr *tierRun) finish(n int, chain bool) *tierRun {
	if n == 0 {
		return nil
	}
	tr.progress.Add(int64(n))
	if tr.pending.Add(int32(-n)) == 0 {
		return tr.ended(chain)
	}
	return nil
}

// ended closes a tier whose modules have all finished, unless the engine took it at the
// deadline. The goroutine that finished the tier's last module settles it (its
// exceptions, its summary line). A runner (chain set; also the engine for a first tier
// without modules, see runTier) then returns the next tier, started, for its caller to
// run, unless the tick is in emergency mode, the tier failed or aborted the tick, or it
// failed the safety tier: those, and the last tier, go back to the engine, which decides
// what follows. A module's own goroutine (or the engine otherwise) hands the tier back.
func (tr *tierRun) ended(chain bool) *tierRun {
	if !tr.owner.CompareAndSwap(tierOpen, tierEnded) {
		return nil // the engine is settling it at the deadline
	}
	tr.closed.Store(true) // a runner woken late finds nothing left to do
	seg := tr.seg
	out, now := tr.settle(nil, false)
	if chain && !seg.emergency && !seg.starting && !out.Decisive() && tr.tier+1 < len(seg.st.cfg.Tiers) {
		if tr.excN.Load() > 0 {
			now = tr.e.clock.Now() // the next tier's budget starts after the exceptions
		}
		next := tr.e.newTierRun(seg, tr.tier+1, now)
		if len(next.mods) == 0 {
			return next.ended(true) // nothing to run: closed at once
		}
		next.runners.Store(1)
		next.pending.Store(int32(len(next.mods)))
		next.watchStall(next.start, seg.margin)
		return next
	}
	seg.end, seg.out = tr, out
	close(seg.done)
	return nil
}

// scale sets the size of later claims from perModule, the first chunk's pace, and wakes
// one more runner when the modules left to claim would take a runner longer than
// helpWork at perModule each, up to one runner per core.
func (tr *tierRun) scale(perModule time.Duration) {
	tr.chunk.Store(chunkFor(perModule))
	if !worthHelp(int64(len(tr.mods))-tr.next.Load(), perModule) {
		return
	}
	for {
		n := tr.runners.Load()
		if int(n) >= tr.e.pool.procs {
			return
		}
		if tr.runners.CompareAndSwap(n, n+1) {
			tr.e.pool.wake(tr, 1, false)
			// The runner just woken is queued to run next on this core, where it would
			// wait for this one to finish the tier, while the idle core finds nothing to
			// steal for a few µs and sleeps again. Yielding lets it start here, and puts
			// this runner in the global queue, where the idle core picks it up.
			runtime.Gosched()
			return
		}
	}
}

// chunkFor returns the size of a claim of modules that take perModule each: about
// chunkWork of them, between claimChunk and maxChunk (maxChunk when they take no time).
func chunkFor(perModule time.Duration) int64 {
	if perModule <= 0 {
		return maxChunk
	}
	return min(max(int64(chunkWork/perModule), claimChunk), maxChunk)
}

// nextFast returns a module's fast counter after a run that took d in attempts attempts.
// The counter holds the consecutive fast runs (at least fastStreak: the module runs
// inline); fastStreak+1 marks a fast module whose last run was a hiccup. A run over
// fastLatency moves a fast module to its own goroutine only when the run before was over
// it too, or when it took a stall check or more, or was retried: one hiccup (a GC pause,
// a page fault, a thread the OS preempted) does not move it, a module that blocks does.
func nextFast(f int32, d time.Duration, attempts int) int32 {
	switch {
	case attempts > 1 || d >= stallCheck:
		return 0
	case d >= fastLatency:
		if f == fastStreak {
			return fastStreak + 1 // fast, one hiccup forgiven
		}
		return 0
	case f < fastStreak:
		return f + 1
	default:
		return fastStreak // fast (a pending hiccup is cleared)
	}
}

// worthHelp reports whether left modules at perModule each are worth another runner.
func worthHelp(left int64, perModule time.Duration) bool {
	return left > 0 && time.Duration(left)*perModule >= helpWork
}

// watchStall arms the stall check while the engine waits for the tier: if the runners
// have not admitted every module stallCheck after the wait started and no module
// finished in that time, the runners are stuck in modules that block, and more runners
// take over what is not claimed yet and what stuck runners claimed but did not start.
// The check repeats every stallCheck until the modules are admitted or the deadline
// (less margin) is near. The runner that admits the last module ends the watch, and
// stops the timer if the tier waits for modules on their own goroutines: the engine's own
// wait is then a single timer to the deadline. A check that woke the process a stallCheck
// into every tier moved the phase of that final timer sleep on the netpoller's millisecond
// grid, and made coarse deadlines later than a plain timer's.
func (tr *tierRun) watchStall(now time.Time, margin time.Duration) {
	if tr.admitted.Load() >= int64(len(tr.mods)) || tr.deadline.Sub(now)-margin <= stallCheck {
		return
	}
	tr.lastProgress.Store(tr.progress.Load())
	tr.e.stall.arm(tr, now.Add(stallCheck), margin)
}

// stopStall ends the stall check of tr once its modules are admitted. The timer itself is
// stopped only if tr waits for modules on their own goroutines (see stallWatch).
func (tr *tierRun) stopStall() { tr.e.stall.stop(tr, tr.dispatched.Load()) }

// stallWatch is the engine's stall check: one timer, armed for one tier at a time (tiers
// run one after another), so that watching a tier allocates nothing.
//
// The timer is armed once for a run of tiers, not once per tier: arming a Go timer that
// falls due before every other one wakes the thread in the network poller or an idle P
// (runtime.wakeNetPoller), a cost a small tick would pay once per tier (BENCHMARKS.md,
// BenchmarkTick).
// A watch that replaces another leaves the timer as it is, since it falls due no later
// than the new watch's check (checks are due stallCheck after a watch starts, and watches
// start in time order); a check that comes early re-arms the timer for the rest. A tier
// that no longer needs watching (all admitted) leaves the timer to run out, so that
// back-to-back ticks of trivial modules arm it about once a millisecond rather than once
// a tier; only a tier that waits for modules on their own goroutines after its last
// admission stops it, as that wait may be long and a wake-up in it moved coarse
// deadlines (see watchStall).
type stallWatch struct {
	mu     sync.Mutex
	t      clock.Timer   // guarded by mu; made on first use
	armed  bool          // guarded by mu; t is set, or its function is on its way
	tr     *tierRun      // guarded by mu; the tier watched, nil when none
	due    time.Time     // guarded by mu; when the check of tr falls due
	margin time.Duration // guarded by mu
}

// arm watches tr: its check falls due at due, stallCheck from now on tr's engine clock.
func (w *stallWatch) arm(tr *tierRun, due time.Time, margin time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tr, w.margin, w.due = tr, margin, due
	switch {
	case w.armed: // falls due no later than due; fire re-arms it for the rest
	case w.t == nil:
		w.t = tr.e.clock.AfterFunc(stallCheck, w.fire)
	default:
		w.t.Reset(stallCheck)
	}
	w.armed = true
}

// stop ends the watch of tr (a later tier's watch is left alone); final stops the timer
// too, unless a later tier is watched: no tier is to be watched before the engine's next
// wait.
func (w *stallWatch) stop(tr *tierRun, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tr == tr {
		w.tr = nil
	}
	if final && w.tr == nil {
		w.disarmLocked()
	}
}

// halt ends any watch and stops the timer (the engine is closed: no tick arms it again).
func (w *stallWatch) halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tr = nil
	w.disarmLocked()
}

// disarmLocked stops the timer if it is armed; the caller holds w.mu. A function already
// on its way finds no watch.
func (w *stallWatch) disarmLocked() {
	if w.armed {
		w.t.Stop()
		w.armed = false
	}
}

// fire is the timer's function: the check of the tier watched.
func (w *stallWatch) fire() {
	w.mu.Lock()
	tr, margin, due := w.tr, w.margin, w.due
	if tr == nil {
		w.armed = false // no watch: the next one arms the timer again
		w.mu.Unlock()
		return
	}
	now := tr.e.clock.Now()
	if now.Before(due) {
		w.t.Reset(due.Sub(now)) // armed for an earlier watch: this one's check comes later
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	again := false
	if !tr.closed.Load() && tr.admitted.Load() < int64(len(tr.mods)) {
		if p := tr.progress.Load(); p == tr.lastProgress.Load() {
			tr.e.pool.wake(tr, tr.e.pool.procs, true)
		} else {
			tr.lastProgress.Store(p)
		}
		again = tr.deadline.Sub(now)-margin > stallCheck
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.tr == nil || (w.tr == tr && !again):
		w.armed = false
	case w.tr == tr:
		w.due = now.Add(stallCheck)
		w.t.Reset(stallCheck)
	default: // a later tier's watch began meanwhile, leaving the timer to this function
		w.t.Reset(max(w.due.Sub(now), 0))
	}
}

// admit counts n modules whose admission is decided; the last one ends the stall check.
func (tr *tierRun) admit(n int64) {
	if n > 0 && tr.admitted.Add(n) == int64(len(tr.mods)) {
		tr.stopStall()
	}
}

// keptExc marks an exception settled by its runner as the tick before (see keptInline).
const keptExc = 1 << 30

// sortExceptions sorts exceptions by their module, marked or not. The mark is a high bit:
// a list all marked or all unmarked (a tier's usual list) sorts as plain numbers.
func sortExceptions(exc []int32) {
	slices.Sort(exc)
	if len(exc) > 1 && exc[0]&keptExc == 0 && exc[len(exc)-1]&keptExc != 0 {
		slices.SortFunc(exc, func(a, b int32) int { return cmp.Compare(a&^keptExc, b&^keptExc) })
	}
}

// exception leaves module j (marked keptExc or not) to the engine.
func (tr *tierRun) exception(j int) {
	n := tr.excN.Add(1) - 1
	x := tr.exc.Load()
	if x == nil { // the tier's first exception this tick: most tiers have none
		x = tr.excBuf()
		if !tr.exc.CompareAndSwap(nil, x) {
			x = tr.exc.Load()
		}
	}
	x.idx[n] = int32(j)
}

// excBuf returns the list of exceptions of tr's tier, made on its first exception under
// the state. A tier run writes it from index 0 and the one settling it reads it; the runs
// of one tier are tick after tick and nothing writes a run's exceptions once it is settled
// (its modules are done, or taken by the engine), so one list serves them all: a tier
// whose modules fail or are refused every tick allocates no list per tick.
func (tr *tierRun) excBuf() *excList {
	p := &tr.seg.st.exc[tr.tier]
	if x := p.Load(); x != nil && len(x.idx) == len(tr.mods) {
		return x
	}
	x := &excList{idx: make([]int32, len(tr.mods))}
	if !p.CompareAndSwap(nil, x) {
		if y := p.Load(); len(y.idx) == len(tr.mods) {
			return y
		}
	}
	return x
}

// excList holds the indexes of a tier's exceptions (one slot per module of the tier).
type excList struct{ idx []int32 }

// exceptions returns the indexes of the modules left as exceptions, then late.
func (tr *tierRun) exceptions(late []int32) []int32 {
	x := tr.exc.Load()
	if x == nil {
		return late
	}
	return append(x.idx[:tr.excN.Load()], late...)
}

// claim returns the next chunk [i, k) of modules to process, or ok=false.
func (tr *tierRun) claim() (i, k int, ok bool) {
	n := int64(len(tr.mods))
	c := tr.chunk.Load()
	if c == 0 {
		c = claimChunk
	}
	a := tr.next.Add(c) - c
	if a >= n || tr.closed.Load() {
		return 0, 0, false
	}
	return int(a), int(min(a+c, n)), true
}

// settleAtDeadline closes the tier: no module starts any more, every module still running
// is abandoned, every module never started is reported so. It returns those modules.
func (tr *tierRun) settleAtDeadline() []int32 {
	tr.closed.Store(true)
	tr.next.Store(math.MaxInt32)
	var late []int32
	for j, rt := range tr.mods {
		w := rt.w
		for {
			v := w.phase.Load()
			if phaseTick(v) != tr.tick {
				if phaseState(v) == phCommitting {
					runtime.Gosched() // an earlier run is writing its result: brief
					continue
				}
				if w.phase.CompareAndSwap(v, phase(tr.tick, phUnstarted)|phaseBusy(v)) {
					ln := tr.l.init(rt)
					if tr.preAdmit(rt, ln, phaseBusy(v) != 0) {
						// Not due, emergency-only or busy: that is its outcome, deadline or not.
						late = append(late, int32(j))
						break
					}
					ln.late = decide.Unstarted
					w.permit = breaker.Permit{}
					late = append(late, int32(j))
					break
				}
				continue
			}
			switch phaseState(v) {
			case phAdmitting, phCommitting:
				runtime.Gosched() // no module code runs in these states: it is brief
				continue
			case phRunning:
				w.runTick, w.runDeadline = tr.tick, tr.deadline.UnixNano()
				if !w.phase.CompareAndSwap(v, phase(tr.tick, phAbandoned)|busyBit) {
					continue
				}
				ln := &tr.l.recs[rt.idx]
				ln.late = decide.Abandoned
				ln.attempts = w.attempts.Load()
				tr.budgetExhausted.Store(true)
				late = append(late, int32(j))
			}
			break
		}
	}
	return late
}

// result is what a run leaves behind, owned by whoever runs the module.
type result struct {
	res       retrybudget.Result
	value     any
	readStale bool
}

// worker is a module's execution state. At most one run is outstanding per module: the
// phase word's busy bit is set at admission and cleared when the module returns.
type worker struct {
	e        *Engine
	phase    atomic.Uint64 // see the ph* states and busyBit
	attempts atomic.Int32  // the attempt in progress, for reporting an abandoned run
	fast     atomic.Int32  // consecutive fast runs; ≥ fastStreak: run inline
	mod      atomic.Pointer[modRT]

	// Owned by whoever runs the module (one at a time, see busyBit).
	permit    breaker.Permit
	held      *bulkhead.Bulkhead // the bulkhead whose permit the run holds; nil: none
	res       result
	in        tiers.Input // inside the worker: one object (one cache miss) less per run
	m         tiers.Module
	attemptFn func(ctx context.Context, n int) error

	inFor *modRT // the runtime w.in was made for

	// The tick the outstanding run was admitted in and its deadline (Unix nanoseconds).
	// A run outlives its tick only when the engine abandons it at the deadline, which
	// writes them before it marks the run abandoned; a later admission that finds the
	// busy bit set reads them (the phase word orders the two). A run that returns in
	// time leaves them alone: no store for them on the runners' path.
	runTick     uint64
	runDeadline int64

	// The dedicated goroutine, started on first need; guarded by its users' ordering
	// (admission of a module is serialised by its phase).
	chMu    sync.Mutex
	ch      chan *tierRun // guarded by chMu
	hasCh   atomic.Bool   // ch != nil, read without the lock on the inline path
	stopped bool          // guarded by chMu
}

func (e *Engine) newWorker(rt *modRT) *worker {
	w := &worker{e: e}
	// A new module is presumed fast: a cycle of 100 000 modules must not start 100 000
	// goroutines on its first tick. One slow run moves it to its own goroutine, and the
	// stall check keeps a blocking first run from holding the others.
	w.fast.Store(fastStreak)
	w.attemptFn = w.attempt
	w.mod.Store(rt)
	return w
}

// setModule points the worker at rt (a reload may change the spec but not the implementation).
func (w *worker) setModule(rt *modRT) { w.mod.Store(rt) }

// isFast reports whether the module may run inline on the runner pool.
func (w *worker) isFast() bool { return w.fast.Load() >= fastStreak }

// dispatch hands the run to the module's dedicated goroutine, starting it if needed. It
// reports false if the worker was stopped.
func (w *worker) dispatch(tr *tierRun) bool {
	w.chMu.Lock()
	defer w.chMu.Unlock()
	if w.stopped {
		return false
	}
	if w.ch == nil {
		w.ch = make(chan *tierRun, 1)
		w.hasCh.Store(true)
		w.e.workersWG.Add(1)
		go w.loop(w.ch)
	}
	w.ch <- tr
	return true
}

// retire ends the dedicated goroutine of a module that now runs inline.
func (w *worker) retire() {
	if !w.hasCh.Load() {
		return // the common case: a fast module never had one
	}
	w.chMu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
		w.hasCh.Store(false)
	}
	w.chMu.Unlock()
}

// stop ends the dedicated goroutine (after its current run, if any).
func (w *worker) stop() {
	w.chMu.Lock()
	if !w.stopped && w.ch != nil {
		close(w.ch)
		w.ch = nil
		w.hasCh.Store(false)
	}
	w.stopped = true
	w.chMu.Unlock()
}

func (w *worker) loop(ch chan *tierRun) {
	defer w.e.workersWG.Done()
	for tr := range ch {
		w.execute(tr, clock.Stamp{})
		tr.finish(1, false)
	}
}

// What process did with a module.
const (
	notMine    = iota // another runner (or the engine, at the deadline) has it
	finished          // admitted and run inline, or not admitted
	dispatched        // handed to its dedicated goroutine, which reports it
)

// preAdmit decides the refusals that do not need the breaker (decide.Admit): an
// emergency-only module outside emergency mode, a multi-rate module not due this tick, a
// module whose run of an earlier tick has not returned. It records the refusal on the line
// and reports whether there was one.
func (tr *tierRun) preAdmit(rt *modRT, ln *lineRec, busy bool) bool {
	return tr.gated(rt, busy) && tr.gate(rt, ln, busy)
}

// gated reports whether a fact of decide.Gate is set for rt. Without one, decide.Admit
// refuses nothing, which the line's zero refusal says already: most modules of most
// ticks are admitted without building the gate (TestAdmitWithoutFacts).
func (tr *tierRun) gated(rt *modRT, busy bool) bool {
	return busy || tr.shedding || rt.gated
}

// gate is preAdmit for a module with a fact of decide.Gate set.
func (tr *tierRun) gate(rt *modRT, ln *lineRec, busy bool) bool {
	ln.refusal = decide.Admit(decide.Gate{Tick: tr.tick, Every: rt.spec.Every, EmergencyOnly: rt.spec.Emergency,
		Emergency: tr.emergency, Busy: busy, Shed: tr.shedding && tr.seg.shed[rt.idx]})
	if ln.refusal == decide.StillBusy {
		w := rt.w
		ln.busyFacts(w.runTick, time.Duration(tr.start.UnixNano()-w.runDeadline))
	}
	return ln.refusal != decide.NotRefused
}

// admitPhase moves w's phase to admitting for tr's tick and returns the busy bit of a run
// still outstanding from an earlier tick; mine is false if the phase is not tr's to take.
func (tr *tierRun) admitPhase(w *worker) (busy uint64, mine bool) {
	for {
		old := w.phase.Load()
		if phaseState(old) == phCommitting && phaseTick(old) < tr.tick {
			runtime.Gosched() // an earlier run is writing its result: brief, no module code
			continue
		}
		// A phase of this tick (or a later one, for a runner that outlived its tier) is not ours.
		if phaseTick(old) >= tr.tick || tr.closed.Load() {
			return 0, false
		}
		busy = phaseBusy(old)
		if w.phase.CompareAndSwap(old, phase(tr.tick, phAdmitting)|busy) {
			return busy, true
		}
		// Lost to another admission (caught above next time round), to the engine at the
		// deadline (likewise), or to a late run clearing its busy bit: look again.
	}
}

// process admits module j of tr and runs it inline or dispatches it. t is when its work
// starts; it returns when the work ended (for the next module's start) and what it did.
func (tr *tierRun) process(j int, t clock.Stamp) (clock.Stamp, int) {
	rt := tr.mods[j]
	w := rt.w
	var busy uint64
	// The first try of admitPhase, inline: done in an earlier tick, not busy, the tier
	// open, and no one else at it (most modules of most ticks).
	if old := w.phase.Load(); old&(stateMask|busyBit) != phDone || phaseTick(old) >= tr.tick || tr.closed.Load() ||
		!w.phase.CompareAndSwap(old, phase(tr.tick, phAdmitting)) {
		var mine bool
		if busy, mine = tr.admitPhase(w); !mine {
			return t, notMine
		}
	}
	ln := tr.l.init(rt)
	switch {
	case tr.preAdmit(rt, ln, busy != 0):
	default:
		p, pass := rt.br.Passing()
		if !pass {
			p = rt.br.AcquireAt(tr.start) // an open breaker refuses without its lock
		}
		if r := decide.AdmitBreaker(p.Allowed()); r != decide.NotRefused {
			ln.refusal = r // admitted, the line's zero refusal says so already
			break
		}
		if x := rt.res; x != nil && tr.admitExtra(w, x, ln, rt.br, p) {
			break
		}
		w.permit = p
		w.phase.Store(phase(tr.tick, phRunning) | busyBit) // not busy before: the bit is ours
		if w.mod.Load() != rt {
			w.setModule(rt) // the runtime of a reload takes the worker over at its first run (see carry)
		}
		if w.isFast() {
			w.retire()
			return w.execute(tr, t), finished
		}
		if !w.dispatch(tr) {
			rt.br.Release(p) // the Done store below clears the busy bit
			w.endRun()
			ln.refusal = decide.Stopped
			break
		}
		if !tr.dispatched.Load() {
			tr.dispatched.Store(true)
		}
		return t, dispatched
	}
	tr.refused(j, rt, ln, busy)
	return t, finished
}

// refused leaves module j, rt, refused at admission with line ln, to the tier's settling
// (settled at once if it repeats the tick before, see keptInline) and marks it done. busy
// is the busy bit of a run still outstanding from an earlier tick.
func (tr *tierRun) refused(j int, rt *modRT, ln *lineRec, busy uint64) {
	// Recorded before Done: the engine taking the tier at its deadline waits for modules
	// being admitted, then reads the exceptions, and must find this one among them.
	if tr.keptInline(rt, ln) {
		j |= keptExc
	}
	tr.exception(j)
	if busy != 0 {
		// Busy: the late run may clear its bit meanwhile.
		rt.w.swapPhase(func(old uint64) uint64 { return phase(tr.tick, phDone) | phaseBusy(old) })
	} else {
		rt.w.phase.Store(phase(tr.tick, phDone)) // also clears the bit of a run that was not dispatched
	}
}

// execute runs the module once under the tier's retry budget. If the run is still owned
// (not abandoned), it commits a success and fills the module's summary line, leaving
// anything but a plain success to the engine. at is the time the run starts if the
// caller knows it (zero: read the clock); it returns the time the run ended.
func (w *worker) execute(tr *tierRun, at clock.Stamp) clock.Stamp {
	rt := w.mod.Load()
	if w.inFor != rt { // a new runtime (first run, or a reload): check the input still fits
		// A worker serves one registration (see Engine.identify): only the spec may have changed.
		if w.inFor == nil || w.in.Module() != rt.name || w.in.Tier() != rt.planned.TierIndex || !sameKeys(w.in.Reads(), rt.spec.Reads) {
			w.in.Init(w.e.board, *rt.spec, rt.planned.TierIndex)
			w.m = rt.mod
		}
		w.inFor = rt
	}
	if at.IsZero() {
		at = clock.NewStamp(w.e.clock)
	}
	start := at.Time()
	w.in.Begin(tr.tick, tr.deadline)
	// r.value is left as the last run left it: only a successful attempt sets it, and only a
	// success reads it. Writing a pointer costs a write barrier while the collector marks.
	r := &w.res
	// The run's length, read once for its latency, its speed and its end: from the
	// processor's counter where the kernel keeps time with it, else from the monotonic
	// clock only (clock.Elapsed).
	var d time.Duration
	var endAt clock.Stamp
	if start.Before(tr.deadline) && tr.ctx.Err() == nil {
		// The checks RunFrom makes before the first attempt: the first attempt is made
		// here, and the runner is entered only to retry.
		err := w.attempt(tr.ctx, 1)
		d, endAt = clock.Elapsed(w.e.clock, at)
		if err != nil {
			// The retry budget decides from the end of the attempt whether the deadline
			// had passed. With one attempt allowed it neither retries nor waits, and the
			// run ended there; otherwise it may have done both.
			r.res = w.e.runner.RunAfterAt(tr.ctx, tr.budget(rt), w.attemptFn, err, endAt.Time())
			if rt.planned.Attempts > 1 {
				d, endAt = clock.Elapsed(w.e.clock, at)
			}
		} else {
			r.succeeded()
		}
	} else {
		r.res = w.e.runner.RunFrom(tr.ctx, start, tr.budget(rt), w.attemptFn)
		d, endAt = clock.Elapsed(w.e.clock, at)
	}
	end := endAt.Time()
	r.readStale = w.in.ReadStale()
	f := w.fast.Load()
	if nf := nextFast(f, d, r.res.Attempts); nf != f {
		w.fast.Store(nf) // only when it changes: an atomic store costs a full barrier
	}
	if w.phase.CompareAndSwap(phase(tr.tick, phRunning)|busyBit, phase(tr.tick, phCommitting)|busyBit) {
		w.report(tr, rt, d, end)
		// Done and not busy in one store: whoever sees Done (the engine at the deadline, the
		// next admission) does not see the module still running. The next admission waits
		// while the phase is Committing, so nothing overwrites Done early.
		w.phase.Store(phase(tr.tick, phDone))
	} else {
		w.clearBusy() // abandoned: the late result is discarded
	}
	return endAt
}

// succeeded sets the result of a run whose first attempt succeeded, field by field:
// assigning a whole Result is a typed copy with a bulk write barrier while the collector
// marks, and Err is written only when an earlier run left one.
func (r *result) succeeded() {
	if r.res.Err != nil {
		r.res.Err = nil
	}
	r.res.Attempts, r.res.Kind, r.res.BudgetExhausted, r.res.AttemptsExhausted = 1, fault.KindNone, false, false
}

// budget is the retry budget of rt's run in tr.
func (tr *tierRun) budget(rt *modRT) retrybudget.Budget {
	b := retrybudget.Budget{MaxAttempts: rt.planned.Attempts, Backoff: tr.backoff, Retryable: tr.retry}
	if x := rt.res; x != nil && x.rb != nil {
		b.Gate = x.rb
	}
	return b
}

// swapPhase replaces the phase word old by f(old), for the writes that must keep what
// another goroutine may change meanwhile (the busy bit, or the tick and state).
func (w *worker) swapPhase(f func(old uint64) uint64) {
	for {
		old := w.phase.Load()
		if w.phase.CompareAndSwap(old, f(old)) {
			return
		}
	}
}

// clearBusy clears the busy bit of an abandoned run that returned, whatever the tick and
// state the word has moved on to, once the run's bulkhead permit is given back (the next
// admission, which may come as soon as the bit is clear, finds it free).
func (w *worker) clearBusy() {
	w.endRun()
	w.swapPhase(func(old uint64) uint64 { return old &^ busyBit })
}

// busy reports whether a run of the module is in flight.
func (w *worker) busy() bool { return phaseBusy(w.phase.Load()) != 0 }

// report fills the summary line of a run that returned (in time or not) with its facts,
// and commits it if the verdict is a success: breaker, last-known-good, blackboard. Any
// other verdict is left to whoever settles the tier.
func (w *worker) report(tr *tierRun, rt *modRT, d time.Duration, end time.Time) {
	w.endRun() // while Committing: the next admission waits for Done, and finds the permit free
	r := &w.res
	ln := &tr.l.recs[rt.idx]
	ln.attempts = int32(r.res.Attempts)
	ln.latency = d
	if r.res.BudgetExhausted {
		tr.budgetExhausted.Store(true)
	}
	// A retry refused by a retry-amplification budget (RetryRefused) ends the run with its
	// last fault, judged as any other; the budget itself tells the summary (exhausted).
	if w.permit.Kind() == breaker.Probe {
		ln.flags |= lineProbe
	}
	if r.res.Err != nil { // a success leaves them as the tick's start cleared them
		ln.kind, ln.flags = r.res.Kind, ln.flags|lineFailed
	}
	switch {
	case !end.Before(tr.deadline):
		// It returned at or after the deadline, before the engine got round to abandoning
		// it (a late wake-up, or, on a clock that stands still while goroutines run, the
		// same instant): the result is late all the same, and discarded, as the engine
		// would have reported it. The deadline is reached at its instant, as for the retry
		// budget and the engine's own wait. This comes first also for a run that never
		// started because its runner reached it at or after the deadline: the engine,
		// finding it running then, abandons it, and the two must not differ.
		ln.late = decide.Abandoned
		tr.budgetExhausted.Store(true)
	case r.res.Attempts == 0 && r.res.Err != nil:
		// Not started: its tier's context was done already (the tick cancelled, or the
		// engine took the tier), or the runner reached it at or after the deadline.
		ln.late = decide.Unstarted
	}
	if ln.plainRun() {
		// decide's plain run, whose verdict is made once (decide.PlainVerdict): a
		// success to commit, plain, nothing left for the settling of the tier.
		w.commit(tr, rt, ln, end)
		ln.status = plainStatus
		return
	}
	v := decide.Judge(ln.outcome(), rt.policy)
	if v.Breaker == decide.Success && ln.late == decide.InTime {
		w.commit(tr, rt, ln, end)
	}
	if !v.Plain(r.res.Attempts) {
		tr.exception(int(rt.tierPos))
		return
	}
	tr.l.judged(ln, v.Status)
}

// plainStatus is the status of decide's plain run.
var plainStatus = decide.PlainVerdict().Status

// attempt runs the module once, recovering a panic as an internal fault.
func (w *worker) attempt(ctx context.Context, n int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &fault.PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	w.in.SetAttempt(n)
	if x := w.inFor.res; n == 1 && x != nil && x.rb != nil { // inFor is the runtime being run
		x.rb.First()
	}
	if w.attempts.Load() != int32(n) {
		w.attempts.Store(int32(n)) // most runs are a first attempt after a first attempt: no store
	}
	v, err := w.m.Run(ctx, &w.in)
	if err == nil {
		w.res.value = v
	}
	return err
}

// pool is the set of runner goroutines.
type pool struct {
	e       *Engine
	procs   int // GOMAXPROCS when the engine was made: the runners a tier may use
	mu      sync.Mutex
	idle    []*runner // guarded by mu
	closed  bool      // guarded by mu
	maxIdle int
	spin    atomic.Bool // idle runners spin for their next job (see next); set by the engine
}

type runner struct {
	ch     chan runJob
	waited time.Duration // how long the runner waited for its last job; its own
}

// runJob asks a runner to drain tr. With sweep set (a runner woken because the tier
// stalled) it also takes over, once nothing is left to claim, the modules that other
// runners claimed but have not started because they are stuck in a blocking module.
type runJob struct {
	tr    *tierRun
	sweep bool
}

// wake hands tr to n runners, reusing idle ones and starting new ones as needed.
func (p *pool) wake(tr *tierRun, n int, sweep bool) {
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
			r = &runner{ch: make(chan runJob, 1)}
			p.e.workersWG.Add(1)
			go p.loop(r)
		}
		r.ch <- runJob{tr: tr, sweep: sweep}
	}
}

func (p *pool) loop(r *runner) {
	defer p.e.workersWG.Done()
	for job, ok := <-r.ch; ok; job, ok = p.next(r) {
		for tr, sweep := job.tr, job.sweep; tr != nil; sweep = false {
			tr = p.drain(tr, sweep)
		}
		p.mu.Lock()
		if p.closed || len(p.idle) >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, r)
		p.mu.Unlock()
	}
}

// next waits for the idle runner r's next job (ok false: the pool is closed). With hand-off
// spinning on (see Engine.wait) it first polls for up to runnerSpin, yielding the processor
// between polls, if its last job came within that: an engine that starts the next tier or
// tick back to back then finds the runner running, where waking a parked one readies it on
// an idle thread, a system call on the engine's path before the runner can start on its
// own core. A runner whose jobs come further apart (ticks on a period) parks
// at once, and times the wait to know when to spin again.
func (p *pool) next(r *runner) (job runJob, ok bool) {
	if !p.spin.Load() {
		r.waited = 0
		job, ok = <-r.ch
		return job, ok
	}
	c := p.e.clock
	start := c.Now()
	if r.waited < runnerSpin {
		if job, ok, got, at := poll(c, r.ch, start, runnerSpin); got {
			r.waited = at.Sub(start)
			return job, ok
		}
	}
	job, ok = <-r.ch
	r.waited = c.Now().Sub(start)
	return job, ok
}

// poll tries to receive from ch, yielding the processor between tries (runtime.Gosched),
// until the clock c reads d after start. got reports whether it received (v and ok as a
// receive gives them), and at the time read before the try that did.
func poll[T any](c clock.Clock, ch <-chan T, start time.Time, d time.Duration) (v T, ok, got bool, at time.Time) {
	for now := start; now.Sub(start) < d; now = c.Now() {
		select {
		case v, ok = <-ch:
			return v, ok, true, now
		default:
		}
		runtime.Gosched()
	}
	return v, false, false, time.Time{}
}

// drain claims and processes tr's modules until none is left (and, for a sweeper, takes
// over those claimed by stuck runners). It returns the next tier of the segment if this
// runner finished tr clean and started it.
func (p *pool) drain(tr *tierRun, sweep bool) (next *tierRun) {
	// Each module's run starts when the one before ended (one clock read a module), from
	// a stamp read at most reanchor before on the clock itself (see clock.Stamp).
	t := clock.NewStamp(p.e.clock)
	anchor := t.Time()
	n := 0
	scaled := sweep // sweepers are woken by the stall check, which decides their number
	for i, k, ok := tr.claim(); ok; i, k, ok = tr.claim() {
		t = p.restamp(t, &anchor)
		t0 := t
		a := 0
		for j := i; j < k; j++ {
			var did int
			t, did = tr.process(j, t)
			if did == finished {
				n++
			}
			if did != notMine {
				a++
			}
		}
		tr.admit(int64(a))
		if !scaled {
			scaled = true
			tr.scale(t.Time().Sub(t0.Time()) / time.Duration(k-i))
		}
		if n >= 64 {
			if nx := tr.finish(n, true); nx != nil {
				next = nx
			}
			n = 0
		}
	}
	if sweep {
		for j := range tr.mods {
			if tr.closed.Load() {
				break
			}
			var did int
			t, did = tr.process(j, p.restamp(t, &anchor))
			if did == finished {
				n++
			}
			if did != notMine {
				tr.admit(1)
			}
		}
	}
	if nx := tr.finish(n, true); nx != nil {
		next = nx
	}
	return next
}

// restamp returns t, or a stamp read anew on the clock once t is more than reanchor after
// *anchor, which then moves to it.
func (p *pool) restamp(t clock.Stamp, anchor *time.Time) clock.Stamp {
	if t.Time().Sub(*anchor) <= reanchor {
		return t
	}
	t = clock.NewStamp(p.e.clock)
	*anchor = t.Time()
	return t
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
	n := runtime.GOMAXPROCS(0)
	return &pool{e: e, procs: n, maxIdle: 2 * n}
}

func sameKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
