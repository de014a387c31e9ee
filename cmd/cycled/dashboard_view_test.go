package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// viewConfig is a step-mode daemon with the flight recorder (so that the timeline reads
// GET /events), an emergency-only module with a long name, and an admin token.
const viewConfig = `
cycle: {period: 0}
emergency: {recover_after: 2}
breakers:
  camera-link: {failure_threshold: 1, cooldown: 60s}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: emergency_stop_controller
    tier: safety
    emergency: true
    builtin: {value: {stop: true}}
  - name: recall
    tier: knowledge
    ttl: 1s
    builtin: {value: 1}
  - name: camera
    tier: perception
    breaker: camera-link
    builtin: {value: 2}
http: {addr: 127.0.0.1:0, admin_token: s3cret}
recorder: {enabled: true, flush: 100ms}
state_dir: %s
`

// wallClock is a label of the time axis: a local time of day.
var wallClock = regexp.MustCompile(`^\d\d:\d\d(:\d\d(\.\d\d\d)?)?$`)

// TestDashboardView drives the investigation views in Chromium against a daemon with the
// recorder: a safety fault is injected (an emergency, and the safety module's breaker
// opens), the daemon recovers, and 230 more ticks push the fault out of the heat map's
// window. Then the timeline shows the emergency and the breaker transition from GET
// /events, and a click on the emergency moves the heat map to its tick; the time axes
// have wall-clock labels; a filter narrows the heat map to the API's matching ticks; a
// copied URL reopens the same view in a new tab; the emergency-only module is idle, not
// an error; and on a 390×844 phone no module name is cut without a way to read it whole.
func TestDashboardView(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", fmt.Sprintf(viewConfig, t.TempDir())))
	for range 5 {
		d.stepTick()
	}
	if st := d.admin("POST", "/modules/guard/faults", `{"fail_rate": 1}`, nil); st != http.StatusOK {
		t.Fatalf("inject = %d", st)
	}
	entered := d.tick()
	if !entered.EmergencyMode {
		t.Fatalf("tick %d after a failing safety module is not in emergency mode", entered.TickID)
	}
	opened := d.tick() // the guard's second failure in a row opens its breaker
	if st := d.admin("POST", "/modules/guard/faults", `{"reset": true}`, nil); st != http.StatusOK {
		t.Fatalf("restore = %d", st)
	}
	if st := d.admin("POST", "/breakers/guard/reset", "", nil); st != http.StatusOK {
		t.Fatalf("breaker reset = %d", st)
	}
	for i := 0; d.tick().EmergencyMode; i++ {
		if i == 5 {
			t.Fatal("the emergency did not end")
		}
	}
	var last uint64
	for range 230 {
		last = d.stepTick()
	}

	ctx := newBrowser(t)
	console := watchConsole(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "live", `document.getElementById('conn').dataset.state === 'live' && `+heatmapIs(200, last))

	// Each part runs with the first tab in front: the tabs a part opens to follow a link
	// hide it, and a hidden page draws nothing.
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if _, err := chromedp.Call(ctx, page.BringToFront, struct{}{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, 5*time.Second, "the first tab shown", `!document.hidden`)
			f(t)
		})
	}
	run("TimeAxis", func(t *testing.T) { viewTimeAxis(t, ctx) })
	run("Timeline", func(t *testing.T) { viewTimeline(t, ctx, entered.TickID, opened.TickID) })
	run("LinkToTick", func(t *testing.T) { sameViewInNewTab(t, ctx) })
	run("Filter", func(t *testing.T) { viewFilter(t, ctx, d) })
	run("LinkToFilteredModule", func(t *testing.T) { viewFilteredModuleLink(t, ctx) })
	run("TimeWindow", func(t *testing.T) { viewTimeWindow(t, ctx, d, entered.TickID) })
	run("EmergencyOnlyIdle", func(t *testing.T) { viewIdle(t, ctx, d) })
	run("DialogKeys", func(t *testing.T) { viewDialogKeys(t, ctx, d, entered.TickID) })
	run("Phone", func(t *testing.T) { viewPhone(t, ctx) })
	if errs := console.list(); len(errs) > 0 {
		t.Fatalf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// axisLabels returns the texts of the heat map's time axis.
func axisLabels(t *testing.T, ctx context.Context) []string {
	t.Helper()
	s := evalString(t, ctx, `[...document.querySelectorAll('#hm-axis span')].map((e) => e.textContent).join('|')`)
	if s == "" {
		return nil
	}
	return strings.Split(s, "|")
}

// axesApart is the JavaScript condition: the heat map's axis labels do not overlap and
// stay inside the axis, and the timing chart's time labels are apart and its scale's
// labels left of its plot.
const axesApart = `(() => {
	const axis = document.getElementById('hm-axis').getBoundingClientRect();
	const rs = [...document.querySelectorAll('#hm-axis span')].map((e) => e.getBoundingClientRect());
	for (let i = 0; i < rs.length; i++) {
		if (rs[i].left < axis.left - 0.5 || rs[i].right > axis.right + 0.5) return false;
		if (i > 0 && rs[i].left < rs[i - 1].right) return false;
	}
	const tm = document.getElementById('timing').dataset;
	const xs = tm.axisX ? tm.axisX.split('|').map(Number) : [];
	for (let i = 1; i < xs.length; i++) if (xs[i] - xs[i - 1] < 40) return false;
	return rs.length > 0 && xs.length > 0 && Number(tm.plotLeft) > Number(tm.scaleRight);
})()`

func viewTimeAxis(t *testing.T, ctx context.Context) {
	waitFor(t, ctx, 5*time.Second, "time labels", `document.querySelectorAll('#hm-axis span').length >= 2 && !!document.getElementById('timing').dataset.axis`)
	labels := axisLabels(t, ctx)
	chart := strings.Split(evalString(t, ctx, `document.getElementById('timing').dataset.axis`), "|")
	for _, l := range append(slices.Clone(labels), chart...) {
		if !wallClock.MatchString(l) {
			t.Fatalf("axis label %q is not a wall-clock time (heat map %q, timing chart %q)", l, labels, chart)
		}
	}
	// Each label is the start of a column shown, left to right.
	if bad := evalString(t, ctx, `(() => { const h = document.getElementById('heatmap').dataset;
		const ids = [...document.querySelectorAll('#hm-axis span')].map((e) => Number(e.dataset.tick));
		return ids.every((id, i) => id >= Number(h.firstTick) && id <= Number(h.lastTick) && (i === 0 || id > ids[i - 1])) ? '' : ids.join(','); })()`); bad != "" {
		t.Fatalf("axis labels of ticks %s, not of the columns %s left to right", bad, evalString(t, ctx, `document.getElementById('heatmap').dataset.firstTick`))
	}
	waitFor(t, ctx, time.Second, "axis labels apart", axesApart)
	// Hover: the tick id and its time, on the heat map and on the timing chart.
	if err := chromedp.Do(ctx, pointAtCell(100, 2, false)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "heat map tooltip with the tick and its time", `(() => { const t = document.getElementById('tooltip');
		return !t.hidden && /^tick \d+ · /.test(t.textContent) && /started\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}/.test(t.textContent); })()`)
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		pos, err := chromedp.Evaluate[[]float64](`(() => { const c = document.getElementById('timing'); c.scrollIntoView();
			const r = c.getBoundingClientRect(); return [r.left + r.width * 0.75, r.top + r.height / 2]; })()`)(ctx, tg)
		if err != nil {
			return err
		}
		_, err = chromedp.MouseEvent("mouseMoved", pos[0], pos[1])(ctx, tg)
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "timing tooltip with the tick and its time", `(() => { const t = document.getElementById('tooltip');
		return !t.hidden && /^tick \d+started/.test(t.textContent) && t.textContent.includes('start lag'); })()`)
	if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", 1, 1)); err != nil {
		t.Fatal(err)
	}
}

