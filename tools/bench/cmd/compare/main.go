// Command compare is cycled's comparison harness: it measures cycled's tick engine side by
// side with (A) plain Go, (B) failsafe-go policies and (C) a Python asyncio sketch of the
// same design, and writes the tables into BENCHMARKS.md (between the markers of each
// section; the prose around them is kept).
//
// Sections: tickcost (µs, allocations and bytes per tick for 5…50 000 trivial modules,
// clean, with 10% failing, and with 10% refused by their open breakers), deadline (overshoot of a 50 ms tier with a hung module),
// period (start lag and missed grid points at 100 Hz and 1 kHz), memory (heap and RSS per
// registered module), http (/ticks/latest under 64 connections against the daemon binary,
// and the tick start lag idle versus under that load).
//
// Run from the bench directory (make bench-compare does):
//
//	go run ./cmd/compare -out ../../BENCHMARKS.md [-reps 3] [-sections tickcost,deadline,period,memory,http] [-quick]
//
// Every repetition runs all contenders of a case back to back and ratios are taken inside
// the repetition; tables report medians over repetitions. Period and memory runs are child
// processes of this binary (-child period|memory), so that they start from a clean heap.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

type opts struct {
	reps     int
	quick    bool
	out      string
	jsonOut  string
	sections map[string]bool
	python   string
	sketch   string
	daemon   string
	root     string
	sizes    []int
	only     string // tick cost: only this contender (development)
}

// jfloat is a float that encodes NaN as null in JSON.
type jfloat float64

func (f jfloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

func (f *jfloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = jfloat(math.NaN())
		return nil
	}
	var v float64
	err := json.Unmarshal(b, &v)
	*f = jfloat(v)
	return err
}

var t0 = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: %s\n", fmt.Sprintf(format, args...))
	os.Exit(1)
}

// results is everything one run measured.
type results struct {
	Machine machine           `json:"machine"`
	Command string            `json:"command"`
	Reps    int               `json:"reps"`
	Quick   bool              `json:"quick"`
	Wall    map[string]string `json:"wall"`
	// Foreign is the share of the machine's CPUs used by other processes during each
	// section (%), and Load the 1-minute load average at its end.
	Foreign  map[string]float64 `json:"foreign_cpu_pct"`
	Load     map[string]string  `json:"loadavg"`
	Cost     []costSample       `json:"tick_cost,omitempty"`
	Deadline []deadlineSample   `json:"deadline,omitempty"`
	Period   []periodResult     `json:"period,omitempty"`
	Memory   []memResult        `json:"memory,omitempty"`
	HTTP     []httpResult       `json:"http,omitempty"`
}

