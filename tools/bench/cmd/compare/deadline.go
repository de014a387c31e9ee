package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cycled/cycled/tools/bench/peers"
	"github.com/cycled/cycled/tools/bench/stats"
)

// The deadline-adherence workload: a safety tier with one trivial module, then a tier of
// 50 modules with a 50 ms budget: 48 trivial, one blocking 500 ms ignoring its context, one
// blocking 500 ms honouring it. Breakers never open, so the hung module runs whenever it is
// not busy. Ticks run with a gap of deadlineGap between them, as a scheduler leaves the rest
// of a period (back to back, a module that honours its context could be caught still
// returning, i.e. busy).
const (
	deadlineBudget = 50 * time.Millisecond
	deadlineBlock  = 500 * time.Millisecond
	deadlineGap    = 5 * time.Millisecond
)

func deadlineSpec(conc *peers.Concurrency) peers.Spec {
	work := peers.TierSpec{Name: "work", Budget: deadlineBudget, MaxAttempts: 2, BackoffBase: 10 * time.Millisecond,
		BackoffFactor: 2, BackoffMax: 100 * time.Millisecond, BackoffJitter: 0.2, FailureThreshold: 1 << 30,
		Cooldown: time.Second, HalfOpenSuccesses: 1}
	safety := work
	safety.Name, safety.MaxAttempts = "safety", 1
	mods := []peers.Module{{Name: "guard", Tier: 0, Fn: peers.Trivial}}
	for i := range 48 {
		mods = append(mods, peers.Module{Name: fmt.Sprintf("w%d", i), Tier: 1, Fn: peers.Trivial})
	}
	mods = append(mods,
		peers.Module{Name: "hung", Tier: 1, Fn: peers.Hung(deadlineBlock, conc)},
		peers.Module{Name: "honour", Tier: 1, Fn: peers.Honour(deadlineBlock)})
	return peers.Spec{Tiers: []peers.TierSpec{safety, work}, Modules: mods}
}

// deadlineSample is one contender's deadline adherence in one repetition.
type deadlineSample struct {
	Contender  string  `json:"contender"`
	Rep        int     `json:"rep"`
	Ticks      int     `json:"ticks"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	Wrong      int     `json:"wrong_ticks"`
	WrongWhat  string  `json:"wrong_what,omitempty"`
	HungMax    int64   `json:"hung_max_concurrent"`
	HungStatus string  `json:"hung_statuses"`
}

// tickVerdict checks one tick's statuses: every trivial module ok, the honouring module
// failed or timed out, the hung one timed out or busy, the tier degraded with its budget
// exhausted. It returns "" when all is right.
func tickVerdict(v peers.View) string {
	st := map[string]string{}
	for _, ln := range v.Lines {
		st[ln.Name] = ln.Status
	}
	return verdict(st, v.Tiers[1].Status, v.Tiers[1].BudgetExhausted)
}

func verdict(st map[string]string, tierStatus string, exhausted bool) string {
	for name, s := range st {
		switch name {
		case "hung":
			if s != peers.StatusTimedOut && s != peers.StatusBusy {
				return "hung module " + s
			}
		case "honour":
			if s != peers.StatusFailed && s != peers.StatusTimedOut {
				return "honouring module " + s
			}
		default:
			if s != peers.StatusOK {
				return name + " " + s
			}
		}
	}
	if tierStatus != "degraded" || !exhausted {
		return fmt.Sprintf("tier %s, budget_exhausted=%v", tierStatus, exhausted)
	}
	return ""
}

func runDeadline(o *opts, py *pySketch) []deadlineSample {
	ticks, pyTicks := 200, 10
	if o.quick {
		ticks, pyTicks = 30, 3
	}
	var out []deadlineSample
	for rep := 1; rep <= o.reps; rep++ {
		names := []string{cEngineCoarse, cEnginePrecise, cPlain, cFailsafe, cPython}
		k := (rep - 1) % len(names)
		names = append(names[k:], names[:k]...)
		for _, name := range names {
			var s deadlineSample
			if name == cPython {
				if py == nil {
					continue
				}
				s = pythonDeadline(py, pyTicks)
			} else {
				s = goDeadline(name, ticks)
			}
			s.Contender, s.Rep = name, rep
			logf("deadline rep %d %-14s %3d ticks overshoot p50 %8.3f p99 %8.3f max %8.3f ms, wrong %d %s, hung max concurrent %d",
				rep, name, s.Ticks, s.P50Ms, s.P99Ms, s.MaxMs, s.Wrong, s.WrongWhat, s.HungMax)
			out = append(out, s)
		}
	}
	return out
}

func goDeadline(name string, ticks int) deadlineSample {
	var conc peers.Concurrency
	spec := deadlineSpec(&conc)
	c := newGoContender(name, spec)
	var over []float64
	s := deadlineSample{}
	statuses := map[string]int{}
	for range ticks {
		time.Sleep(deadlineGap)
		_ = c.Tick(context.Background())
		v := c.Last()
		over = append(over, float64((v.Tiers[1].Elapsed-deadlineBudget).Nanoseconds())/1e6)
		if w := tickVerdict(v); w != "" {
			s.Wrong++
			if s.WrongWhat == "" {
				s.WrongWhat = w
			}
		}
		for _, ln := range v.Lines {
			if ln.Name == "hung" {
				statuses[ln.Status]++
			}
		}
	}
	c.Close()
	sm := stats.Summarize(over)
	s.Ticks, s.P50Ms, s.P99Ms, s.MaxMs, s.HungMax = sm.N, sm.P50, sm.P99, sm.Max, conc.Max()
	s.HungStatus = fmt.Sprint(statuses)
	// Let the last hung run return before the next contender starts.
	time.Sleep(deadlineBlock)
	return s
}

func pythonDeadline(py *pySketch, ticks int) deadlineSample {
	var res struct {
		Ticks []struct {
			Overshoot  float64 `json:"overshoot_ms"`
			Hung       string  `json:"hung"`
			Honour     string  `json:"honour"`
			OthersOK   bool    `json:"others_ok"`
			TierStatus string  `json:"tier_status"`
			Exhausted  bool    `json:"budget_exhausted"`
		} `json:"ticks"`
		HungMax int64 `json:"hung_max_concurrent"`
	}
	if err := py.call(map[string]any{"cmd": "deadline", "ticks": ticks, "gap_ms": float64(deadlineGap) / 1e6}, &res); err != nil {
		fatalf("%v", err)
	}
	var over []float64
	s := deadlineSample{HungMax: res.HungMax}
	statuses := map[string]int{}
	for _, t := range res.Ticks {
		over = append(over, t.Overshoot)
		st := map[string]string{"hung": t.Hung, "honour": t.Honour}
		if !t.OthersOK {
			st["others"] = "not ok"
		}
		if w := verdict(st, t.TierStatus, t.Exhausted); w != "" {
			s.Wrong++
			if s.WrongWhat == "" {
				s.WrongWhat = w
			}
		}
		statuses[t.Hung]++
	}
	sm := stats.Summarize(over)
	s.Ticks, s.P50Ms, s.P99Ms, s.MaxMs = sm.N, sm.P50, sm.P99, sm.Max
	s.HungStatus = fmt.Sprint(statuses)
	return s
}
