package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/bench/peers"
)

// memPoint is the heap and RSS with k summaries in the history.
type memPoint struct {
	Summaries int     `json:"summaries"`
	Heap      float64 `json:"heap_bytes"`
	RSS       float64 `json:"rss_bytes"`
}

// memResult is one memory run (a child process).
type memResult struct {
	Contender  string     `json:"contender"`
	N          int        `json:"n"`
	History    int        `json:"history"`
	KeepWhole  int        `json:"keep_whole"` // cycled: summaries kept whole (older ones are compacted)
	Base       memPoint   `json:"base"`       // before anything is built
	Points     []memPoint `json:"points"`
	Goroutines int        `json:"goroutines"`
	Seconds    float64    `json:"seconds"`
	// Derived, per registered module.
	HeapPerMod     float64 `json:"heap_per_module"`      // at the first point
	RSSPerMod      float64 `json:"rss_per_module"`       // at the first point
	SlopePerMod    float64 `json:"slope_per_module"`     // heap per additional summary (between the two points)
	FullHeapPerMod float64 `json:"full_heap_per_module"` // history full
	FullRSSPerMod  float64 `json:"full_rss_per_module"`  // history full (measured only)
	FullMeasured   bool    `json:"full_measured"`        // measured (true) or extrapolated
}

// memProfile, when set, is where a memory child writes its heap profile at the end.
var memProfile string

func readRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

func measureMem(k int) memPoint {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memPoint{Summaries: k, Heap: float64(m.HeapAlloc), RSS: readRSS()}
}

// childMemory builds a contender with n trivial modules and a history of hist summaries
// and ticks it, measuring heap and RSS after a forced GC at two points (and, with fill,
// once the history is full). cycled keeps the newest KeepWhole summaries whole and
// compacts older ones, so its points lie past that window: the slope between them is the
// cost of one more (compacted) summary.
func childMemory(contender string, n, hist int, fill bool) {
	start := time.Now()
	r := memResult{Contender: contender, N: n, History: hist, Base: measureMem(0)}
	var on atomic.Bool
	spec := peers.TrivialSpec(n, false, &on, peers.FiveTiers(time.Second, 1, 10*time.Millisecond, 100*time.Millisecond, 1<<30))
	spec.History = hist
	var c peers.Contender
	k1, k2 := 4, 12
	switch contender {
	case "engine":
		e, err := peers.NewEngine(spec, cycle.Coarse)
		if err != nil {
			fatalf("engine: %v", err)
		}
		c = e
		r.KeepWhole = max(1, min(faultsummary.KeepWhole, faultsummary.WholeLines/n))
		k1, k2 = r.KeepWhole+8, r.KeepWhole+40
	case "plain":
		c = peers.NewPlain(spec)
	case "failsafe":
		c = peers.NewFailsafe(spec)
	}
	spec = peers.Spec{}
	ctx := context.Background()
	ticks := 0
	tickTo := func(k int) {
		for ; ticks < k; ticks++ {
			_ = c.Tick(ctx)
		}
	}
	tickTo(k1)
	r.Points = append(r.Points, measureMem(min(k1, hist)))
	tickTo(k2)
	r.Points = append(r.Points, measureMem(min(k2, hist)))
	if fill {
		tickTo(hist)
		r.Points = append(r.Points, measureMem(hist))
	}
	r.Goroutines = runtime.NumGoroutine()
	if memProfile != "" {
		runtime.GC()
		f, err := os.Create(memProfile)
		if err != nil {
			fatalf("%v", err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			fatalf("%v", err)
		}
		f.Close()
	}
	runtime.KeepAlive(c)
	c.Close()
	fn := float64(n)
	p1, p2 := r.Points[0], r.Points[1]
	r.HeapPerMod = (p1.Heap - r.Base.Heap) / fn
	r.RSSPerMod = (p1.RSS - r.Base.RSS) / fn
	// GC noise can make a tiny slope negative: a summary never frees memory.
	slope := max(0, (p2.Heap-p1.Heap)/float64(p2.Summaries-p1.Summaries))
	r.SlopePerMod = slope / fn
	if fill {
		last := r.Points[len(r.Points)-1]
		r.FullHeapPerMod = (last.Heap - r.Base.Heap) / fn
		r.FullRSSPerMod = (last.RSS - r.Base.RSS) / fn
		r.FullMeasured = true
	} else {
		r.FullHeapPerMod = (p2.Heap + float64(hist-p2.Summaries)*slope - r.Base.Heap) / fn
	}
	r.Seconds = time.Since(start).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func runMemory(o *opts) []memResult {
	type cfg struct {
		contender string
		n, hist   int
		fill      bool
	}
	// cycled with its default history of 1000 (filled at 10 000 modules; at 100 000 a
	// tick takes about 0.1 s, so the full history is extrapolated from the compacted
	// slope); the peers keep whole summaries in a ring of 16.
	cfgs := []cfg{{"engine", 10000, 1000, true}, {"engine", 100000, 1000, false}, {"plain", 10000, 16, false}, {"plain", 100000, 16, false},
		{"failsafe", 10000, 16, false}}
	if o.quick {
		cfgs = []cfg{{"engine", 10000, 1000, false}, {"plain", 10000, 16, false}, {"failsafe", 10000, 16, false}}
	}
	var out []memResult
	for _, c := range cfgs {
		var r memResult
		args := []string{"-child", "memory", "-contender", c.contender, "-n", fmt.Sprint(c.n), "-history", fmt.Sprint(c.hist)}
		if c.fill {
			args = append(args, "-fill")
		}
		if err := runChild(&r, nil, args...); err != nil {
			fatalf("%v", err)
		}
		logf("memory %-8s N=%6d: heap %6.0f B/module RSS %6.0f B/module with %d summaries; +%.1f B/module per summary; history of %d: %7.0f B/module (measured %v), %.1fs",
			c.contender, c.n, r.HeapPerMod, r.RSSPerMod, r.Points[0].Summaries, r.SlopePerMod, c.hist, r.FullHeapPerMod, r.FullMeasured, r.Seconds)
		out = append(out, r)
	}
	return out
}
