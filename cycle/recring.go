package cycle

import (
	"unsafe"
	"weak"
)

// recRing keeps the records of the last ticks' summary lines, each with a weak pointer to
// the lines that use them, so that a tick can reuse the records of a tick whose summary
// nobody holds any more instead of allocating them. Measured with 500 trivial modules in
// step mode, the records were 60% of the bytes a tick allocated, and the collections they
// caused about a seventh of the tick's mean cost and most of its p99 (BENCHMARKS.md).
//
// A record holds no pointer, so a reused one keeps nothing alive; the values the modules
// produced (tickLines.vals) are pointers and are never reused, for the same reason. The
// ring is a FIFO of the last len(ents) ticks: the next tick looks at the oldest entry
// only. Its records are reused if the collector has reclaimed the lines that used them
// (the weak pointer is nil: no summary, reader or late runner refers to them any more,
// and none can again); otherwise the entry is dropped (the records are left to the
// collector) and the tick allocates. The ring is long enough to outlast the summaries the
// history keeps whole (which refer to their lines) by a slack of up to maxReuseSlack
// ticks, so that after a collection the next slack ticks allocate no records. Records
// held for reuse cost memory: at most reuseBytes of them beyond what the history holds
// anyway, and none for a cycle so large that fewer than minReuseSlack ticks' records fit
// in that.
//
// The race detector cannot see that the collector proved the records unreferenced, and
// would report a reader of an old summary and the tick that reuses its records as a race:
// under it, nothing is reused.
type recRing struct {
	n    int      // the number of modules the entries are sized for
	ents []recEnt // the last len(ents) ticks' records; none: no reuse for this size
	next int      // the oldest entry: the next to be reused or replaced
}

// recEnt is one tick's records and the lines that use them.
type recEnt struct {
	owner weak.Pointer[tickLines]
	recs  []lineRec
}

const (
	// reuseBytes bounds the records the ring holds beyond the history's whole summaries.
	reuseBytes = 2 << 20
	// maxReuseSlack is the most ticks' records the ring holds beyond the history's.
	maxReuseSlack = 64
	// minReuseSlack is the fewest worth holding: below it, reuse is off.
	minReuseSlack = 8
	// recBytes is the memory of one module's record.
	recBytes = int(unsafe.Sizeof(lineRec{}))
)

// ringLen returns the length of the ring for ticks of n modules when whole summaries of
// n lines are kept whole (and refer to their lines): 0 when reuse is not worth it.
func ringLen(n, whole int) int {
	if raceEnabled || n == 0 {
		return 0
	}
	slack := min(maxReuseSlack, reuseBytes/(n*recBytes))
	if slack < minReuseSlack {
		return 0
	}
	// The whole summaries, the tick's caller's, one a reader may still be encoding.
	return whole + 2 + slack
}

// reuse returns the oldest entry's records, zeroed, if they are n records the collector has
// proved unreferenced; otherwise nil. A change of n resizes the ring (whole tells how many
// summaries of n lines the history keeps whole) and drops what it held.
func (r *recRing) reuse(n int, whole func(n int) int) []lineRec {
	if n != r.n {
		r.n, r.next = n, 0
		r.ents = nil
		if k := ringLen(n, whole(n)); k > 0 {
			r.ents = make([]recEnt, k)
		}
		return nil
	}
	if len(r.ents) == 0 {
		return nil
	}
	en := &r.ents[r.next]
	if en.recs == nil || en.owner.Value() != nil {
		return nil
	}
	recs := en.recs
	*en = recEnt{}
	clear(recs)
	return recs
}

// keep records l as the newest entry, replacing the oldest (whose records, if still in
// use, are left to the collector).
func (r *recRing) keep(l *tickLines) {
	if len(r.ents) == 0 || len(l.recs) != r.n {
		return
	}
	r.ents[r.next] = recEnt{owner: weak.Make(l), recs: l.recs}
	r.next = (r.next + 1) % len(r.ents)
}
