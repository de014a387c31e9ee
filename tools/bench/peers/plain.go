package peers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/fault"
)

// The states of a run's slot: the module's goroutine and the tier race for it at the deadline.
const (
	slotRunning int32 = iota
	slotDone
	slotAbandoned
)

// DefaultTTL is the last-known-good TTL of every peer.
const DefaultTTL = 5 * time.Second

// mutexBreaker is a tick-granular circuit breaker guarded by a mutex.
type mutexBreaker struct {
	mu        sync.Mutex
	state     int // 0 closed, 1 open, 2 half-open
	fails     int
	succ      int
	probing   bool
	openedAt  time.Time
	threshold int
	successes int
	cooldown  time.Duration
}

var breakerStates = [...]string{"closed", "open", "half_open"}

// acquire admits a run: ok, and whether it is a half-open probe.
func (b *mutexBreaker) acquire(now time.Time) (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case 0:
		return true, false
	case 1:
		if now.Sub(b.openedAt) < b.cooldown {
			return false, false
		}
		b.state, b.succ = 2, 0
	}
	if b.probing {
		return false, false
	}
	b.probing = true
	return true, true
}

func (b *mutexBreaker) success() {
	b.mu.Lock()
	b.fails = 0
	if b.state == 2 {
		b.probing = false
		b.succ++
		if b.succ >= b.successes {
			b.state = 0
		}
	}
	b.mu.Unlock()
}

func (b *mutexBreaker) failure(now time.Time) {
	b.mu.Lock()
	b.fails++
	if b.state == 2 || b.fails >= b.threshold {
		b.state, b.openedAt, b.probing = 1, now, false
	}
	b.mu.Unlock()
}

func (b *mutexBreaker) release() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

func (b *mutexBreaker) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return breakerStates[b.state]
}

type lgEntry struct {
	v    any
	at   time.Time
	tick uint64
}

type plainMod struct {
	Module
	key     string
	running atomic.Bool
	br      mutexBreaker
}

// plainRun is one module's run in one tick.
type plainRun struct {
	state     atomic.Int32
	status    string // set for modules not started (busy, open)
	probe     bool
	v         any
	err       error
	attempts  int
	start     time.Time
	end       time.Time
	exhausted bool
}

// Plain is peer A: a goroutine per module per tick, a WaitGroup and a context.WithTimeout
// per tier, a mutex breaker per module, a map for last-known-good.
type Plain struct {
	tickState
	byTier [][]*plainMod
}

// Summary is the summary of a tick of peer A or B.
type Summary struct {
	TickID       uint64
	Started      time.Time
	Finished     time.Time
	Tiers        []TierLine
	Lines        []Line
	DegradedKeys []string
	RetryCounts  map[string]int
}

// NewPlain returns peer A for spec.
func NewPlain(spec Spec) *Plain {
	p := &Plain{tickState: newTickState(spec)}
	p.byTier = make([][]*plainMod, len(spec.Tiers))
	for _, m := range spec.Modules {
		t := &spec.Tiers[m.Tier]
		pm := &plainMod{Module: m, key: keyOf(m.Name),
			br: mutexBreaker{threshold: max(t.FailureThreshold, 1), successes: max(t.HalfOpenSuccesses, 1), cooldown: t.Cooldown}}
		p.byTier[m.Tier] = append(p.byTier[m.Tier], pm)
	}
	return p
}

// Tick runs one tick.
func (p *Plain) Tick(ctx context.Context) error {
	p.tick(func(ti int, s *Summary) { p.runTier(ctx, ti, s) })
	return nil
}