// eventItem is the CSS selector of the timeline's item of kind at tick.
func eventItem(kind string, tick uint64) string {
	return fmt.Sprintf(`#events li[data-kind=%q][data-tick="%d"]`, kind, tick)
}

func viewTimeline(t *testing.T, ctx context.Context, entered, opened uint64) {
	waitFor(t, ctx, 10*time.Second, "the emergency and the breaker on the timeline", fmt.Sprintf(`(() => {
		const em = document.querySelector(%q), br = document.querySelector(%q);
		return document.getElementById('ev-source').textContent === 'recorded' && !!em && !!br &&
			em.textContent.includes('emergency entered: guard') && br.textContent.includes('breaker guard: closed → open'); })()`,
		eventItem("emergency_entered", entered), eventItem("breaker", opened)))
	// The operator's actions say who acted (the token's fingerprint), the step ticks are not shown.
	text := evalString(t, ctx, `document.getElementById('events').textContent`)
	if !strings.Contains(text, "POST /modules/{name}/faults: 200 (/modules/guard/faults)") || !strings.Contains(text, "sha256:") ||
		!strings.Contains(text, "emergency ended") || strings.Contains(text, "POST /ticks") {
		t.Fatalf("timeline = %q", text)
	}
	if first, _ := strconv.ParseUint(evalString(t, ctx, `document.getElementById('heatmap').dataset.firstTick`), 10, 64); first <= entered {
		t.Fatalf("the heat map already shows tick %d (from %d): the click would prove nothing", entered, first)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(eventItem("emergency_entered", entered)+" button"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "heat map moved to the emergency's tick", fmt.Sprintf(`(() => {
		const h = document.getElementById('heatmap').dataset;
		return h.selected === '%[1]d' && Number(h.firstTick) <= %[1]d && Number(h.lastTick) >= %[1]d &&
			!document.getElementById('hm-sel').hidden && document.getElementById('hm-range').textContent.includes('paused'); })()`, entered))
	waitFor(t, ctx, time.Second, "the selection in the URL", fmt.Sprintf(`location.hash.includes('tick=%d') && location.hash.includes('end=')`, entered))
}

// viewState is the JavaScript expression of what a view shows, to compare two tabs.
const viewState = `JSON.stringify({hash: location.hash, first: document.getElementById('heatmap').dataset.firstTick,
	last: document.getElementById('heatmap').dataset.lastTick, selected: document.getElementById('heatmap').dataset.selected,
	columns: document.getElementById('heatmap').dataset.columns,
	filter: ['severity', 'module', 'status'].map((k) => document.getElementById('f-' + k).value).join(','),
	module: document.getElementById('module-view').hidden ? '' : document.getElementById('mv-title').textContent,
	dialog: document.getElementById('tick-dialog').open ? document.getElementById('td-title').textContent : ''})`

// sameViewInNewTab opens the page's URL in a new tab and waits until it shows the view
// of the tab ctx.
func sameViewInNewTab(t *testing.T, ctx context.Context) {
	t.Helper()
	want := evalString(t, ctx, viewState)
	url := evalString(t, ctx, `location.href`)
	if !strings.Contains(url, "#") {
		t.Fatalf("the URL %q carries no view", url)
	}
	tab := openTabs(t, ctx, url, 1)[0]
	waitFor(t, tab, 10*time.Second, "the same view in a new tab: "+want, viewState+` === `+strconv.Quote(want))
}

// setSelect sets a select of the page and fires its change event, as a user's choice does.
func setSelect(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.getElementById(%q);
		s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); })()`, id, value))); err != nil {
		t.Fatal(err)
	}
}

func viewFilter(t *testing.T, ctx context.Context, d *daemon) {
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("hm-live"))); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Ticks []struct {
			TickID uint64 `json:"tick_id"`
		} `json:"ticks"`
	}
	if st := d.do("GET", "/ticks?status=failed&limit=200", "", &page); st != http.StatusOK || len(page.Ticks) == 0 {
		t.Fatalf("GET /ticks?status=failed = %d with %d ticks", st, len(page.Ticks))
	}
	setSelect(t, ctx, "f-status", "failed")
	n := len(page.Ticks)
	waitFor(t, ctx, 5*time.Second, fmt.Sprintf("the heat map narrowed to the %d failed ticks", n), fmt.Sprintf(`(() => {
		const h = document.getElementById('heatmap').dataset;
		return h.columns === '%d' && h.firstTick === '%d' && h.lastTick === '%d' && location.hash.includes('status=failed'); })()`,
		n, page.Ticks[n-1].TickID, page.Ticks[0].TickID))
	// Every column is one of the search's ticks.
	cols := evalString(t, ctx, `(() => { const h = document.getElementById('heatmap');
		return String(h.dataset.columns) + ' ' + document.getElementById('hm-range').textContent; })()`)
	if !strings.Contains(cols, fmt.Sprintf("%d matching ticks", n)) {
		t.Fatalf("heat map range = %q", cols)
	}
	// A new failed tick appears (the search is asked again as ticks come); a passing one does not.
	if st := d.admin("POST", "/modules/camera/faults", `{"fail_rate": 1}`, nil); st != http.StatusOK {
		t.Fatalf("inject = %d", st)
	}
	failed := d.stepTick()
	if st := d.admin("POST", "/modules/camera/faults", `{"reset": true}`, nil); st != http.StatusOK {
		t.Fatalf("restore = %d", st)
	}
	d.stepTick()
	waitFor(t, ctx, 5*time.Second, "the new failed tick in the filtered heat map", heatmapIs(n+1, failed))
}

func viewFilteredModuleLink(t *testing.T, ctx context.Context) {
	setSelect(t, ctx, "f-module", "guard")
	waitFor(t, ctx, 5*time.Second, "module filter", `location.hash.includes('module=guard') && document.getElementById('f-state').textContent.includes('found')`)
	// The module's view: its last statuses, latencies and served sources.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#hm-labels [data-module="camera"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "camera's view", `(() => { const v = document.getElementById('module-view');
		return !v.hidden && document.getElementById('mv-title').textContent === 'Module camera' &&
			document.querySelectorAll('#mv-strip span').length > 0 && document.getElementById('mv-stats').textContent.includes('latency p50') &&
			/served .*live \d+/.test(document.getElementById('mv-stats').textContent) &&
			document.querySelector('#mv-lines tbody').textContent.includes('failed') && location.hash.includes('mod=camera'); })()`)
	sameViewInNewTab(t, ctx)
	if _, err := chromedp.Call(ctx, page.BringToFront, struct{}{}); err != nil {
		t.Fatal(err)
	}
	// Back to the unfiltered live view for the next tests.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("f-clear")), chromedp.Click(chromedp.ID("mv-close"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "unfiltered", `document.getElementById('heatmap').dataset.columns === '200' && !location.hash.includes('status=')`)
}

// viewTimeWindow opens a link whose filter is a time window (since, until: RFC 3339, as
// the API takes them) around one failed tick: the heat map shows that tick alone, and
// the window's inputs show it in local time.
func viewTimeWindow(t *testing.T, ctx context.Context, d *daemon, id uint64) {
	var s struct {
		StartedAt time.Time `json:"started_at"`
	}
	if st := d.do("GET", fmt.Sprintf("/ticks/%d", id), "", &s); st != http.StatusOK {
		t.Fatalf("GET /ticks/%d = %d", id, st)
	}
	since, until := s.StartedAt, s.StartedAt.Add(time.Microsecond) // until is exclusive
	url := fmt.Sprintf("%s/#status=failed&since=%s&until=%s", evalString(t, ctx, `location.origin`),
		since.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
	tab := openTabs(t, ctx, url, 1)[0]
	waitFor(t, tab, 10*time.Second, "the window's one failed tick", heatmapIs(1, id)+` &&
		document.getElementById('f-since').value !== '' && document.getElementById('f-until').value !== '' &&
		document.getElementById('f-status').value === 'failed'`)
	// A window that ends before it starts is the API's error, said beside the filters.
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](`(() => { const u = document.getElementById('f-until');
		u.value = '2000-01-01T00:00:00'; u.dispatchEvent(new Event('change', {bubbles: true})); })()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tab, 5*time.Second, "the API's error", `document.getElementById('f-state').textContent === 'search failed: until must be after since'`)
}

