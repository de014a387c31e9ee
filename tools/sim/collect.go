package sim

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/faultsummary"
)

// collector aggregates the published summaries and events of a run into a Report. Its
// methods are called from the engine's goroutines (OnTick on the tick's, OnBreaker on
// whichever moved a breaker).
type collector struct {
	mu       sync.Mutex
	start    time.Time
	last     time.Time // the end of the last tick
	ticks    int
	wall     []float64 // wall_ms per tick (virtual)
	overruns int
	skipped  int
	severity map[string]int
	finish   map[string]int
	tiers    []*tierAcc
	tierIdx  map[string]int
	mods     []*modAcc
	modIdx   map[string]int
	keys     map[string]*keyAcc
	brk      map[string]*breakerAcc
	episodes []EmergencyEpisode
	line     faultsummary.Module
}

type tierAcc struct {
	name        string
	budgetMs    float64
	use         []float64 // elapsed ÷ budget per tick the tier ran
	elapsed     []float64
	skipped     int
	retries     int
	exhaustions int
	statuses    map[string]int
}

type modAcc struct {
	name, tier string
	statuses   map[string]int
	attempts   int
	retries    int
	lat        hist
	kinds      map[string]int
}

type keyAcc struct {
	stale, expired, none int
	streak, longest      int // consecutive ticks not served live (stale or none)
	longestDur           time.Duration
	streakStart          time.Time
}

type breakerAcc struct {
	openings int
	openAt   time.Time // zero when not open
	open     time.Duration
	longest  time.Duration
}

func newCollector(start time.Time) *collector {
	return &collector{start: start, last: start, severity: map[string]int{}, finish: map[string]int{},
		tierIdx: map[string]int{}, modIdx: map[string]int{}, keys: map[string]*keyAcc{}, brk: map[string]*breakerAcc{}}
}

func (c *collector) tier(name string) *tierAcc {
	i, ok := c.tierIdx[name]
	if !ok {
		i = len(c.tiers)
		c.tierIdx[name] = i
		c.tiers = append(c.tiers, &tierAcc{name: name, statuses: map[string]int{}})
	}
	return c.tiers[i]
}

func (c *collector) mod(name, tier string) *modAcc {
	i, ok := c.modIdx[name]
	if !ok {
		i = len(c.mods)
		c.modIdx[name] = i
		c.mods = append(c.mods, &modAcc{name: name, tier: tier, statuses: map[string]int{}, kinds: map[string]int{}})
	}
	return c.mods[i]
}

// add aggregates one summary.
func (c *collector) add(s *faultsummary.Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks++
	c.last = s.FinishedAt
	c.wall = append(c.wall, s.WallMs)
	if s.Overrun {
		c.overruns++
	}
	c.skipped += s.SkippedGridPoints
	c.severity[string(s.OverallSeverity)]++
	c.finish[string(s.Finish)]++
	for _, t := range s.Tiers {
		ta := c.tier(t.Name)
		ta.budgetMs = t.BudgetMs
		ta.statuses[string(t.Status)]++
		if t.Status == faultsummary.TierSkipped {
			ta.skipped++
			continue
		}
		ta.elapsed = append(ta.elapsed, t.ElapsedMs)
		if t.BudgetMs > 0 {
			ta.use = append(ta.use, t.ElapsedMs/t.BudgetMs)
		}
		if t.BudgetExhausted {
			ta.exhaustions++
		}
	}
	for i, n := 0, s.NumModules(); i < n; i++ {
		s.ModuleInto(i, &c.line)
		c.addLine(s, &c.line)
	}
	c.emergencyTick(s)
}

func (c *collector) addLine(s *faultsummary.Summary, m *faultsummary.Module) {
	ma := c.mod(m.Name, m.Tier)
	ma.statuses[string(m.Status)]++
	ma.attempts += m.Attempts
	if m.Attempts > 1 {
		ma.retries += m.Attempts - 1
		c.tier(m.Tier).retries += m.Attempts - 1
	}
	if m.Status.Ran() {
		ma.lat.add(m.LatencyMs)
	}
	if m.FaultKind != "" {
		ma.kinds[m.FaultKind]++
	}
	key := m.Served.Key
	if key == "" || m.Status == faultsummary.StatusNotDue || m.Status == faultsummary.StatusSkipped && !m.Served.Stale {
		return
	}
	k := c.keys[key]
	if k == nil {
		k = &keyAcc{}
		c.keys[key] = k
	}
	k.served(s, m)
}

func (k *keyAcc) served(s *faultsummary.Summary, m *faultsummary.Module) {
	live := m.Served.Source == blackboard.Live
	switch {
	case m.Served.Stale:
		k.stale++
	case m.Served.Expired:
		k.expired++
	case !live:
		k.none++
	}
	if live {
		k.streak = 0
		return
	}
	if k.streak == 0 {
		k.streakStart = s.StartedAt
	}
	k.streak++
	k.longest = max(k.longest, k.streak)
	k.longestDur = max(k.longestDur, s.FinishedAt.Sub(k.streakStart))
}

// emergencyTick follows emergency episodes tick by tick.
func (c *collector) emergencyTick(s *faultsummary.Summary) {
	n := len(c.episodes)
	open := n > 0 && c.episodes[n-1].EndTick == 0
	switch {
	case s.EmergencyMode && !open:
		c.episodes = append(c.episodes, EmergencyEpisode{StartTick: s.TickID, Reason: s.Emergency.Reason, Ticks: 1})
	case s.EmergencyMode:
		c.episodes[n-1].Ticks++
	case open:
		c.episodes[n-1].EndTick = s.TickID
	}
}

// breaker follows a breaker's openings and the time it stays open (until half-open or
// closed).
func (c *collector) breaker(t breaker.Transition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.brk[t.Name]
	if b == nil {
		b = &breakerAcc{}
		c.brk[t.Name] = b
	}
	if t.To == breaker.Open {
		if t.From != breaker.Open {
			b.openings++
		}
		if b.openAt.IsZero() {
			b.openAt = t.At
		}
		return
	}
	if !b.openAt.IsZero() {
		d := t.At.Sub(b.openAt)
		b.open += d
		b.longest = max(b.longest, d)
		b.openAt = time.Time{}
	}
}

// hist is a histogram of latencies in milliseconds with buckets 2% wide from 1µs: the
// report's quantiles are exact to 2%, and a run of any length keeps a fixed size.
type hist struct {
	n      int
	max    float64
	counts []uint32
}

const histBase = 0.001

var histLog = math.Log(1.02)

func (h *hist) add(ms float64) {
	h.n++
	h.max = max(h.max, ms)
	i := 0
	if ms > histBase {
		i = int(math.Log(ms/histBase)/histLog) + 1
	}
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint32, i+1-len(h.counts))...)
	}
	h.counts[i]++
}

// quantile returns the upper bound of the bucket holding quantile q (the max for the top).
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(h.n)))
	seen := 0
	for i, c := range h.counts {
		seen += int(c)
		if seen >= max(rank, 1) {
			if i == 0 {
				return min(histBase, h.max)
			}
			return min(histBase*math.Pow(1.02, float64(i)), h.max)
		}
	}
	return h.max
}

// quantile returns quantile q of vs (nearest rank), sorting vs.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	if !slices.IsSorted(vs) {
		slices.Sort(vs)
	}
	i := int(math.Ceil(q*float64(len(vs)))) - 1
	return vs[min(max(i, 0), len(vs)-1)]
}
