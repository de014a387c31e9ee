package advise

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/sim"
)

// bounds are the upper bounds of the buckets of observed latencies.
var bounds = []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 7 * time.Millisecond, 10 * time.Millisecond,
	15 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond, 70 * time.Millisecond,
	100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond,
	500 * time.Millisecond, 700 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}

// Observed gathers what modules did in recorded ticks: the latency of their successful
// first attempts (an empirical histogram) and the share of their attempts that failed,
// with the commonest fault kind. Scenario turns it into a scenario that replays it.
type Observed struct {
	Ticks int
	mods  map[string]*observed
	order []string
}

type observed struct {
	lat             []float64 // weights per bound
	attempts, fails int
	kinds           map[string]int
}

// NewObserved returns an empty Observed.
func NewObserved() *Observed { return &Observed{mods: map[string]*observed{}} }

// Add takes one summary's module lines.
func (ob *Observed) Add(s *faultsummary.Summary) {
	ob.Ticks++
	var m faultsummary.Module
	for i, n := 0, s.NumModules(); i < n; i++ {
		s.ModuleInto(i, &m)
		o := ob.mods[m.Name]
		if o == nil {
			o = &observed{lat: make([]float64, len(bounds)+1), kinds: map[string]int{}}
			ob.mods[m.Name] = o
			ob.order = append(ob.order, m.Name)
		}
		o.attempts += m.Attempts
		switch m.Status {
		case faultsummary.StatusOK, faultsummary.StatusProbeOK, faultsummary.StatusTimedOut:
			// A run abandoned at its deadline took longer than its latency shows; its bucket
			// (drawn up to its upper bound) is as far as the observation goes.
			o.lat[bucketOf(m.LatencyMs)]++
		case faultsummary.StatusRetried:
			o.fails += m.Attempts - 1
		case faultsummary.StatusFailed, faultsummary.StatusProbeFailed:
			o.fails += m.Attempts
		}
		if m.FaultKind != "" {
			o.kinds[m.FaultKind]++
		}
	}
}

func bucketOf(ms float64) int {
	d := time.Duration(ms * float64(time.Millisecond))
	i, _ := slices.BinarySearch(bounds, d)
	return i
}

// Scenario returns a scenario in which every module is a stand-in with the latency and
// failures observed (Replace set).
func (ob *Observed) Scenario(name string) *sim.Scenario {
	sc := &sim.Scenario{Name: name, Replace: true}
	for _, n := range ob.order {
		o := ob.mods[n]
		ev := sim.Event{Tick: 1, Module: n}
		ev.Latency = o.dist()
		if o.attempts > 0 && o.fails > 0 {
			rate := float64(o.fails) / float64(o.attempts)
			ev.FailRate = &rate
			k := commonest(o.kinds)
			ev.FailKind = &k
		}
		sc.Events = append(sc.Events, ev)
	}
	return sc
}

func (o *observed) dist() *sim.Dist {
	var bs []sim.Bucket
	for i, w := range o.lat {
		if w == 0 {
			continue
		}
		le := 2 * bounds[len(bounds)-1]
		if i < len(bounds) {
			le = bounds[i]
		}
		bs = append(bs, sim.Bucket{LE: le, Weight: w})
	}
	if len(bs) == 0 {
		zero := time.Duration(0)
		return &sim.Dist{Fixed: &zero}
	}
	return &sim.Dist{Empirical: bs}
}

func commonest(kinds map[string]int) fault.Kind {
	best, n := "transient", 0
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		if kinds[k] > n {
			best, n = k, kinds[k]
		}
	}
	k, err := fault.ParseKind(best)
	if err != nil || k == fault.KindNone {
		return fault.KindTransient
	}
	return k
}

// FromRecorder reads every tick recorded in the state directory dir.
func FromRecorder(ctx context.Context, dir string) (*Observed, error) {
	rd, err := sqlite.OpenReader(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	ob := NewObserved()
	var after uint64
	for {
		ticks, err := rd.Ticks(ctx, recorder.Query{After: after, Limit: 1000, Ascending: true})
		if err != nil {
			return nil, err
		}
		for _, t := range ticks {
			var s faultsummary.Summary
			if err := json.Unmarshal(t.JSON, &s); err != nil {
				return nil, fmt.Errorf("advise: tick %d: %w", t.ID, err)
			}
			ob.Add(&s)
			after = t.ID
		}
		if len(ticks) < 1000 {
			return ob, nil
		}
	}
}