func (p *Plain) runTier(ctx context.Context, ti int, s *Summary) {
	t := &p.tiers[ti]
	mods := p.byTier[ti]
	tStart := time.Now()
	tctx, cancel := context.WithTimeout(ctx, t.Budget)
	deadline, _ := tctx.Deadline()
	res := make([]plainRun, len(mods))
	var wg sync.WaitGroup
	for j, m := range mods {
		r := &res[j]
		if m.running.Load() {
			r.status = StatusBusy
			r.state.Store(slotDone)
			continue
		}
		ok, probe := m.br.acquire(tStart)
		if !ok {
			r.status = StatusOpen
			r.state.Store(slotDone)
			continue
		}
		r.probe = probe
		m.running.Store(true)
		wg.Add(1)
		go runPlain(tctx, deadline, t, m, r, &wg)
	}
	waitTier(tctx, &wg)
	cancel()
	tEnd := time.Now()
	tl := tierLine(s, ti, t, tStart, tEnd)

	p.lgMu.Lock()
	defer p.lgMu.Unlock()
	for j, m := range mods {
		r := &res[j]
		ln := Line{Name: m.Name, Tier: ti}
		switch {
		case r.state.CompareAndSwap(slotRunning, slotAbandoned) || (r.status == "" && r.end.After(deadline)):
			// Still running at the deadline, or returned after it (the tier's goroutine was
			// late): the result is late and discarded.
			ln.Status, ln.Kind, ln.Err = StatusTimedOut, "transient", "abandoned at the tier deadline"
			ln.Latency = tEnd.Sub(tStart)
			m.br.failure(tEnd)
			tl.BudgetExhausted = true
			p.fallbackLocked(s, &ln, m.key, tEnd)
		case r.status == StatusBusy:
			ln.Status, ln.Kind, ln.Err = StatusBusy, "transient", "still running from an earlier tick"
			m.br.failure(tEnd)
			p.fallbackLocked(s, &ln, m.key, tEnd)
		case r.status == StatusOpen:
			ln.Status = StatusOpen
			p.fallbackLocked(s, &ln, m.key, tEnd)
		default:
			ln.Attempts, ln.Latency = r.attempts, r.end.Sub(r.start)
			if r.exhausted {
				tl.BudgetExhausted = true
			}
			if r.attempts > 1 {
				if s.RetryCounts == nil {
					s.RetryCounts = make(map[string]int)
				}
				s.RetryCounts[m.Name] = r.attempts - 1
			}
			if r.err == nil {
				ln.Status = StatusOK
				if r.attempts > 1 {
					ln.Status = StatusRetried
				}
				m.br.success()
				p.lastGood[m.key] = lgEntry{v: r.v, at: r.end, tick: s.TickID}
				ln.Source = SourceLive
				break
			}
			k := classify(r.err)
			ln.Status, ln.Kind, ln.Err = StatusFailed, k.String(), r.err.Error()
			if k == fault.KindCanceled {
				m.br.release()
			} else {
				m.br.failure(tEnd)
			}
			p.fallbackLocked(s, &ln, m.key, tEnd)
		}
		ln.Circuit = m.br.String()
		addLine(s, tl, ln)
	}
}

// runPlain runs m under the tier's retry budget on its own goroutine.
func runPlain(ctx context.Context, deadline time.Time, t *TierSpec, m *plainMod, r *plainRun, wg *sync.WaitGroup) {
	defer wg.Done()
	defer m.running.Store(false)
	r.start = time.Now()
	defer func() {
		if p := recover(); p != nil {
			r.err = fault.Internal(fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
			r.end = time.Now()
			r.state.CompareAndSwap(slotRunning, slotDone)
		}
	}()
	for n := 1; ; n++ {
		r.attempts = n
		v, err := m.Fn(ctx)
		if err == nil {
			r.v, r.err = v, nil
			break
		}
		r.err = err
		if classify(err) != fault.KindTransient || n >= max(t.MaxAttempts, 1) {
			break
		}
		if ctx.Err() != nil {
			r.exhausted = true
			break
		}
		d := t.Delay(n, rand.Float64())
		if d >= time.Until(deadline) {
			r.exhausted = true
			break
		}
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			r.exhausted = true
		}
		if r.exhausted {
			break
		}
	}
	r.end = time.Now()
	r.state.CompareAndSwap(slotRunning, slotDone)
}
