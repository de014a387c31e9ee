package cycle

import (
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
)

// tickLines is the module lines of one tick's summary in the engine's compact form, read
// through faultsummary.Lines. A whole faultsummary.Module is 240 bytes with a dozen
// pointers, most of them the module's identity (name, tier, breaker, key), the same tick
// after tick; in a large cycle such lines would be fresh memory written and then scanned
// by the garbage collector every tick. Here a module's line is a lineRec of plain
// values (40 bytes the collector does not scan) and its served value; its identity is read
// from the state the tick ran under, and what only exceptions carry (error text, a
// fallback's served entry) is kept aside. The runners write the records of the modules they
// commit (each its own record), the engine the rest, serially; once the summary is
// published nothing writes them any more.
type tickLines struct {
	st   *state
	tick uint64
	loc  *time.Location        // of the tick's clock: written times are kept as Unix nanoseconds
	recs []lineRec             // one per module, in plan order
	vals []any                 // the live value each module produced this tick
	ex   []lineEx              // indexed by lineRec.ex-1; written by the engine only
	fb   []faultsummary.Served // the served entries other than nothing, by lineEx.served-1

	exHint int // the extras the last tick had: ex is made with that capacity
	fbHint int // the served entries the last tick had: fb is made with that capacity

	// keptN counts the lines settled as kept (lineNothing); kver is state.keptVer at the
	// tick's end, and steady reports that no breaker moved during the tick (the lines'
	// circuits are those seen at admission). Written by whoever settles a tier, and by the
	// engine at the tick's end; see SameNotPlain.
	keptN  int
	kver   uint64
	steady bool

	degraded atomic.Bool // a line's status is not nominal (see judged)
}

// lineRec is one module's line, without pointers. The mechanism writes the facts of a
// module's outcome (refusal, late, attempts, kind, the lineProbe and lineFailed flags);
// status and cause are the verdict on them (see decide.Judge), written once per tick.
type lineRec struct {
	latency time.Duration // in milliseconds only when the line is read (see Line)
	// seq and written describe the live value (lineLive). A line refused as busy has none:
	// they hold instead the tick its module's outstanding run was admitted in, and how long
	// past that run's deadline this tier started, in nanoseconds (see busyFacts).
	seq      uint64 // the live value's sequence number
	written  int64  // when the live value was written, in Unix nanoseconds
	attempts int32
	ex       int32 // 1 + the index of the line's extras in tickLines.ex; 0: none
	status   decide.Status
	kind     fault.Kind
	circuit  breaker.State // at admission; corrected at the tick's end
	flags    uint8         // lineLive, lineDerived, lineProbe, lineFailed
	refusal  decide.Refusal
	late     decide.Late
	cause    decide.Cause
}

// The lineRec flags.
const (
	lineLive    = 1 << iota // the module produced this tick's value (served live)
	lineDerived             // … from a stale input (served.derived_from_stale)
	lineProbe               // it ran as a half-open probe
	lineFailed              // its run ended with an error
	lineNothing             // refused and settled as the tick before: serves nothing, its error is its cause's (see keptLine)
)

// outcome returns the facts of the line's outcome, for the verdict.
func (r *lineRec) outcome() decide.Outcome {
	o := decide.Outcome{Refusal: r.refusal, Late: r.late, Attempts: int(r.attempts), Kind: r.kind,
		Failed: r.flags&lineFailed != 0, Probe: r.flags&lineProbe != 0}
	if r.refusal == decide.StillBusy {
		o.Overdue = time.Duration(r.written)
	}
	return o
}

// plainRun reports whether the line's outcome is decide's plain run, a success after
// one attempt in time and not as a probe (outcome() == decide.Outcome{Attempts: 1}),
// without building the outcome.
func (r *lineRec) plainRun() bool {
	return r.refusal == decide.NotRefused && r.late == decide.InTime && r.attempts == 1 &&
		r.kind == fault.KindNone && r.flags&(lineFailed|lineProbe) == 0
}