// rowOf returns the heat map row of module name.
func rowOf(t *testing.T, ctx context.Context, name string) int {
	t.Helper()
	n, err := strconv.Atoi(evalString(t, ctx, fmt.Sprintf(`String([...document.getElementById('hm-labels').children].findIndex((e) => e.dataset.module === %q))`, name)))
	if err != nil || n < 0 {
		t.Fatalf("no heat map row for %s", name)
	}
	return n
}

func viewIdle(t *testing.T, ctx context.Context, d *daemon) {
	const name = "emergency_stop_controller"
	id := d.stepTick()
	waitFor(t, ctx, 5*time.Second, "the newest tick", heatmapIs(200, id))
	hoverUntil(t, ctx, 199, name, "idle in the tooltip", fmt.Sprintf(`(() => { const t = document.getElementById('tooltip');
		return !t.hidden && t.textContent.includes('tick %d · %s') && t.textContent.includes('idle: emergency-only, not in emergency mode'); })()`, id, name))
	if tip := evalString(t, ctx, `document.getElementById('tooltip').textContent`); strings.Contains(tip, "skipped") || strings.Contains(tip, "from none") || strings.Contains(tip, "age 0 ms") {
		t.Fatalf("tooltip = %q", tip)
	}
	// The camera's breaker is open (its fault in Filter): it serves its last good value, or
	// nothing once that expired, with the age of what it had.
	hoverUntil(t, ctx, 199, "camera", "camera's tooltip", `/camera\.result: (last good, age \d|nothing \(its last value expired, age \d)/.test(document.getElementById('tooltip').textContent)`)
	// The blackboard: its key (written in the emergency, expired since) is idle, not expired.
	waitFor(t, ctx, 5*time.Second, "idle key", fmt.Sprintf(`(() => { const r = document.querySelector('#blackboard tr[data-key="%s.result"]');
		return !!r && r.textContent.includes('idle') && !r.textContent.includes('expired') && !r.querySelector('.src-none'); })()`, name))
	if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", 1, 1)); err != nil {
		t.Fatal(err)
	}
}