func main() {
	var (
		o        opts
		sections string
		child    string
		cont     string
		hz, n    int
		warm     time.Duration
		dur      time.Duration
		fill     bool
		url      string
		hist     int
		longPoll bool
	)
	flag.IntVar(&o.reps, "reps", 3, "repetitions of every measurement (medians are reported)")
	flag.BoolVar(&o.quick, "quick", false, "short runs for development (numbers not for publication)")
	flag.StringVar(&o.out, "out", "../../BENCHMARKS.md", "markdown file whose generated sections are rewritten (empty: none)")
	flag.StringVar(&o.jsonOut, "json", "out/results.json", "raw results (empty: none)")
	flag.StringVar(&sections, "sections", "tickcost,deadline,period,memory,http", "sections to run")
	flag.StringVar(&o.python, "python", "python3", "Python interpreter for peer C (missing: C is left out)")
	flag.StringVar(&o.sketch, "sketch", "python/sketch.py", "peer C's script")
	flag.StringVar(&o.daemon, "daemon", "", "cycled daemon binary (empty: built from ../../cmd/cycled)")
	flag.StringVar(&o.root, "root", "../..", "repository root (to build the daemon)")
	flag.Func("sizes", "tick cost: comma-separated module counts (default 5,50,500,5000,50000)", func(v string) error {
		for _, x := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil {
				return err
			}
			o.sizes = append(o.sizes, n)
		}
		return nil
	})
	flag.StringVar(&o.only, "only", "", "tick cost: run only this contender (cycled, A, B, C; development)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run (the parent process) here")
	flag.StringVar(&child, "child", "", "internal: run one child measurement (period, memory, httpload, wake)")
	flag.StringVar(&cont, "contender", "", "internal: child's contender")
	flag.IntVar(&hz, "hz", 100, "internal: child's rate")
	flag.IntVar(&n, "n", 500, "internal: child's module count")
	flag.DurationVar(&warm, "warm", 500*time.Millisecond, "internal: child's warm-up")
	flag.DurationVar(&dur, "dur", 5*time.Second, "internal: child's measuring time")
	flag.BoolVar(&fill, "fill", false, "internal: memory child fills the history")
	flag.StringVar(&url, "url", "", "internal: load generator's URL")
	flag.IntVar(&hist, "history", 1000, "internal: memory child's history")
	flag.BoolVar(&longPoll, "longpoll", false, "internal: load generator long-polls")
	flag.StringVar(&memProfile, "memprofile", "", "memory child: write a heap profile here (e.g. -child memory -contender engine -n 100000 -memprofile heap.out)")
	flag.Parse()

	switch child {
	case "period":
		childPeriod(cont, hz, n, warm, dur)
		return
	case "memory":
		childMemory(cont, n, hist, fill)
		return
	case "httpload":
		childLoad(url, 64, dur, longPoll)
		return
	case "wake":
		if err := json.NewEncoder(os.Stdout).Encode(wakeCost()); err != nil {
			fatalf("%v", err)
		}
		return
	case "":
	default:
		fatalf("unknown child %q", child)
	}

	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			fatalf("%v", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			fatalf("%v", err)
		}
		defer pprof.StopCPUProfile()
	}
	o.sections = map[string]bool{}
	for _, s := range strings.Split(sections, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.sections[s] = true
		}
	}
	res := results{Machine: describeMachine(), Reps: o.reps, Quick: o.quick, Wall: map[string]string{}, Foreign: map[string]float64{}, Load: map[string]string{},
		Command: "cd bench && ./out/compare " + strings.Join(os.Args[1:], " ")}

	var py *pySketch
	if o.sections["tickcost"] || o.sections["deadline"] {
		var err error
		py, err = startPython(o.python, o.sketch)
		if err != nil {
			logf("peer C left out: %v", err)
			py = nil
		} else {
			res.Machine.Python = py.Version
			pyPid = py.cmd.Process.Pid
		}
		defer py.Close()
	}
	section := func(name string, f func()) {
		if !o.sections[name] {
			return
		}
		start := time.Now()
		c0 := takeCPU()
		logf("== %s (load average %s)", name, c0.load)
		f()
		c1 := takeCPU()
		res.Wall[name] = time.Since(start).Round(100 * time.Millisecond).String()
		res.Foreign[name] = foreign(c0, c1)
		res.Load[name] = c1.load
		logf("== %s done in %s; other processes used %.0f%% of the CPUs meanwhile", name, res.Wall[name], res.Foreign[name])
	}
	section("tickcost", func() { res.Cost = runTickCost(&o, py) })
	section("deadline", func() { res.Deadline = runDeadline(&o, py) })
	section("period", func() { res.Period = runPeriod(&o) })
	section("memory", func() { res.Memory = runMemory(&o) })
	section("http", func() {
		if o.daemon == "" {
			o.daemon = buildDaemon(o.root)
		}
		res.HTTP = runHTTP(&o)
	})
	res.Wall["total"] = time.Since(t0).Round(100 * time.Millisecond).String()
	res.Machine.WakeEndUs = wakeProbe() // again: what the other vCPU does at the time decides it
	logf("total %s", res.Wall["total"])

	rep := render(&res, o.sections)
	if o.out == "" {
		for _, s := range sectionOrder {
			if body, ok := rep[s]; ok {
				fmt.Println(body)
			}
		}
	} else if err := updateMarkdown(o.out, rep); err != nil {
		fatalf("%v", err)
	} else {
		logf("wrote %s", o.out)
	}
	if o.jsonOut != "" {
		_ = os.MkdirAll(filepath.Dir(o.jsonOut), 0o755)
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(o.jsonOut, b, 0o644)
		}
		if err != nil {
			logf("raw results not written: %v", err)
		}
	}
}

// buildDaemon builds ../cmd/cycled into a temporary directory (with the root's go.mod).
func buildDaemon(root string) string {
	dir, err := os.MkdirTemp("", "cycled-bench-bin")
	if err != nil {
		fatalf("%v", err)
	}
	bin := filepath.Join(dir, "cycled")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/cycled")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fatalf("building the daemon: %v", err)
	}
	return bin
}