// busyFacts records on a line refused as busy the tick its module's outstanding run was
// admitted in and how long past that run's deadline the refusing tier started.
func (r *lineRec) busyFacts(since uint64, overdue time.Duration) {
	r.seq, r.written = since, int64(overdue)
}

// err returns the error of the line of module rt: the run's own (its result stays on the
// worker until the module's next admission, a tick later, so this holds for the tick in
// progress or the one just finished), or the one its cause names.
func (r *lineRec) err(rt *modRT) error {
	if r.cause == decide.CauseRun {
		return rt.w.res.res.Err
	}
	return r.cause.ErrSince(r.seq)
}

// lineEx is what a line carries only when something went wrong: the error text and the
// fallback entry served instead of a live value. A module served nothing (one that never
// had a value: the steady state of a module that keeps failing, or whose breaker stays
// open) needs no entry of its own: served is 0 and the line makes it from the key.
type lineEx struct {
	err           string
	served        int32 // 1 + the index of the served entry in tickLines.fb; 0: nothing
	hasServed     bool
	usingFallback bool
}

// serveEntry records s as the entry served for line i, which has no live value.
func (l *tickLines) serveEntry(i int, s faultsummary.Served) {
	x := l.extra(i)
	x.hasServed, x.usingFallback = true, s.Source == blackboard.LastGood
	if s == (faultsummary.Served{Key: s.Key, Source: blackboard.None}) {
		x.served = 0
		return
	}
	if l.fb == nil && l.fbHint > 0 {
		// A steady state of fallbacks (a tier skipped in emergency mode, breakers open on
		// modules that had values) serves as many as the tick before: one allocation
		// instead of a growing slice of entries the collector scans.
		l.fb = make([]faultsummary.Served, 0, l.fbHint)
	}
	l.fb = append(l.fb, s)
	x.served = int32(len(l.fb))
}

// newTickLines returns the lines of tick id under st, on the buffers b; exHint and fbHint
// are how many lines had extras and served entries in the last tick.
func newTickLines(st *state, id uint64, start time.Time, b lineBuf, exHint, fbHint int) *tickLines {
	return &tickLines{st: st, tick: id, loc: start.Location(), recs: b.recs, vals: b.vals, exHint: exHint, fbHint: fbHint}
}

// init starts the line of rt (called once per module per tick, on a zeroed record).
func (l *tickLines) init(rt *modRT) *lineRec {
	r := &l.recs[rt.idx]
	r.circuit = rt.br.Peek()
	return r
}

// extra returns the extras of line i, adding them if it has none. Only the goroutine that
// settles a tier (see tierRun.settle) calls it.
func (l *tickLines) extra(i int) *lineEx {
	r := &l.recs[i]
	if r.ex == 0 {
		if l.ex == nil && l.exHint > 0 {
			l.ex = make([]lineEx, 0, l.exHint)
		}
		l.ex = append(l.ex, lineEx{})
		r.ex = int32(len(l.ex))
	}
	return &l.ex[r.ex-1]
}

// Len returns the number of lines.
func (l *tickLines) Len() int { return len(l.recs) }

// Status returns the status of line i.
func (l *tickLines) Status(i int) faultsummary.Status { return l.recs[i].status.Public() }

// Identity returns the state the tick ran under: its modules, tiers, breakers and keys.
func (l *tickLines) Identity() any { return l.st }

// Latency returns the latency of line i (faultsummary.LatencyLines).
func (l *tickLines) Latency(i int) time.Duration { return l.recs[i].latency }

// Plain reports whether line i is a plain success (faultsummary.KeepWhole).
func (l *tickLines) Plain(i int) bool { return l.recs[i].plain() }

// plain reports whether the record is a plain success's.
func (r *lineRec) plain() bool {
	return r.status == decide.OK && r.attempts == 1 && r.kind == fault.KindNone && r.ex == 0 &&
		r.circuit == breaker.Closed && r.flags == lineLive
}

