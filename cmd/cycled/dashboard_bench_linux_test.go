package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
)

// lagBenchConfig is a 100 Hz daemon with light modules in every seed tier: what is
// measured is the scheduler's start lag, not the modules.
const lagBenchConfig = `
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}, latency: 200us}}
  - {name: recall, tier: knowledge, builtin: {value: 1, latency: 500us}}
  - {name: lidar, tier: perception, builtin: {value: 2, latency: 300us}}
  - {name: plan, tier: planning, builtin: {value: go, latency: 300us}}
  - {name: act, tier: execution, builtin: {value: done, latency: 100us}}
http: {addr: 127.0.0.1:0}
`

// lagBenchCycle returns the cycle section of the benchmark's daemon: 100 Hz, plus the
// fields extra gives (DASHBOARD_BENCH_CYCLE, a YAML flow-mapping body such as
// "timing: precise, realtime_priority: 10"), so that the timing modes a deployment
// chooses can be measured as they run.
func lagBenchCycle(extra string) string {
	if extra = strings.TrimSpace(extra); extra != "" {
		extra = ", " + extra
	}
	return "cycle: {period: 10ms, history: 4000" + extra + "}"
}

// lagCase is what a window opens: tabs dashboards, each in a window of its own (all
// visible), or with shared set all in one window, where only the active tab is visible
// (as in a real browser's window of tabs).
// With httpOnly set there is no browser: tabs clients make the requests of as many
// visible dashboards, each with its own stream (dashboardClient), which is the daemon's
// share of the cost without the browser's.
type lagCase struct {
	tabs     int
	shared   bool
	httpOnly bool
}

func (c lagCase) String() string {
	switch {
	case c.httpOnly:
		return fmt.Sprintf("%d dashboards' requests, no browser", c.tabs)
	case c.shared:
		return fmt.Sprintf("%d tabs, 1 visible", c.tabs)
	}
	return fmt.Sprintf("%d tabs", c.tabs)
}

// parseLagCases reads DASHBOARD_BENCH_CASES: a comma-separated list of tab counts, a
// count followed by "s" for tabs sharing one window, or by "h" for the requests of that
// many dashboards without a browser ("0,8,8s,8h"); the default is "0,8".
func parseLagCases(t *testing.T, v string) []lagCase {
	t.Helper()
	if v == "" {
		v = "0,8"
	}
	var out []lagCase
	for _, f := range strings.Split(v, ",") {
		c := lagCase{shared: strings.HasSuffix(f, "s"), httpOnly: strings.HasSuffix(f, "h")}
		n, err := strconv.Atoi(strings.TrimRight(f, "sh"))
		if err != nil || n < 0 {
			t.Fatalf("DASHBOARD_BENCH_CASES: %q is not a tab count", f)
		}
		c.tabs = n
		out = append(out, c)
	}
	return out
}

// pageCost is the main-thread time the tabs' pages spent per second of the window, in
// seconds per second, from the Performance domain of each tab, summed over the tabs.
type pageCost struct {
	task, script, layout, style float64
	layouts, styles             float64 // layouts and style recalculations per second
}

// lagRun is one measured window.
type lagRun struct {
	lagCase
	page          pageCost
	ticks         int
	p50, p99, max float64   // start lag, ms
	lags          []float64 // every start lag of the window, sorted, ms
	overruns      int
	load          string // /proc/loadavg at the end of the window
	// CPU used during the window, in cores (CPU seconds per second): the daemon, the
	// browser (all its processes), and the whole machine.
	daemonCPU, browserCPU, machineCPU float64
	// browserByType is the browser's CPU by process type (browser, renderer,
	// gpu-process, utility, …), in cores.
	browserByType map[string]float64
}

