package cycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// FuzzEngine drives the tick engine with a fault schedule decoded from the input and
// checks every summary with the invariant checker (faultsummary/check). It runs in step
// mode on the virtual clock of testing/synctest: fuzzTicks ticks with some virtual time
// between them, each module behaving per (tick, attempt) as the schedule says: ok,
// transient, permanent, validation, downstream or control errors, panics, latency within
// or beyond the budget (honouring its context), or a hang that ignores its context for a
// bounded time. Besides the checker's rules, every module counts its concurrent runs:
// more than one outstanding run of a module is a failure (the one invariant the summaries
// cannot show). The engine is closed and its workers (hung modules included) waited for
// before the bubble ends, so nothing leaks.
//
// Input layout (missing bytes read as zero; see decodeSchedule):
//
//	[0] flags: bit 0 latch, bits 1–2 recover_after−1, bit 3 skip_tiers = [knowledge] only,
//	    bit 4 jitter on, bit 5 a retry budget on the knowledge tier and a bulkhead wait,
//	    bit 6 the shared breaker is a rate breaker
//	[1] modules: bit 0 → 1–2 safety modules, bits 1–2 → 0–3 knowledge, bits 3–4 → 0–3 planning
//	[2] emergency reset before tick (b % 32, 0 = none); bit 5 load shedding (target 30ms),
//	    bit 6 startup (timeout 1s), bit 7 an asynchronous module bg (behaving as the first
//	    module, timeout 60ms); [3] breaker reset before tick (b % 32, 0 = none); [4] which breaker
//	then 2 bytes per module (spec: bit 7 of each is a bit of its priority, 3 meaning
//	critical; in the second, bit 4 names the bulkhead, bit 5 sets on_reject fail, bit 6
//	names the downstream retry budget), then per tick: 1 gap byte and 1 behaviour byte per module.
//
// To explore past a known engine bug, CYCLED_FUZZ_IGNORE=rule,rule lists rules whose
// violations are logged instead of failing (never set it in CI); CYCLED_FUZZ_TRACE=1 logs
// every summary (with -v and -run FuzzEngine/<seed>).
func FuzzEngine(f *testing.F) {
	f.Add([]byte{})
	// Load shedding, startup and an asynchronous module, with slow, hanging and
	// failing modules of several priorities.
	f.Add([]byte{0xE0, 0x1F, 0, 0, 0, 0, 0x10, 0, 0x20, 0, 0x30, 0, 0x40, 0, 0x10, 0, 0x20, 0, 0x50,
		5, 0, 0x8C, 0xDD, 0xE, 0x1C, 0x8C, 0x8C, 2, 0x8C, 0x5E, 0xD, 0xFC, 0xFC, 0xFC, 3, 0, 0x8C, 0x8C, 0x8C,
		0xFC, 0xFC, 0xFC, 0xFC, 4, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0x8C, 0x8C, 0x8C})
	f.Fuzz(func(t *testing.T, data []byte) {
		sch := decodeSchedule(data)
		synctest.Test(t, func(t *testing.T) { runSchedule(t, sch) })
	})
}

const fuzzTicks = 30

// Behaviours, selected by the low 4 bits of a behaviour byte (0–4 are ok).
const (
	bTransient     = 5  // transient error on every attempt
	bFirstAttempt  = 6  // transient error on the first attempt, then ok (arg ≥ 8: then hangs)
	bPermanent     = 7  // contract error
	bValidation    = 8  // validation error
	bDownstream    = 9  // downstream error
	bPanic         = 10 // panics
	bControl       = 11 // control "error": nothing to do
	bLatency       = 12 // sleeps a fraction of the budget, honouring ctx, then ok
	bBeyondBudget  = 13 // waits past the budget, honouring ctx
	bHang          = 14 // ignores ctx for 1–8 budgets, then returns ok
	bSlowTransient = 15 // sleeps a third of the budget, then a transient error
)

type modPlan struct {
	name      string
	tier      int
	policy    tiers.Policy
	every     int
	emergency bool
	shared    bool
	onOpen    tiers.OnOpen
	ttl       lastgood.TTL
	attempts  int
	// The bulkhead, its on_reject, and the downstream retry budget.
	bulkhead, rejectFail, budget bool
	priority                     int
	critical                     bool
}

type schedule struct {
	latch        bool
	recoverAfter int
	skipOnlyK    bool
	jitter       bool
	resil        bool // a tier retry budget and a bulkhead wait
	rateBreaker  bool // the shared breaker is a rate breaker
	shedding     bool
	startup      bool
	async        bool
	emReset      int
	brReset      int
	brResetWhich int
	mods         []modPlan
	gaps         [fuzzTicks]time.Duration
	beh          [fuzzTicks][]byte
}

