package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The dashboard's tests drive the real page in a real headless Chromium against the real
// daemon binary. Chromium comes from the system (Debian: apt-get install chromium); .ci/run
// installs it. Without it the tests skip locally, and fail in CI (CI=true): a CI run that
// skipped them would claim what it did not check.

// chromiumPath returns the browser to run: $CHROMIUM, else the first of the usual names
// found on PATH.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needChromium returns the browser's path, or skips the test (fails it in CI) without one.
func needChromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a browser")
	}
	p := chromiumPath()
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium found (set CHROMIUM or install it: apt-get install chromium); CI must run the browser tests")
		}
		t.Skip("no Chromium found: install it (apt-get install chromium) or set CHROMIUM to run the dashboard's browser tests")
	}
	return p
}

// newBrowser starts a headless Chromium with a fresh profile and returns a context for its
// first tab. The browser ends with the test.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	return newBrowserCtx(t, context.Background())
}

// newBrowserCtx is newBrowser for a browser that ends with parent or with the test,
// whichever is first.
func newBrowserCtx(t testing.TB, parent context.Context) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(needChromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		// Background tabs must keep their timers and frames (the benchmark opens several).
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.WindowSize(1280, 1400),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// consoleErrors records a tab's console errors, uncaught exceptions and error entries of
// the browser log (failed loads, CSP violations).
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
}

// list returns the errors recorded so far.
func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// watchConsole records the console errors of the tab ctx from now on (call it before
// navigating). Its reader ends with the tab's context, before the test ends.
func watchConsole(t testing.TB, ctx context.Context) *consoleErrors {
	t.Helper()
	c := &consoleErrors{}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				c.mu.Lock()
				c.errs = append(c.errs, fmt.Sprintf("%s (%s %s)", m, m.Source, m.URL))
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		<-done
	})
	return c
}

// waitFor polls the JavaScript expression js in the page until it is true, for at most
// timeout; the test fails with what and the page's state otherwise.
func waitFor(t testing.TB, ctx context.Context, timeout time.Duration, what, js string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatalf("%s: not within %s (%v); page: %s", what, timeout, err, pageState(ctx))
	}
}

// pageState describes the dashboard's state for failure messages.
func pageState(ctx context.Context) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({conn: document.getElementById('conn').textContent,
		columns: document.getElementById('heatmap').dataset.columns, last: document.getElementById('heatmap').dataset.lastTick,
		emergency: !document.getElementById('emergency').hidden, message: document.getElementById('message-text').textContent,
		tooltip: document.getElementById('tooltip').hidden ? '(hidden)' : document.getElementById('tooltip').textContent})`))
	return s
}

// evalString evaluates js in the page and returns its string result.
func evalString(t testing.TB, ctx context.Context, js string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return s
}
