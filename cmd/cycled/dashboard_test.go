package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// dashboardConfig is a step-mode daemon with an admin token: a safety module, and a
// perception module behind a named breaker that opens on one failure and stays open for
// a minute (time for a countdown to be seen running).
const dashboardConfig = `
cycle: {period: 0}
emergency: {recover_after: 2}
breakers:
  camera-link: {failure_threshold: 1, cooldown: 60s}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    ttl: 1s
    builtin: {value: 1}
  - name: camera
    tier: perception
    breaker: camera-link
    builtin: {value: 2}
http: {addr: "%s", admin_token: s3cret}
`

// freeAddr returns a loopback address with a port free now, so that a daemon can be
// restarted on the same address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stepTo runs a step tick and returns its id.
func (d *daemon) stepTick() uint64 {
	d.t.Helper()
	return d.tick().TickID
}

// TestDashboard drives the dashboard in headless Chromium against the daemon binary: the
// page loads clean, the heat map gains one column per tick (over the stream and over the
// long-poll fallback), an injected safety fault raises the emergency banner within two
// ticks and recovery lowers it, a breaker's cooldown counts down, admin actions ask for the
// token and show the API's 401 message, and a killed and restarted daemon shows
// "disconnected" and then live data again.
func TestDashboard(t *testing.T) {
	addr := freeAddr(t)
	cfg := write(t, "cycled.yaml", fmt.Sprintf(dashboardConfig, addr))
	d := start(t, nil, "--config", cfg)
	ctx := newBrowser(t)
	console := watchConsole(t, ctx)
	for range 3 { // history from before the page opened is loaded too
		d.stepTick()
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "live", `document.getElementById('conn').dataset.state === 'live'`)
	waitFor(t, ctx, 5*time.Second, "the 3 earlier ticks", `document.getElementById('heatmap').dataset.columns === '3'`)

	t.Run("ColumnPerTick", func(t *testing.T) { dashColumns(t, ctx, d) })
	t.Run("LongPollFallback", func(t *testing.T) { dashLongPoll(t, ctx, d) })
	t.Run("EmergencyBanner", func(t *testing.T) { dashEmergency(t, ctx, d) })
	t.Run("StreamTimeline", func(t *testing.T) { dashStreamTimeline(t, ctx) })
	t.Run("StreamTimelineReload", func(t *testing.T) { dashStreamReload(t, ctx, d, cfg, addr) })
	t.Run("BreakerCountdown", func(t *testing.T) { dashCountdown(t, ctx, d) })
	t.Run("ManyTabs", func(t *testing.T) { dashManyTabs(t, ctx, d) })
	t.Run("HiddenTab", func(t *testing.T) { dashHiddenTab(t, ctx, d) })
	t.Run("ShiftedHeatmap", func(t *testing.T) { dashShiftedHeatmap(t, ctx, d) })
	if errs := console.list(); len(errs) > 0 {
		t.Fatalf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	t.Run("TokenPrompt", func(t *testing.T) { dashToken(t, ctx, d) })
	t.Run("PhoneLayout", func(t *testing.T) { dashPhone(t, ctx) })
	t.Run("Reconnect", func(t *testing.T) { dashReconnect(t, ctx, d, cfg) })
}

// heatmapIs is the JavaScript condition: the heat map shows n columns ending at tick last.
func heatmapIs(n int, last uint64) string {
	return fmt.Sprintf(`(() => { const h = document.getElementById('heatmap');
		return h.dataset.columns === '%d' && h.dataset.lastTick === '%d'; })()`, n, last)
}

func dashColumns(t *testing.T, ctx context.Context, d *daemon) {
	n := 3
	for range 5 {
		id := d.stepTick()
		n++
		waitFor(t, ctx, 5*time.Second, fmt.Sprintf("column of tick %d", id), heatmapIs(n, id))
	}
	// Hovering a module's cell shows its line; clicking opens the tick's summary.
	if err := chromedp.Do(ctx, pointAtCell(n-1, 1, false)); err != nil { // the newest tick, the first module (guard)
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "tooltip", `(() => { const t = document.getElementById('tooltip');
		return !t.hidden && t.textContent.includes('guard') && t.textContent.includes('attempts') && t.textContent.includes('served'); })()`)
	if err := chromedp.Do(ctx, pointAtCell(n-1, 1, true)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "tick dialog", fmt.Sprintf(`document.getElementById('tick-dialog').open &&
		document.getElementById('td-title').textContent === 'Tick %d' && document.getElementById('td-body').textContent.includes('"schema"')`, n))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("td-close"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "tick dialog closed", `!document.getElementById('tick-dialog').open`)
}

// pointAtCell moves the pointer over the cell of column col, row row of the heat map, and
// clicks it if click is set.
func pointAtCell(col, row int, click bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		js := fmt.Sprintf(`(() => { const c = document.getElementById('heatmap'); c.scrollIntoView(); const r = c.getBoundingClientRect();
			const w = Math.max(2, c.clientWidth / 200);
			return [r.left + %d * w + w / 2, r.top + %d * 14 + 7]; })()`, col, row)
		pos, err := chromedp.Evaluate[[]float64](js)(ctx, tg)
		if err != nil {
			return err
		}
		if click {
			_, err = chromedp.MouseClickXY(pos[0], pos[1])(ctx, tg)
		} else {
			_, err = chromedp.MouseEvent("mouseMoved", pos[0], pos[1])(ctx, tg)
		}
		return err
	})
}

