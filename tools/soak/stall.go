package main

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/cycled/cycled/faultsummary/check"
)

// Host stalls.
//
// On a machine whose CPUs are saturated by other work, every process is descheduled for
// tens of milliseconds at a time, the daemon included: a tier then overruns its budget
// without any fault of the engine. The soak measures such stalls independently with a
// probe (a thread that sleeps 1 ms in a loop and records every wake-up late by more than
// stallMin), and a tier_budget violation in a tick overlapping a stall it recorded is
// reported as excused by the host, not as a failure. On an idle machine (CI) there are no
// stalls and nothing is excused; the report says how many were.

const (
	stallMin    = 5 * time.Millisecond // a wake-up this late is a stall
	stallMargin = 5 * time.Millisecond // a stall this close to a tick counts for it
)

type stall struct{ from, to time.Time }

type stallProbe struct {
	mu     sync.Mutex
	stalls []stall // in time order
	worst  time.Duration
	total  time.Duration
}

func (p *stallProbe) run(ctx context.Context) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for ctx.Err() == nil {
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		t1 := time.Now()
		if late := t1.Sub(t0) - time.Millisecond; late > stallMin {
			p.mu.Lock()
			p.stalls = append(p.stalls, stall{from: t0.Add(time.Millisecond), to: t1})
			p.worst = max(p.worst, late)
			p.total += late
			p.mu.Unlock()
		}
	}
}

// during reports whether a stall overlaps [from − margin, to + margin].
func (p *stallProbe) during(from, to time.Time) bool {
	from, to = from.Add(-stallMargin), to.Add(stallMargin)
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.stalls), func(i int) bool { return !p.stalls[i].to.Before(from) })
	return i < len(p.stalls) && !p.stalls[i].from.After(to)
}

func (p *stallProbe) summary() (n int, worst, total time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stalls), p.worst, p.total
}

// violation is a violation with the times of its tick.
type violation struct {
	check.Violation
	started, finished time.Time
}

// split separates the violations the host explains (tier_budget in a tick that overlaps a
// stall the probe recorded) from the others.
func (p *stallProbe) split(vs []violation) (real, excused []violation) {
	for _, v := range vs {
		if v.Rule == check.RuleTierBudget && p.during(v.started, v.finished) {
			excused = append(excused, v)
		} else {
			real = append(real, v)
		}
	}
	return real, excused
}
