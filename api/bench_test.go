package api_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// BenchmarkStartLagUnderHTTPLoad runs the scheduler at 100 Hz for b.N ticks, idle and
// with 64 clients polling /ticks/latest and 16 SSE subscribers (one never reads), and
// reports the tick start lag percentiles. The clients run in the same process and share
// its CPUs, which makes this harsher (and noisier) than an external load generator. Run it
// with a fixed count of ticks, e.g.
//
//	go test -run '^$' -bench StartLag -benchtime 500x ./api/
//
// The cases without "paced" serve without a ReadLimiter (as http.read_limit.rate 0 does);
// "paced" uses the daemon's default limit (1000 requests a second, burst 20).
func BenchmarkStartLagUnderHTTPLoad(b *testing.B) {
	paced := func() *api.ReadLimiter { return api.NewReadLimiter(api.ReadLimit{Rate: 1000, Burst: 20}) }
	b.Run("idle", func(b *testing.B) { benchStartLag(b, false, false, nil) })
	b.Run("64longpollers+16sse", func(b *testing.B) { benchStartLag(b, true, true, nil) })
	b.Run("64tightpollers+16sse", func(b *testing.B) { benchStartLag(b, true, false, nil) })
	b.Run("64longpollers+16sse/paced", func(b *testing.B) { benchStartLag(b, true, true, paced()) })
	b.Run("64tightpollers+16sse/paced", func(b *testing.B) { benchStartLag(b, true, false, paced()) })
}

// benchStartLag measures; longPoll makes the pollers wait for the next tick
// (?wait=&after=) instead of polling in a tight loop; limiter (nil: none) paces reads.
func benchStartLag(b *testing.B, loaded, longPoll bool, limiter *api.ReadLimiter) {
	var (
		mu   sync.Mutex
		lags []float64
	)
	hooks := cycle.Hooks{OnTick: func(s *faultsummary.Summary) {
		mu.Lock()
		lags = append(lags, s.StartLagMs)
		mu.Unlock()
	}}
	cfg := testConfig()
	cfg.Period = 10 * time.Millisecond
	var mods []cycle.Registration
	for i := range 8 {
		tier := "work"
		if i == 0 {
			tier = "safety"
		}
		mods = append(mods, cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: tier},
			Module: value(map[string]any{"i": i, "ok": true})})
	}
	e, err := cycle.New(cfg, mods, cycle.WithHooks(hooks))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Options{Engine: e, ReadLimiter: limiter}))
	srv.Config.ConnContext = api.ConnContext
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if loaded {
		tr := &http.Transport{MaxIdleConnsPerHost: 128}
		client := &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
		for range 64 {
			wg.Go(func() {
				// Pollers behave: If-None-Match (mostly 304s) in a tight loop, or a
				// long-poll for the tick after the last one seen (from the ETag).
				var tag string
				for ctx.Err() == nil {
					url := srv.URL + "/ticks/latest"
					if longPoll {
						id := tag[strings.LastIndexByte(tag, '-')+1:]
						url += "?wait=1s&after=" + strings.Trim(id, `"`)
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
					if !longPoll && tag != "" {
						req.Header.Set("If-None-Match", tag)
					}
					res, err := client.Do(req)
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if t := res.Header.Get("ETag"); t != "" {
						tag = t
					}
				}
			})
		}
		for range 15 {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ticks/stream", nil)
				res, err := client.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			})
		}
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(conn, "GET /ticks/stream HTTP/1.1\r\nHost: cycled\r\n\r\n")
	}

	b.ResetTimer()
	runDone := make(chan struct{})
	runCtx, stopRun := context.WithCancel(context.Background())
	go func() { defer close(runDone); _ = e.Run(runCtx) }()
	for {
		mu.Lock()
		n := len(lags)
		mu.Unlock()
		if n >= b.N+1 {
			break
		}
		_, _ = e.History().Wait(context.Background(), uint64(n))
	}
	stopRun()
	<-runDone
	b.StopTimer()
	cancel()
	srv.CloseClientConnections()
	srv.Close()
	wg.Wait()
	_ = e.Close()
	_ = e.WaitWorkers(context.Background())

	mu.Lock()
	defer mu.Unlock()
	l := slices.Clone(lags[1:]) // the first tick starts at its grid point by construction
	slices.Sort(l)
	pct := func(p float64) float64 { return l[min(len(l)-1, int(p*float64(len(l))))] }
	b.ReportMetric(pct(0.5), "p50_lag_ms")
	b.ReportMetric(pct(0.99), "p99_lag_ms")
	b.ReportMetric(l[len(l)-1], "max_lag_ms")
}

// BenchmarkLatestPacing is the cost of pacing on a request that never waits: GET
// /ticks/latest served in process without a ReadLimiter and with one whose rate is never
// reached, from parallel clients (the limiter's bucket is shared).
func BenchmarkLatestPacing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		limiter *api.ReadLimiter
	}{{"none", nil}, {"paced", api.NewReadLimiter(api.ReadLimit{Rate: 1e12, Burst: 1 << 30})}} {
		b.Run(bc.name, func(b *testing.B) {
			p := newPaceRig(b, bc.limiter)
			p.tick()
			h := p.h
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/ticks/latest", nil)
				for pb.Next() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}