// TestDashboardStartLag is the benchmark of BENCHMARKS.md, "Dashboard": the daemon's
// tick start lag at 100 Hz with 0 and with 8 dashboards open in headless Chromium tabs,
// in alternated windows on one daemon (0, 8, 8, 0, 0, 8, …), so that a drift of the
// machine's load falls on both sides. Each window with tabs has a browser of its own,
// started before and ended after it; the 0-tab windows run no browser. It runs only with DASHBOARD_BENCH=1 (make
// bench-dashboard); DASHBOARD_BENCH_REPS sets the number of rounds (default 5),
// DASHBOARD_BENCH_WINDOW the length of a window (default 10s), DASHBOARD_BENCH_CASES
// what a round's windows open (default "0,8"; see parseLagCases) and DASHBOARD_BENCH_CYCLE
// more fields of the daemon's cycle section (see lagBenchCycle). A window with tabs also
// logs the pages' main-thread time and the browser's CPU by process type.
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
	d := start(t, nil, "--config", write(t, "cycled.yaml", lagBenchCycle(os.Getenv("DASHBOARD_BENCH_CYCLE"))+lagBenchConfig))
	cases := parseLagCases(t, os.Getenv("DASHBOARD_BENCH_CASES"))
	runs := map[lagCase][]lagRun{}
	for rep := range reps {
		order := slices.Clone(cases)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			r := measureLag(t, d, c, window)
			runs[c] = append(runs[c], r)
			t.Logf("%s: ticks=%d lag p50=%.3fms p99=%.3fms max=%.3fms overruns=%d cpu: daemon %.2f browser %.2f machine %.2f load=%s",
				c, r.ticks, r.p50, r.p99, r.max, r.overruns, r.daemonCPU, r.browserCPU, r.machineCPU, r.load)
			if c.tabs > 0 {
				t.Logf("%s: page main thread (s/s, all tabs): task %.3f script %.3f layout %.3f style %.3f (%.0f layouts/s, %.0f style recalcs/s); browser CPU by process type %s",
					c, r.page.task, r.page.script, r.page.layout, r.page.style, r.page.layouts, r.page.styles, fmtTypes(r.browserByType))
			}
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
		t.Logf("%s: median start-lag p99 %.3f ms (%+.3f ms, %+.1f%% against %s); per run %v", c, m, m-base, 100*(m-base)/base, cases[0], fmtMs(p99s(runs[c])))
	}
	for _, c := range cases[1:] {
		b := comparePooled(runs[cases[0]], runs[c], 2000)
		t.Logf("%s against %s: pooled start-lag p99 %.3f vs %.3f ms, difference %+.3f ms (95%% interval %+.3f to %+.3f ms), ratio %.2f (%.2f to %.2f)",
			c, cases[0], b.p99, b.baseP99, b.diff, b.diffLo, b.diffHi, b.ratio, b.ratioLo, b.ratioHi)
	}
}

// pooledComparison is a case's pooled start-lag p99 against the base case's, with 95%
// intervals from a bootstrap over windows.
type pooledComparison struct {
	baseP99, p99, diff, diffLo, diffHi, ratio, ratioLo, ratioHi float64
}

// comparePooled pools the lags of each case's windows and compares their p99. The
// interval comes from resampling whole windows (with replacement) n times: the machine's
// noise comes in bursts that last about a window, so ticks of one window are not
// independent samples, and the interval says how far the windows' variation lets the
// difference be resolved.
func comparePooled(base, other []lagRun, n int) pooledComparison {
	pooledP99 := func(rs []lagRun) float64 {
		var all []float64
		for _, r := range rs {
			all = append(all, r.lags...)
		}
		slices.Sort(all)
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, len(all)*99/100)]
	}
	out := pooledComparison{baseP99: pooledP99(base), p99: pooledP99(other)}
	out.diff, out.ratio = out.p99-out.baseP99, out.p99/out.baseP99
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the same windows give the same interval
	resample := func(rs []lagRun) []lagRun {
		s := make([]lagRun, len(rs))
		for i := range s {
			s[i] = rs[rng.IntN(len(rs))]
		}
		return s
	}
	diffs, ratios := make([]float64, n), make([]float64, n)
	for i := range n {
		b, o := pooledP99(resample(base)), pooledP99(resample(other))
		diffs[i], ratios[i] = o-b, o/b
	}
	slices.Sort(diffs)
	slices.Sort(ratios)
	lo, hi := n*25/1000, n*975/1000
	out.diffLo, out.diffHi, out.ratioLo, out.ratioHi = diffs[lo], diffs[hi], ratios[lo], ratios[hi]
	return out
}

