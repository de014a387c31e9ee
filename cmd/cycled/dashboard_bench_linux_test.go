package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// lagBenchConfig is a 100 Hz daemon with light modules in every seed tier: what is
// measured is the scheduler's start lag, not the modules.
const lagBenchConfig = `
cycle: {period: 10ms, history: 4000}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}, latency: 200us}}
  - {name: recall, tier: knowledge, builtin: {value: 1, latency: 500us}}
  - {name: lidar, tier: perception, builtin: {value: 2, latency: 300us}}
  - {name: plan, tier: planning, builtin: {value: go, latency: 300us}}
  - {name: act, tier: execution, builtin: {value: done, latency: 100us}}
http: {addr: 127.0.0.1:0}
`

// lagRun is one measured window.
type lagRun struct {
	tabs          int
	ticks         int
	p50, p99, max float64 // start lag, ms
	overruns      int
	load          string // /proc/loadavg at the end of the window
	// CPU used during the window, in cores (CPU seconds per second): the daemon, the
	// browser (all its processes), and the whole machine.
	daemonCPU, browserCPU, machineCPU float64
}

// TestDashboardStartLag is the benchmark of BENCHMARKS.md, "Dashboard": the daemon's
// tick start lag at 100 Hz with 0 and with 8 dashboards open in headless Chromium tabs,
// in alternated windows on one daemon (0, 8, 8, 0, 0, 8, …), so that a drift of the
// machine's load falls on both sides. Each window with tabs has a browser of its own,
// started before and ended after it; the 0-tab windows run no browser. It runs only with DASHBOARD_BENCH=1 (make
// bench-dashboard); DASHBOARD_BENCH_REPS sets the number of pairs (default 5) and
// DASHBOARD_BENCH_WINDOW the length of a window (default 10s).
func TestDashboardStartLag(t *testing.T) {
	if os.Getenv("DASHBOARD_BENCH") != "1" {
		t.Skip("set DASHBOARD_BENCH=1 (make bench-dashboard) to run the dashboard benchmark")
	}
	reps, _ := strconv.Atoi(os.Getenv("DASHBOARD_BENCH_REPS"))
	if reps <= 0 {
		reps = 5
	}
	window, err := time.ParseDuration(os.Getenv("DASHBOARD_BENCH_WINDOW"))
	if err != nil || window <= 0 {
		window = 10 * time.Second
	}
	d := start(t, nil, "--config", write(t, "cycled.yaml", lagBenchConfig))
	cases := []int{0, 8}
	runs := map[int][]lagRun{}
	for rep := range reps {
		order := slices.Clone(cases)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			r := measureLag(t, d, c, window)
			runs[c] = append(runs[c], r)
			t.Logf("%d tabs: ticks=%d lag p50=%.3fms p99=%.3fms max=%.3fms overruns=%d cpu: daemon %.2f browser %.2f machine %.2f load=%s",
				r.tabs, r.ticks, r.p50, r.p99, r.max, r.overruns, r.daemonCPU, r.browserCPU, r.machineCPU, r.load)
		}
	}
	p99s := func(rs []lagRun) []float64 {
		var v []float64
		for _, r := range rs {
			v = append(v, r.p99)
		}
		return v
	}
	base := median(p99s(runs[cases[0]]))
	for _, c := range cases {
		m := median(p99s(runs[c]))
		t.Logf("%d tabs: median start-lag p99 %.3f ms (%+.3f ms, %+.1f%% against 0 tabs); per run %v", c, m, m-base, 100*(m-base)/base, fmtMs(p99s(runs[c])))
	}
}

// measureLag opens tabs dashboards, waits until each shows live ticks, then measures the
// start lag of the ticks of one window, and closes the tabs.
func measureLag(t *testing.T, d *daemon, tabs int, window time.Duration) lagRun {
	t.Helper()
	browserPid := -1
	if tabs > 0 {
		// A browser of the window's own, ended with it (a tab's renderer may outlive the
		// tab, and would load the next window).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		browser := newBrowserCtx(t, ctx)
		defer func() { _ = chromedp.Cancel(browser) }()
		browserPid = chromedp.FromContext(browser).Browser.Process().Pid
		for _, tab := range openTabs(t, browser, d.base+"/", tabs) {
			waitFor(t, tab, 60*time.Second, "dashboard live", `document.getElementById('conn').dataset.state === 'live' &&
				document.getElementById('heatmap').dataset.columns === '200'`)
		}
	}
	until := func(id uint64) uint64 { // waits for tick id (a long-poll answers any newer tick)
		latest := waitTick(t, d, 0)
		for latest < id {
			latest = waitTick(t, d, latest)
		}
		return latest
	}
	first := until(waitTick(t, d, 0) + 100) // a second to settle
	d0, b0, m0, t0 := procTreeCPU(d.cmd.Process.Pid), procTreeCPU(browserPid), machineCPU(), time.Now()
	last := until(first + uint64(window/(10*time.Millisecond)))
	secs := time.Since(t0).Seconds()
	d1, b1, m1 := procTreeCPU(d.cmd.Process.Pid), procTreeCPU(browserPid), machineCPU()
	var lags []float64
	r := lagRun{tabs: tabs, daemonCPU: (d1 - d0) / secs, browserCPU: (b1 - b0) / secs, machineCPU: (m1 - m0) / secs}
	for before := last + 1; before > first+1; {
		var page struct {
			Ticks []struct {
				TickID     uint64  `json:"tick_id"`
				StartLagMs float64 `json:"start_lag_ms"`
				Overrun    bool    `json:"overrun"`
			} `json:"ticks"`
		}
		d.do("GET", fmt.Sprintf("/ticks?limit=1000&before=%d", before), "", &page)
		if len(page.Ticks) == 0 {
			t.Fatalf("no ticks before %d in the history", before)
		}
		for _, s := range page.Ticks {
			if s.TickID > first && s.TickID <= last {
				lags = append(lags, s.StartLagMs)
				if s.Overrun {
					r.overruns++
				}
			}
			before = s.TickID
		}
	}
	slices.Sort(lags)
	r.ticks = len(lags)
	r.p50, r.p99, r.max = lags[len(lags)/2], lags[min(len(lags)-1, len(lags)*99/100)], lags[len(lags)-1]
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return r
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtMs(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, strconv.FormatFloat(x, 'f', 3, 64))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux's supported ABIs).
const clockTicks = 100

// procTree returns root and its living descendants.
func procTree(root int) []int {
	parent, _ := procTable()
	var out []int
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// procTreeCPU returns the CPU seconds (user + system) used so far by pid and its living
// descendants, from /proc; 0 where /proc cannot be read.
func procTreeCPU(root int) float64 {
	_, cpu := procTable()
	var total float64
	for _, pid := range procTree(root) {
		total += cpu[pid]
	}
	return total
}

// procTable reads every process's parent and CPU seconds (user + system) from /proc.
func procTable() (parent map[int]int, cpu map[int]float64) {
	entries, _ := os.ReadDir("/proc")
	parent, cpu = map[int]int{}, map[int]float64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command name (which may hold spaces) in parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		cpu[pid] = (ut + st) / clockTicks
	}
	return parent, cpu
}

// machineCPU returns the CPU seconds the machine's CPUs spent busy so far (/proc/stat).
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy float64
	for i, v := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	return busy / clockTicks
}