// AppendNotPlain appends the positions of the lines that are not plain successes
// (faultsummary.PlainLines).
func (l *tickLines) AppendNotPlain(dst []int32) []int32 {
	for i := range l.recs {
		if !l.recs[i].plain() {
			dst = append(dst, int32(i))
		}
	}
	return dst
}

// AllNominal reports whether every line's status is nominal (faultsummary.NominalLines):
// every status but the plain run's is written through judged, which marks the lines
// when it is not.
func (l *tickLines) AllNominal() bool { return !l.degraded.Load() }

// judged writes status s, a verdict's, on line ln.
func (l *tickLines) judged(ln *lineRec, s decide.Status) {
	ln.status = s
	if !s.Nominal() && !l.degraded.Load() {
		l.degraded.Store(true)
	}
}

// SameLine reports whether line i is line i of prev, the lines of an earlier tick under
// the same state (faultsummary.SameLines): the same record and the same extras, serving
// no value. The identity of a line is the state's, and the rest of it is read from its
// record and extras alone when it serves none (see Line).
func (l *tickLines) SameLine(prev faultsummary.Lines, i int) bool {
	p, ok := prev.(*tickLines)
	if !ok || p.st != l.st {
		return false
	}
	a, b := &l.recs[i], &p.recs[i]
	if a.flags&lineLive != 0 || (a.ex == 0) != (b.ex == 0) || !a.sameFacts(b) {
		return false
	}
	if a.ex == 0 {
		return true
	}
	x, y := &l.ex[a.ex-1], &p.ex[b.ex-1]
	return x.served == 0 && y.served == 0 && *x == *y
}

// SameNotPlain reports whether the n lines that are not plain successes are each the
// line at the same position of prev (faultsummary.SteadyLines), the lines of an earlier
// tick whose n such lines are at the same positions: when every one of them, in both
// ticks, was settled as kept, with no breaker moving during either tick, and nothing kept
// changed between the ends of the two ticks. A kept line is made from its keptLine and
// the circuit seen at admission, which applyKept compares with the keptLine's.
func (l *tickLines) SameNotPlain(prev faultsummary.Lines, n int) bool {
	p, ok := prev.(*tickLines)
	return ok && p.st == l.st && l.steady && p.steady && l.kver == p.kver && l.keptN == n && p.keptN == n
}

// sameFacts reports whether r and o are equal but for their extras' index.
func (r *lineRec) sameFacts(o *lineRec) bool {
	a, b := *r, *o
	a.ex, b.ex = 0, 0
	return a == b
}

// Line sets *m to line i.
func (l *tickLines) Line(i int, m *faultsummary.Module) {
	rt, r := l.st.lines[i], &l.recs[i]
	ti := rt.planned.TierIndex
	*m = faultsummary.Module{Name: rt.name, Tier: l.st.cfg.Tiers[ti].Name, TierIndex: ti,
		Status: r.status.Public(), Attempts: int(r.attempts), LatencyMs: blackboard.Millis(r.latency),
		Breaker: rt.breakerName(), CircuitState: r.circuit.String(), Served: faultsummary.Served{Key: rt.key}}
	if r.kind != fault.KindNone {
		m.FaultKind = r.kind.String()
	}
	if r.flags&lineNothing != 0 {
		if err := r.cause.Err(); err != nil {
			m.Error = err.Error()
		}
		m.Served.Source = blackboard.None
		return
	}
	if r.ex != 0 {
		x := &l.ex[r.ex-1]
		m.Error = x.err
		if x.hasServed {
			m.UsingFallback = x.usingFallback
			if x.served != 0 {
				m.Served = l.fb[x.served-1]
			} else {
				m.Served.Source = blackboard.None
			}
			return
		}
	}
	if r.flags&lineLive != 0 {
		m.Served = faultsummary.Served{Key: rt.key, Source: blackboard.Live, DerivedFromStale: r.flags&lineDerived != 0,
			Value: l.vals[i], Written: time.Unix(0, r.written).In(l.loc), WrittenTick: l.tick, Seq: r.seq}
	}
}

// lineBuf is the memory of one tick's lines.
type lineBuf struct {
	recs []lineRec
	vals []any
}