// benchTabs opens c's dashboards in a browser of their own and waits until each shows
// live ticks; it returns the tabs and the browser's process id. The browser ends with ctx.
func benchTabs(t *testing.T, ctx context.Context, d *daemon, c lagCase) ([]context.Context, int) {
	t.Helper()
	browser := newBrowserCtx(t, ctx)
	pid := chromedp.FromContext(browser).Browser.Process().Pid
	const live = `document.getElementById('conn').dataset.state === 'live' &&
		document.getElementById('heatmap').dataset.columns === '200'`
	if !c.shared {
		tabs := openTabs(t, browser, d.base+"/", c.tabs)
		for _, tab := range tabs {
			waitFor(t, tab, 60*time.Second, "dashboard live", live)
		}
		return tabs, pid
	}
	// One window: each new tab is opened in front, shown live, and then hidden by the
	// next; the last one opened stays visible.
	var tabs []context.Context
	for range c.tabs {
		tab, cancel := chromedp.NewContext(browser, chromedp.WithNewWindow(false))
		t.Cleanup(cancel)
		if err := chromedp.Do(tab, chromedp.Navigate(d.base+"/")); err != nil {
			t.Fatalf("open a tab: %v", err)
		}
		if _, err := chromedp.Call(tab, page.BringToFront, struct{}{}); err != nil {
			t.Fatalf("bring a tab to front: %v", err)
		}
		waitFor(t, tab, 60*time.Second, "dashboard live", live)
		tabs = append(tabs, tab)
	}
	return tabs, pid
}

// tabsCost returns the main-thread seconds spent so far by the tabs, summed.
func tabsCost(t *testing.T, tabs []context.Context) pageCost {
	t.Helper()
	var pc pageCost
	for _, tab := range tabs {
		res, err := chromedp.Call(tab, performance.GetMetrics, struct{}{})
		if err != nil {
			t.Fatalf("performance metrics: %v", err)
		}
		for _, m := range res.Metrics {
			switch m.Name {
			case "TaskDuration":
				pc.task += m.Value
			case "ScriptDuration":
				pc.script += m.Value
			case "LayoutDuration":
				pc.layout += m.Value
			case "RecalcStyleDuration":
				pc.style += m.Value
			case "LayoutCount":
				pc.layouts += m.Value
			case "RecalcStyleCount":
				pc.styles += m.Value
			}
		}
	}
	return pc
}

// measureLag opens c's dashboards, waits until each shows live ticks, then measures the
// start lag of the ticks of one window, and closes the tabs.
func measureLag(t *testing.T, d *daemon, c lagCase, window time.Duration) lagRun {
	t.Helper()
	settle(t, d)
	browserPid := -1
	var tabs []context.Context
	if c.httpOnly {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range c.tabs {
			wg.Add(1)
			go func() { defer wg.Done(); dashboardClient(ctx, d.base) }()
		}
		defer wg.Wait()
		defer cancel()
	} else if c.tabs > 0 {
		// A browser of the window's own, ended with it (a tab's renderer may outlive the
		// tab, and would load the next window).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tabs, browserPid = benchTabs(t, ctx, d, c)
		defer func() { _ = chromedp.Cancel(tabs[0]) }()
		for _, tab := range tabs {
			if _, err := chromedp.Call(tab, performance.Enable, performance.EnableParams{}); err != nil {
				t.Fatalf("performance domain: %v", err)
			}
		}
	}
	first := untilTick(t, d, waitTick(t, d, 0)+100) // a second to settle
	p0 := tabsCost(t, tabs)
	bt0 := procTypeCPU(browserPid)
	d0, b0, m0, t0 := procTreeCPU(d.cmd.Process.Pid), procTreeCPU(browserPid), machineCPU(), time.Now()
	last := untilTick(t, d, first+uint64(window/(10*time.Millisecond)))
	secs := time.Since(t0).Seconds()
	d1, b1, m1 := procTreeCPU(d.cmd.Process.Pid), procTreeCPU(browserPid), machineCPU()
	p1 := tabsCost(t, tabs)
	bt1 := procTypeCPU(browserPid)
	r := lagRun{lagCase: c, daemonCPU: (d1 - d0) / secs, browserCPU: (b1 - b0) / secs, machineCPU: (m1 - m0) / secs,
		page: pageCost{(p1.task - p0.task) / secs, (p1.script - p0.script) / secs, (p1.layout - p0.layout) / secs, (p1.style - p0.style) / secs,
			(p1.layouts - p0.layouts) / secs, (p1.styles - p0.styles) / secs}}
	r.browserByType = map[string]float64{}
	for k, v := range bt1 {
		r.browserByType[k] = (v - bt0[k]) / secs
	}
	lags := windowLags(t, d, first, last, &r)
	r.ticks, r.lags = len(lags), lags
	r.p50, r.p99, r.max = lags[len(lags)/2], lags[min(len(lags)-1, len(lags)*99/100)], lags[len(lags)-1]
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return r
}