// viewDialogKeys opens, by its URL, the dialog of the tick with the most degraded keys
// near the emergency, on a phone's width: the row of degraded keys is whole.
func viewDialogKeys(t *testing.T, ctx context.Context, d *daemon, from uint64) {
	var best fullSummary
	for id := from; id < from+5; id++ {
		var s fullSummary
		if d.do("GET", fmt.Sprintf("/ticks/%d", id), "", &s) == http.StatusOK && len(s.DegradedKeys) > len(best.DegradedKeys) {
			best = s
		}
	}
	if len(best.DegradedKeys) == 0 {
		t.Fatal("no tick with degraded keys near the emergency")
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = chromedp.Do(ctx, chromedp.EmulateReset()) }()
	tab := openTabs(t, ctx, fmt.Sprintf("%s/#tick=%d&details=1", evalString(t, ctx, `location.origin`), best.TickID), 1)[0]
	if err := chromedp.Do(tab, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(best.DegradedKeys, ", ")
	waitFor(t, tab, 10*time.Second, "the tick's dialog, opened by its URL", fmt.Sprintf(`document.getElementById('tick-dialog').open &&
		document.getElementById('td-title').textContent === 'Tick %d'`, best.TickID))
	waitFor(t, tab, 5*time.Second, "degraded keys whole: "+want, fmt.Sprintf(`(() => {
		const th = [...document.querySelectorAll('#td-body .td-head th')].find((e) => e.textContent === 'degraded keys');
		const td = th && th.nextElementSibling;
		if (!td || td.textContent !== %q) return false;
		const d = document.getElementById('tick-dialog').getBoundingClientRect(), r = td.getBoundingClientRect();
		return td.scrollWidth <= td.clientWidth + 1 && r.right <= d.right + 0.5 && r.left >= d.left - 0.5; })()`, want))
}

// viewPhone checks a 390×844 phone: no module name of the heat map is cut without its
// title and a tap that opens its view (which names it whole), and the axes' labels
// neither overlap each other nor the lines.
func viewPhone(t *testing.T, ctx context.Context) {
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = chromedp.Do(ctx, chromedp.EmulateReset()) }()
	waitFor(t, ctx, 5*time.Second, "a phone's layout", `document.documentElement.scrollWidth <= window.innerWidth &&
		document.getElementById('heatmap').clientWidth <= window.innerWidth && Number(document.getElementById('heatmap').dataset.columns) > 0`)
	cut := evalString(t, ctx, `[...document.querySelectorAll('#hm-labels [data-module]')]
		.filter((e) => e.scrollWidth > e.clientWidth).map((e) => e.dataset.module + (e.title === e.dataset.module ? '' : ' (no title)')).join(',')`)
	if cut == "" {
		t.Fatal("no module name is cut at 390 px: the test checks nothing (its module names are too short)")
	}
	for name := range strings.SplitSeq(cut, ",") {
		if strings.HasSuffix(name, "(no title)") {
			t.Fatalf("%s is cut without its whole name in its title", name)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#hm-labels [data-module=%q]`, name)))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, 5*time.Second, name+"'s view on tap", fmt.Sprintf(`(() => { const v = document.getElementById('module-view'), h = document.getElementById('mv-title');
			return !v.hidden && h.textContent === 'Module %s' && h.scrollWidth <= h.clientWidth + 1; })()`, name))
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("mv-close"))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, 5*time.Second, "axis labels apart on a phone", axesApart)
	// The other names of modules (tables, the timeline) wrap or scroll: none is cut.
	if hidden := evalString(t, ctx, `[...document.querySelectorAll('td, .ev-text')].filter((e) => {
		const s = getComputedStyle(e); return s.overflow === 'hidden' && e.scrollWidth > e.clientWidth; }).map((e) => e.textContent).join(',')`); hidden != "" {
		t.Fatalf("cut text: %s", hidden)
	}
}

// hoverUntil points at the heat map's cell of module in column col until the page meets the
// JavaScript condition js, for at most 5 s. The pointer is moved off the heat map and back
// each round: a layout change after the page scrolled the heat map into view (the
// timeline filling, a redraw) can move the cell away from where the pointer landed, and a
// pointer that does not move raises no new tooltip.
func hoverUntil(t *testing.T, ctx context.Context, col int, module, what, js string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", 1, 1)); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, pointAtCell(col, rowOf(t, ctx, module), false)); err != nil {
			t.Fatal(err)
		}
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(500*time.Millisecond), chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s (%v); page: %s", what, err, pageState(ctx))
		}
	}
}
