package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
)

// serve serves h on a loopback port until the returned stop is called.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, BaseContext: func(l net.Listener) context.Context {
		return api.ListenerContext(context.Background(), l)
	}}
	go srv.Serve(ln) //nolint:errcheck // ends at Close
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// load runs conns clients, each on its own keep-alive connection, requesting path in a
// loop for d, and returns requests per second.
func load(base, path string, conns int, d time.Duration) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range conns {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			for time.Now().Before(deadline) {
				res, err := c.Get(base + path)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				n.Add(1)
			}
			c.CloseIdleConnections()
		})
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// httpBench compares GET /ticks/latest of the API (50 modules at 100 Hz, recorder on,
// no read limit) with a handler writing a fixed byte slice of the same size.
func httpBench(reps int, d time.Duration) error {
	dir, err := os.MkdirTemp("", "recbench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rec, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer rec.Close()
	cache, err := api.NewCache(64 << 20)
	if err != nil {
		return err
	}
	defer cache.Close()
	e, err := cycle.New(cycle.Config{Period: 10 * time.Millisecond}, modules(50),
		cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx) //nolint:errcheck // ends with ctx
	defer e.Close()
	for e.Latest() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	apiBase, stopAPI, err := serve(api.New(api.Options{Engine: e, Recorder: rec.Reader, Cache: cache}))
	if err != nil {
		return err
	}
	defer stopAPI()
	body, _ := e.Latest().MarshalJSON()
	fixed := append(body, '\n')
	fixBase, stopFix, err := serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(fixed)))
		_, _ = w.Write(fixed)
	}))
	if err != nil {
		return err
	}
	defer stopFix()
	for rep := range reps {
		var a, f float64
		if rep%2 == 0 {
			f, a = load(fixBase, "/", 64, d), load(apiBase, "/ticks/latest", 64, d)
		} else {
			a, f = load(apiBase, "/ticks/latest", 64, d), load(fixBase, "/", 64, d)
		}
		fmt.Printf("http rep=%d body=%dB latest=%.0f/s fixed=%.0f/s ratio=%.2f\n", rep, len(fixed), a, f, a/f)
	}
	return nil
}

// readBench records 20,000 ticks of 50 modules, then reads 10,000 random old ids (not in
// memory) through the API twice: cold (empty cache) and warm (the same ids again).
func readBench() error {
	dir, err := os.MkdirTemp("", "recbench-read-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rec, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Queue: 1 << 16})
	if err != nil {
		return err
	}
	defer rec.Close()
	e, err := cycle.New(cycle.Config{History: 100}, modules(50),
		cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()))
	if err != nil {
		return err
	}
	defer e.Close()
	const total = 20000
	for range total {
		if _, err := e.Tick(context.Background()); err != nil {
			return err
		}
	}
	for b, _ := rec.Tick(context.Background(), total); b == nil; b, _ = rec.Tick(context.Background(), total) {
		time.Sleep(10 * time.Millisecond)
	}
	cache, err := api.NewCache(64 << 20)
	if err != nil {
		return err
	}
	defer cache.Close()
	base, stop, err := serve(api.New(api.Options{Engine: e, Recorder: rec.Reader, Cache: cache}))
	if err != nil {
		return err
	}
	defer stop()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]uint64, 10000)
	for i := range ids {
		ids[i] = 1 + rng.Uint64N(total-200)
	}
	for _, pass := range []string{"cold", "warm"} {
		t0 := time.Now()
		if err := readIDs(base, ids, 8); err != nil {
			return err
		}
		d := time.Since(t0)
		fmt.Printf("read pass=%s ids=%d conns=8 total=%v per_read=%v reads/s=%.0f dropped=%d\n", pass, len(ids), d.Round(time.Millisecond),
			(d / time.Duration(len(ids))).Round(time.Microsecond), float64(len(ids))/d.Seconds(), rec.Dropped())
	}
	return nil
}

func readIDs(base string, ids []uint64, conns int) error {
	var wg sync.WaitGroup
	var failed atomic.Int64
	for c := range conns {
		wg.Go(func() {
			cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer cl.CloseIdleConnections()
			for i := c; i < len(ids); i += conns {
				res, err := cl.Get(fmt.Sprintf("%s/ticks/%d", base, ids[i]))
				if err != nil || res.StatusCode != 200 {
					failed.Add(1)
					if err == nil {
						res.Body.Close()
					}
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d reads failed", n)
	}
	return nil
}