type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	v := r.b[r.i]
	r.i++
	return v
}

var fuzzGaps = [8]time.Duration{0, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 300 * time.Millisecond, time.Second, 3 * time.Second}

var fuzzTTLs = [4]lastgood.TTL{{}, {Fixed: 250 * time.Millisecond}, {Auto: true}, {Fixed: time.Second}}

func decodeSchedule(data []byte) schedule {
	r := &byteReader{b: data}
	var s schedule
	fl := r.next()
	s.latch = fl&1 != 0
	s.recoverAfter = int(fl>>1&3) + 1
	s.skipOnlyK = fl&8 != 0
	s.jitter = fl&16 != 0
	s.resil, s.rateBreaker = fl&32 != 0, fl&64 != 0
	n := r.next()
	counts := [3]int{1 + int(n&1), int(n >> 1 & 3), int(n >> 3 & 3)}
	em := r.next()
	s.emReset = int(em % 32)
	s.shedding, s.startup, s.async = em&32 != 0, em&64 != 0, em&128 != 0
	s.brReset = int(r.next() % 32)
	s.brResetWhich = int(r.next())
	for ti, c := range counts {
		for j := range c {
			a, b := r.next(), r.next()
			m := modPlan{name: fmt.Sprintf("m%d%d", ti, j), tier: ti, policy: tiers.Policy(a & 3),
				every: [4]int{1, 1, 2, 3}[a>>2&3], emergency: a&16 != 0, shared: a&32 != 0 && ti > 0,
				ttl: fuzzTTLs[b&3], attempts: int(b >> 2 & 3), priority: int(a>>7)<<1 | int(b>>7)}
			m.critical = m.priority == 3
			if a&64 != 0 {
				m.onOpen = tiers.Fail
			}
			m.bulkhead, m.rejectFail, m.budget = b&16 != 0, b&32 != 0, b&64 != 0
			s.mods = append(s.mods, m)
		}
	}
	for k := range fuzzTicks {
		s.gaps[k] = fuzzGaps[r.next()&7]
		s.beh[k] = make([]byte, len(s.mods))
		for j := range s.mods {
			s.beh[k][j] = r.next()
		}
	}
	return s
}

func fuzzTiers() []tiers.Tier {
	bo := retrybudget.Backoff{Base: 5 * time.Millisecond, Factor: 2, Max: 20 * time.Millisecond, Jitter: 0.2}
	return []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 2, Cooldown: 400 * time.Millisecond, HalfOpenSuccesses: 1}},
		{Name: "knowledge", Budget: 200 * time.Millisecond, MaxAttempts: 3, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 3, Cooldown: 600 * time.Millisecond, HalfOpenSuccesses: 2}},
		{Name: "planning", Budget: 100 * time.Millisecond, MaxAttempts: 2, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 2, Cooldown: 300 * time.Millisecond, HalfOpenProbes: 2, HalfOpenSuccesses: 1}},
	}
}

var errFuzz = errors.New("injected")

// fuzzModule behaves as the schedule says for the tick and attempt in progress.
type fuzzModule struct {
	sch     *schedule
	idx     int
	budget  time.Duration
	running atomic.Int32
	overlap *atomic.Int32
}