func dashLongPoll(t *testing.T, ctx context.Context, d *daemon) {
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	console := watchConsole(t, tab)
	if err := chromedp.Do(tab, chromedp.Navigate(d.base+"/?transport=poll")); err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(evalString(t, ctx, `document.getElementById('heatmap').dataset.columns`))
	waitFor(t, tab, 5*time.Second, "history over polling", fmt.Sprintf(`document.getElementById('heatmap').dataset.columns === '%d'`, n))
	for range 2 {
		id := d.stepTick()
		n++
		waitFor(t, tab, 5*time.Second, fmt.Sprintf("polled column of tick %d", id), heatmapIs(n, id))
		waitFor(t, ctx, 5*time.Second, fmt.Sprintf("streamed column of tick %d", id), heatmapIs(n, id))
	}
	waitFor(t, tab, time.Second, "polling status", `document.getElementById('conn').dataset.state === 'polling'`)
	if errs := console.list(); len(errs) > 0 {
		t.Fatalf("console errors (polling tab):\n%s", strings.Join(errs, "\n"))
	}
}

// dashManyTabs opens 7 more dashboards (8 in all, more than a browser's 6 connections to
// a host): each shows every tick, over the one stream that the tabs share.
func dashManyTabs(t *testing.T, ctx context.Context, d *daemon) {
	n, _ := strconv.Atoi(evalString(t, ctx, `document.getElementById('heatmap').dataset.columns`))
	tabs := openTabs(t, ctx, d.base+"/", 7)
	id := d.stepTick()
	for i, tab := range append(tabs, ctx) {
		waitFor(t, tab, 10*time.Second, fmt.Sprintf("tab %d live with tick %d", i, id),
			`document.getElementById('conn').dataset.state === 'live' && `+heatmapIs(n+1, id))
	}
	var h struct {
		Subscribers int `json:"stream_subscribers"`
	}
	d.do("GET", "/healthz", "", &h)
	if h.Subscribers != 1 {
		t.Fatalf("%d stream subscribers for 8 tabs, want 1 shared stream", h.Subscribers)
	}
}

// panelRequests counts the page's requests for the polled panels so far.
const panelRequests = `performance.getEntriesByType('resource').filter((e) => /\/(breakers|blackboard)$/.test(e.name)).length`