// dashboardClient makes a visible dashboard's requests until ctx ends: it reads the tick
// stream, and asks for /breakers and /blackboard every second, /healthz every two, and
// /modules and /config every ten (ui/static/app.js).
func dashboardClient(ctx context.Context, base string) {
	get := func(path string) { // reads the whole answer: the stream's until ctx ends
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if r, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
		}
	}
	go get("/ticks/stream")
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		get("/breakers")
		get("/blackboard")
		if n%2 == 0 {
			get("/healthz")
		}
		if n%10 == 0 {
			get("/modules")
			get("/config")
		}
	}
}

// settle waits, up to 30 s, until the processes of the previous window are gone and the
// machine is quiet: no process outside the daemon uses more than a tenth of a core over
// half a second. Chromium takes seconds to end its processes, and a window measured
// meanwhile would charge that to the next case (the 0-tab windows after browser ones).
func settle(t *testing.T, d *daemon) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		m0, d0, t0 := machineCPU(), procTreeCPU(d.cmd.Process.Pid), time.Now()
		time.Sleep(500 * time.Millisecond)
		secs := time.Since(t0).Seconds()
		other := (machineCPU() - m0 - (procTreeCPU(d.cmd.Process.Pid) - d0)) / secs
		if other < 0.1 && !chromiumRunning() {
			return
		}
	}
	t.Logf("the machine did not settle in 30 s: measuring anyway")
}

// chromiumRunning reports whether a Chromium process of this test is still alive.
func chromiumRunning() bool {
	for _, pid := range procTree(os.Getpid()) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.Contains(string(b), "chrom") {
			return true
		}
	}
	return false
}

// untilTick waits for tick id (a long-poll answers any newer tick) and returns the
// latest tick id seen.
func untilTick(t *testing.T, d *daemon, id uint64) uint64 {
	t.Helper()
	latest := waitTick(t, d, 0)
	for latest < id {
		latest = waitTick(t, d, latest)
	}
	return latest
}

// windowLags returns the sorted start lags of ticks first+1 … last from the history,
// and counts their overruns in r.
func windowLags(t *testing.T, d *daemon, first, last uint64, r *lagRun) []float64 {
	t.Helper()
	var lags []float64
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
	return lags
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

// procTypeCPU returns the CPU seconds used so far by root and its living descendants,
// summed by Chromium process type (the --type= flag; "browser" without one).
func procTypeCPU(root int) map[string]float64 {
	_, cpu := procTable()
	out := map[string]float64{}
	for _, pid := range procTree(root) {
		typ := "browser"
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		// Chromium rewrites its children's command lines as one space-separated string.
		for _, a := range strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")) {
			if v, ok := strings.CutPrefix(a, "--type="); ok {
				typ = v
			}
		}
		out[typ] += cpu[pid]
	}
	return out
}

// fmtTypes formats CPU by process type, in cores, sorted by name.
func fmtTypes(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
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