func (m *fuzzModule) Run(ctx context.Context, in *tiers.Input) (any, error) {
	if m.running.Add(1) > 1 {
		m.overlap.Add(1)
	}
	defer m.running.Add(-1)
	k := int(in.TickID()) - 1
	if k < 0 || k >= fuzzTicks {
		return in.TickID(), nil
	}
	b := m.sch.beh[k][m.idx]
	arg := time.Duration(b >> 4)
	switch b & 15 {
	case bTransient:
		return nil, fault.Transient(errFuzz)
	case bFirstAttempt:
		if in.Attempt() == 1 {
			return nil, fault.Transient(errFuzz)
		}
		if arg&8 != 0 { // the retry hangs, ignoring ctx
			time.Sleep(m.budget * (1 + arg&7))
		}
	case bPermanent:
		return nil, fault.Permanent(errFuzz)
	case bValidation:
		return nil, fault.Validation(errFuzz)
	case bDownstream:
		return nil, fault.Downstream(errFuzz)
	case bPanic:
		panic("injected panic")
	case bControl:
		return nil, fault.Control(errFuzz)
	case bLatency:
		if err := sleepCtx(ctx, m.budget*arg/32); err != nil {
			return nil, err
		}
	case bBeyondBudget:
		if err := sleepCtx(ctx, 2*m.budget); err != nil {
			return nil, err
		}
	case bHang:
		time.Sleep(m.budget * (1 + arg&7))
	case bSlowTransient:
		if err := sleepCtx(ctx, m.budget/3); err != nil {
			return nil, err
		}
		return nil, fault.Transient(errFuzz)
	}
	return in.TickID(), nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ignoredRules() map[string]bool {
	out := map[string]bool{}
	for _, r := range strings.Split(os.Getenv("CYCLED_FUZZ_IGNORE"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			out[r] = true
		}
	}
	return out
}

func runSchedule(t *testing.T, sch schedule) {
	ts := fuzzTiers()
	cfg := cycle.Config{Tiers: ts, DefaultTTL: 2 * time.Second,
		Emergency: cycle.EmergencyConfig{Latch: sch.latch, RecoverAfter: sch.recoverAfter},
		Breakers: map[string]breaker.Settings{
			"ext": {FailureThreshold: 2, Cooldown: 500 * time.Millisecond, HalfOpenProbes: 2, HalfOpenSuccesses: 2},
		}}
	if sch.skipOnlyK {
		cfg.Emergency.SkipTiers = []string{"knowledge"}
	}
	fuzzResilience(&cfg, &sch)
	var overlap atomic.Int32
	regs := fuzzRegistrations(&sch, &cfg, &overlap)
	c, err := cycle.NewChecker(cfg, regs)
	if err != nil {
		t.Fatalf("schedule gives an invalid configuration: %v", err)
	}
	seed := uint64(0x9E3779B97F4A7C15)
	rnd := func() float64 {
		if !sch.jitter {
			return 0.5
		}
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return float64(seed>>11) / (1 << 53)
	}
	e, err := cycle.New(cfg, regs, cycle.WithRand(rnd))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer func() {
		_ = e.Close()
		if err := e.WaitWorkers(context.Background()); err != nil {
			t.Errorf("WaitWorkers: %v", err)
		}
	}()
	ignore := ignoredRules()
	trace := os.Getenv("CYCLED_FUZZ_TRACE") != ""
	failed := 0
	var last uint64
	for k := range fuzzTicks {
		time.Sleep(sch.gaps[k])
		if sch.emReset == k+1 {
			e.ResetEmergency()
			c.ResetEmergency(last)
		}
		if sch.brReset == k+1 && len(sch.mods) > 0 {
			name := sch.mods[sch.brResetWhich%len(sch.mods)].name
			if sch.mods[sch.brResetWhich%len(sch.mods)].shared {
				name = "ext"
			}
			if err := e.ResetBreaker(name); err != nil {
				t.Fatalf("ResetBreaker(%q): %v", name, err)
			}
			c.ResetBreaker(name, last)
		}
		s, err := e.Tick(context.Background())
		if err != nil {
			t.Fatalf("Tick: %v", err)
		}
		last = s.TickID
		if trace {
			t.Logf("%s", brief(s))
		}
		for _, v := range c.Check(s) {
			if ignore[v.Rule] {
				t.Logf("ignored: %v", v)
				continue
			}
			if failed == 0 {
				t.Logf("schedule: %s", describe(&sch))
			}
			failed++
			t.Errorf("%v\n%s", v, brief(s))
		}
	}
	if n := overlap.Load(); n > 0 {
		t.Errorf("%d run(s) started while the same module had a run outstanding", n)
	}
}

func describe(sch *schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "latch %v recover_after %d skip_only_knowledge %v jitter %v em_reset %d br_reset %d/%d resil %v rate %v shedding %v startup %v async %v\n",
		sch.latch, sch.recoverAfter, sch.skipOnlyK, sch.jitter, sch.emReset, sch.brReset, sch.brResetWhich, sch.resil, sch.rateBreaker,
		sch.shedding, sch.startup, sch.async)
	for _, m := range sch.mods {
		fmt.Fprintf(&b, "  %s tier %d policy %q every %d emergency %v shared %v on_open %s ttl %+v attempts %d bulkhead %v reject_fail %v budget %v priority %d critical %v\n",
			m.name, m.tier, m.policy, m.every, m.emergency, m.shared, m.onOpen, m.ttl, m.attempts, m.bulkhead, m.rejectFail, m.budget,
			m.priority, m.critical)
	}
	for k := range fuzzTicks {
		fmt.Fprintf(&b, "  tick %2d gap %-6s", k+1, sch.gaps[k])
		for _, x := range sch.beh[k] {
			fmt.Fprintf(&b, " %2d/%-2d", x&15, x>>4)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// brief renders the parts of a summary the rules look at, one line per module.
func brief(s *faultsummary.Summary) string {
	var b strings.Builder
	em, _ := json.Marshal(s.Emergency)
	fmt.Fprintf(&b, "  tick %d %s %s emergency %s started %s wall %vms retry %v open %v half %v degraded %q budget %v retry_budget_exhausted %v state %q shed %+v async %+v\n",
		s.TickID, s.Finish, s.OverallSeverity, em, s.StartedAt.Format("15:04:05.000000"), s.WallMs, s.RetryCounts,
		s.OpenCircuits, s.HalfOpenCircuits, s.DegradedKeys, s.BudgetViolations, s.RetryBudgetExhausted, s.CycleState, s.Shed, s.Async)
	for _, t := range s.Tiers {
		fmt.Fprintf(&b, "  tier %s %s %vms exhausted %v\n", t.Name, t.Status, t.ElapsedMs, t.BudgetExhausted)
	}
	for _, m := range s.Modules() {
		fmt.Fprintf(&b, "    %s %s att %d lat %vms kind %q br %s=%s served %s stale %v exp %v age %vms\n",
			m.Name, m.Status, m.Attempts, m.LatencyMs, m.FaultKind, m.Breaker, m.CircuitState,
			m.Served.Source, m.Served.Stale, m.Served.Expired, m.Served.AgeMs)
	}
	return b.String()
}

// fuzzResilience adds the bulkhead "db" (one permit), the downstream retry budget "llm"
// (a time window), and with the schedule's flags a retry budget on the knowledge tier, a
// bulkhead wait, and a rate kind for the shared breaker.
func fuzzResilience(cfg *cycle.Config, sch *schedule) {
	cfg.Bulkheads = map[string]bulkhead.Settings{"db": {MaxInFlight: 1}}
	cfg.RetryBudgets.Downstreams = map[string]retrybudget.RatioSettings{
		"llm": {Ratio: 0.2, WindowTime: 500 * time.Millisecond, MinPerTick: 1}}
	if sch.resil {
		cfg.Bulkheads["db"] = bulkhead.Settings{MaxInFlight: 1, Wait: 20 * time.Millisecond}
		cfg.RetryBudgets.Tiers = map[string]retrybudget.RatioSettings{"knowledge": {Ratio: 0.5, Window: 3}}
	}
	if sch.rateBreaker {
		cfg.Breakers["ext"] = breaker.Settings{Kind: breaker.Rate, Window: 4, MinTicks: 2, FailureRate: 0.5,
			Cooldown: 500 * time.Millisecond, HalfOpenProbes: 2, HalfOpenSuccesses: 2}
	}
}

// fuzzRegistrations returns the schedule's modules, and sets the load shedding and
// startup configuration it asks for.
func fuzzRegistrations(sch *schedule, cfg *cycle.Config, overlap *atomic.Int32) []cycle.Registration {
	ts := cfg.Tiers
	if sch.shedding {
		cfg.Shedding = &cycle.SheddingConfig{AfterOverruns: 2, RestoreAfter: 2, Target: 30 * time.Millisecond}
	}
	if sch.startup {
		cfg.Startup = &cycle.StartupConfig{Timeout: time.Second}
	}
	var regs []cycle.Registration
	for i, mp := range sch.mods {
		spec := tiers.ModuleSpec{Name: mp.name, Tier: ts[mp.tier].Name, Policy: mp.policy, Every: mp.every,
			Emergency: mp.emergency, OnOpen: mp.onOpen, TTL: mp.ttl, MaxAttempts: mp.attempts,
			Priority: mp.priority, Critical: mp.critical}
		if mp.shared {
			spec.Breaker = "ext"
		}
		fuzzResilienceSpec(&spec, mp)
		regs = append(regs, cycle.Registration{Spec: spec,
			Module: &fuzzModule{sch: sch, idx: i, budget: ts[mp.tier].Budget, overlap: overlap}})
	}
	if sch.async {
		// First, so that every module of its tier and after it follows an asynchronous module
		// in the plan (which has no summary line: the checker's entries must not shift).
		bg := cycle.Registration{Spec: tiers.ModuleSpec{Name: "bg", Tier: ts[1].Name, Async: true,
			Timeout: 60 * time.Millisecond}, Module: &fuzzModule{sch: sch, idx: 0, budget: ts[0].Budget, overlap: overlap}}
		regs = append([]cycle.Registration{bg}, regs...)
	}
	return regs
}

// fuzzResilienceSpec names the bulkhead, its on_reject and the downstream retry budget the
// module plan asks for.
func fuzzResilienceSpec(spec *tiers.ModuleSpec, mp modPlan) {
	if mp.bulkhead {
		spec.Bulkhead = "db"
	}
	if mp.rejectFail {
		spec.OnReject = tiers.Fail
	}
	if mp.budget {
		spec.RetryBudget = "llm"
	}
}