// dashHiddenTab opens a second dashboard as a tab of the first one's window and puts the
// first in front: the hidden tab polls nothing for several poll periods while ticks
// arrive, and when it is shown it draws every tick it missed and polls again.
func dashHiddenTab(t *testing.T, ctx context.Context, d *daemon) {
	n, _ := strconv.Atoi(evalString(t, ctx, `document.getElementById('heatmap').dataset.columns`))
	last, _ := strconv.ParseUint(evalString(t, ctx, `document.getElementById('heatmap').dataset.lastTick`), 10, 64)
	tab, cancel := chromedp.NewContext(ctx, chromedp.WithNewWindow(false))
	defer func() {
		cancel()
		_, _ = chromedp.Call(ctx, page.BringToFront, struct{}{})
	}()
	if err := chromedp.Do(tab, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tab, 10*time.Second, "second tab live", `document.getElementById('conn').dataset.state === 'live' && `+heatmapIs(n, last))
	if _, err := chromedp.Call(ctx, page.BringToFront, struct{}{}); err != nil {
		t.Fatal(err)
	}
	hidden := func(js string) { // polled by timer: a hidden page gets no animation frames
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("hidden tab: %s: %v", js, err)
		}
	}
	hidden(`document.hidden`)
	// A request sent just before the tab was hidden may end after: count from a second on.
	hidden(`(window.hiddenAt ??= performance.now()) > 0 && performance.now() - window.hiddenAt > 1200`)
	before := evalString(t, tab, `String(`+panelRequests+`)`)
	hidden(`(window.t0 = performance.now()) > 0`)
	var id uint64
	for range 3 {
		id = d.stepTick()
	}
	waitFor(t, ctx, 5*time.Second, "front tab shows the new ticks", heatmapIs(n+3, id))
	hidden(`performance.now() - window.t0 > 2500`) // two and a half poll periods
	if after := evalString(t, tab, `String(`+panelRequests+`)`); after != before {
		t.Fatalf("a hidden tab polled the panels: %s requests before, %s after", before, after)
	}
	if _, err := chromedp.Call(tab, page.BringToFront, struct{}{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tab, 5*time.Second, "shown tab catches up", heatmapIs(n+3, id)+` && `+panelRequests+` > `+before)
}

// dashShiftedHeatmap fills the heat map past its 200 columns in steps, so that the
// canvas is shifted and drawn by new columns only, and checks that its pixels are those
// of the same ticks drawn whole (a change of colour scheme redraws it whole).
func dashShiftedHeatmap(t *testing.T, ctx context.Context, d *daemon) {
	n, _ := strconv.Atoi(evalString(t, ctx, `document.getElementById('heatmap').dataset.columns`))
	for n < 230 {
		var id uint64
		for range 10 {
			id = d.stepTick()
			n++
		}
		waitFor(t, ctx, 5*time.Second, fmt.Sprintf("column of tick %d", id), heatmapIs(min(n, 200), id))
	}
	const pixels = `document.getElementById('heatmap').toDataURL()`
	shifted := evalString(t, ctx, pixels)
	scheme := func(v string) {
		t.Helper()
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	scheme("dark")
	waitFor(t, ctx, 5*time.Second, "heat map redrawn dark", pixels+` !== `+strconv.Quote(shifted))
	scheme("light")
	waitFor(t, ctx, 5*time.Second, "heat map redrawn whole as drawn shifted", pixels+` === `+strconv.Quote(shifted))
}

// openTabs opens n more tabs on url, in parallel (a tab takes seconds to open on a busy
// machine), and returns their contexts; they close with the test.
func openTabs(t testing.TB, browser context.Context, url string, n int) []context.Context {
	t.Helper()
	tabs := make([]context.Context, n)
	errs := make(chan error, n)
	for i := range tabs {
		tab, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		tabs[i] = tab
		go func() { errs <- chromedp.Do(tab, chromedp.Navigate(url)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("open a tab: %v", err)
		}
	}
	return tabs
}

const bannerShown = `!document.getElementById('emergency').hidden`

func dashEmergency(t *testing.T, ctx context.Context, d *daemon) {
	if st := d.admin("POST", "/modules/guard/faults", `{"fail_rate": 1}`, nil); st != http.StatusOK {
		t.Fatalf("inject = %d", st)
	}
	s := d.tick()
	if !s.EmergencyMode {
		t.Fatalf("tick %d after a failing safety module is not in emergency mode", s.TickID)
	}
	// The banner must be up before any further tick (within two ticks of the fault: the
	// failing one and the next).
	waitFor(t, ctx, 5*time.Second, "emergency banner", bannerShown+
		fmt.Sprintf(` && document.getElementById('emergency').dataset.sinceTick === '%d'`, s.TickID))
	if text := evalString(t, ctx, `document.getElementById('emergency').textContent`); !strings.Contains(text, "guard") ||
		!strings.Contains(text, fmt.Sprintf("since tick %d", s.TickID)) || !strings.Contains(text, "healthy ticks 0/2") {
		t.Fatalf("banner = %q", text)
	}
	if st := d.admin("POST", "/modules/guard/faults", `{"reset": true}`, nil); st != http.StatusOK {
		t.Fatalf("restore = %d", st)
	}
	for i := 0; ; i++ {
		if s = d.tick(); !s.EmergencyMode {
			break
		}
		if i == 5 {
			t.Fatalf("still in emergency mode at tick %d", s.TickID)
		}
		waitFor(t, ctx, 5*time.Second, "healthy ticks", fmt.Sprintf(`document.getElementById('em-detail').textContent.includes('healthy ticks %d/2')`, i+1))
	}
	waitFor(t, ctx, 5*time.Second, "banner gone after recovery", `document.getElementById('emergency').hidden && !document.getElementById('em-last').hidden`)
}

// dashStreamTimeline: without the recorder, the timeline shows the stream's events since
// the page opened: the emergency of dashEmergency, entered and ended.
func dashStreamTimeline(t *testing.T, ctx context.Context) {
	waitFor(t, ctx, 5*time.Second, "the emergency on the timeline", `(() => {
		const en = document.querySelector('#events li[data-kind="emergency_entered"]'), left = document.querySelector('#events li[data-kind="emergency_left"]');
		return document.getElementById('ev-source').textContent.includes('no recorder') && !!en && !!left &&
			en.textContent.includes('emergency entered: guard') && Number(left.dataset.tick) > Number(en.dataset.tick); })()`)
}

// dashStreamReload: without the recorder, a reload that adds a module shows on the
// timeline as the module added, at the first tick of the new generation.
func dashStreamReload(t *testing.T, ctx context.Context, d *daemon, cfg, addr string) {
	body := strings.Replace(fmt.Sprintf(dashboardConfig, addr), "http: {",
		"  - name: lidar\n    tier: perception\n    builtin: {value: 3}\nhttp: {", 1)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := d.admin("POST", "/config/reload", "", nil); st != http.StatusOK {
		t.Fatalf("reload = %d", st)
	}
	id := d.stepTick()
	waitFor(t, ctx, 5*time.Second, "the added module on the timeline", fmt.Sprintf(`(() => {
		const e = document.querySelector('#events li[data-kind="module_added"][data-tick="%d"]');
		return !!e && e.textContent.includes('module lidar added in perception'); })()`, id))
}

const countdownJS = `(() => { const td = document.querySelector('tr[data-breaker="camera-link"] td.countdown');
	return td && td.dataset.remainingMs ? Number(td.dataset.remainingMs) : -1; })()`

func dashCountdown(t *testing.T, ctx context.Context, d *daemon) {
	if st := d.admin("POST", "/modules/camera/faults", `{"fail_rate": 1}`, nil); st != http.StatusOK {
		t.Fatalf("inject = %d", st)
	}
	d.tick()
	if st := d.admin("POST", "/modules/camera/faults", `{"reset": true}`, nil); st != http.StatusOK {
		t.Fatalf("restore = %d", st)
	}
	waitFor(t, ctx, 5*time.Second, "open breaker with a countdown", countdownJS+` > 0`)
	first, err := chromedp.Run(ctx, chromedp.Evaluate[float64](countdownJS))
	if err != nil {
		t.Fatal(err)
	}
	if first > 60000 || first < 50000 {
		t.Fatalf("countdown starts at %v ms, want about 60 s", first)
	}
	// Running: it goes down by a second, shown to a tenth of a second.
	waitFor(t, ctx, 5*time.Second, "countdown running", fmt.Sprintf(`%s > 0 && %s < %f`, countdownJS, countdownJS, first-1000))
	text := evalString(t, ctx, `document.querySelector('tr[data-breaker="camera-link"]').textContent`)
	if !strings.Contains(text, "open") || !strings.Contains(text, " s") {
		t.Fatalf("breaker row = %q", text)
	}
}

func dashToken(t *testing.T, ctx context.Context, d *daemon) {
	const dialogOpen = `document.getElementById('token-dialog').open`
	const resetBtn = `tr[data-breaker="camera-link"] button`
	submit := func(token string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("tk-input"), token), chromedp.Click(chromedp.ID("tk-ok"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(resetBtn))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "token prompt", dialogOpen+` && document.getElementById('tk-error').textContent.includes('require Authorization')`)
	submit("wrong")
	waitFor(t, ctx, 5*time.Second, "the 401 message", dialogOpen+` && document.getElementById('tk-error').textContent.includes('the admin token is wrong (401 unauthorized)')`)
	var b struct {
		Breakers []struct{ Name, State string }
	}
	d.do("GET", "/breakers", "", &b)
	for _, br := range b.Breakers {
		if br.Name == "camera-link" && br.State != "open" {
			t.Fatalf("the breaker was reset without the token: %s", br.State)
		}
	}
	submit("s3cret")
	waitFor(t, ctx, 5*time.Second, "reset done", `!document.getElementById('token-dialog').open && document.getElementById('message').dataset.kind === 'ok'`)
	waitFor(t, ctx, 5*time.Second, "breaker closed", `document.querySelector('tr[data-breaker="camera-link"] .state').textContent === 'closed'`)
	if v := evalString(t, ctx, `sessionStorage.getItem('cycled.adminToken') + '|' + (localStorage.getItem('cycled.adminToken') || '')`); v != "s3cret|" {
		t.Fatalf("token storage = %q, want it in sessionStorage only", v)
	}
}

func dashReconnect(t *testing.T, ctx context.Context, d *daemon, cfg string) {
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	waitFor(t, ctx, 10*time.Second, "disconnected", `document.getElementById('conn').dataset.state === 'disconnected' &&
		document.getElementById('conn').textContent.includes('disconnected')`)
	d2 := start(t, nil, "--config", cfg)
	waitFor(t, ctx, 15*time.Second, "live again", `document.getElementById('conn').dataset.state === 'live'`)
	id := d2.stepTick()
	waitFor(t, ctx, 5*time.Second, "the new daemon's tick", heatmapIs(1, id))
}

// dashPhone checks the layout on a phone's viewport: nothing wider than the screen, the
// heat map still drawn.
func dashPhone(t *testing.T, ctx context.Context) {
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = chromedp.Do(ctx, chromedp.EmulateReset()) }()
	waitFor(t, ctx, 5*time.Second, "a phone's layout", `document.documentElement.scrollWidth <= window.innerWidth &&
		document.getElementById('heatmap').clientWidth <= window.innerWidth && Number(document.getElementById('heatmap').dataset.columns) > 0`)
}

// TestDashboardScreenshot writes the screenshots of docs/ that the README shows, on the
// embedded demo configuration after 20 s of ticks: docs/dashboard.png (a desktop, with a
// tooltip), docs/dashboard-phone.png (390×844) and
// docs/dashboard-emergency.png (a failing safety module: the banner and the timeline).
// It runs only with UPDATE_SCREENSHOT=1; each file must stay under 1 MiB.
func TestDashboardScreenshot(t *testing.T) {
	if os.Getenv("UPDATE_SCREENSHOT") != "1" {
		t.Skip("set UPDATE_SCREENSHOT=1 to rewrite docs/dashboard*.png")
	}
	d := start(t, []string{"CYCLED_HTTP_ADDR=127.0.0.1:0", "CYCLED_STATE_DIR=" + t.TempDir()})
	ctx := newBrowser(t)
	save := func(name string, png []byte) {
		t.Helper()
		if len(png) >= 1<<20 {
			t.Fatalf("%s is %d bytes, not under 1 MiB", name, len(png))
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1400), chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 60*time.Second, "200 ticks", `document.getElementById('heatmap').dataset.columns === '200' &&
		document.querySelectorAll('#events li[data-kind]').length > 0`)
	if err := chromedp.Do(ctx, pointAtCell(100, 5, false)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	save("dashboard.png", png)

	if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", 1, 1),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "the phone's columns", `Number(document.getElementById('heatmap').dataset.columns) < 200`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)); err != nil {
		t.Fatal(err)
	}
	if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
		t.Fatal(err)
	}
	save("dashboard-phone.png", png)

	if err := chromedp.Do(ctx, chromedp.EmulateReset(), chromedp.EmulateViewport(1280, 1000)); err != nil {
		t.Fatal(err)
	}
	if st := d.do("POST", "/modules/collision_guard/faults", `{"fail_rate": 1}`, nil); st != http.StatusOK {
		t.Fatalf("inject = %d", st)
	}
	waitFor(t, ctx, 10*time.Second, "emergency on the banner, the timeline and the blackboard", bannerShown+
		` && !!document.querySelector('#events li[data-kind="emergency_entered"]') &&
		document.querySelector('#blackboard tr[data-key="safe_stop.result"]').textContent.includes('live')`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)); err != nil {
		t.Fatal(err)
	}
	if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
		t.Fatal(err)
	}
	save("dashboard-emergency.png", png)
}

// TestDashboardNoToken: on a loopback daemon with no admin token, the page's own admin
// requests pass the admin routes' Host and Origin checks without a prompt, and a token
// left in the tab from another daemon is dropped rather than sent (a token-less daemon
// refuses any Authorization header).
func TestDashboardNoToken(t *testing.T) {
	cfg := write(t, "cycled.yaml", strings.Replace(fmt.Sprintf(dashboardConfig, "127.0.0.1:0"), ", admin_token: s3cret", "", 1))
	d := start(t, nil, "--config", cfg)
	ctx := newBrowser(t)
	console := watchConsole(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "live", `document.getElementById('conn').dataset.state === 'live' &&
		document.getElementById('fi-module').options.length > 0`)
	err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('cycled.adminToken', 'from-another-daemon')`),
		chromedp.SetValue(chromedp.ID("fi-module"), "camera"),
		chromedp.SetValue(chromedp.ID("fi-rate"), "1"),
		chromedp.Click(chromedp.ID("fi-apply")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "fault injected", `document.getElementById('message').dataset.kind === 'ok' &&
		!document.getElementById('token-dialog').open && sessionStorage.getItem('cycled.adminToken') === null`)
	var s fullSummary
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK || len(s.Modules) != 3 || s.Modules[2].Name != "camera" || s.Modules[2].Status != "failed" {
		t.Fatalf("tick after the injection: %d %+v", st, s.Modules)
	}
	for _, e := range console.list() {
		if !strings.Contains(e, "401") { // the refused stale token is logged by the browser
			t.Errorf("console error: %s", e)
		}
	}
}
