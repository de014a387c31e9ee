package api_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

// BenchmarkStreamFanout is the stream's cost per tick: a step-mode engine of five modules
// behind the API, and 0, 1 or 8 Go SSE clients on loopback (as dashboards, without a
// browser); each operation runs one tick and waits until every client has read its event.
// It reports the process's CPU time per tick (cpu-us/tick: the engine, the server and the
// clients, whose reading is the same before and after a change of the server); the
// server's cost per subscriber is the difference from subs=0, divided by the subscribers.
// Results: BENCHMARKS.md, "Micro-benchmarks named in the code".
//
//	go test -run '^$' -bench StreamFanout -benchtime 2000x -count 5 ./api/
func BenchmarkStreamFanout(b *testing.B) {
	for _, subs := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) { benchFanout(b, subs) })
	}
}

func benchFanout(b *testing.B, subs int) {
	cfg := testConfig()
	var mods []cycle.Registration
	for i, tier := range []string{"safety", "work", "work", "work", "work"} {
		mods = append(mods, cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: tier},
			Module: value(map[string]any{"i": i, "ok": true})})
	}
	e, err := cycle.New(cfg, mods)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	srv := httptest.NewUnstartedServer(api.New(api.Options{Engine: e}))
	srv.Config.ConnContext = api.ConnContext
	srv.Start()
	defer srv.Close()
	seen := make(chan uint64, 1024)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range subs {
		ready := make(chan struct{})
		wg.Go(func() { readTicks(ctx, b, srv.URL, ready, seen) })
		<-ready
	}
	tick := func() uint64 {
		s, err := e.Tick(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for range subs {
			for <-seen != s.TickID {
			}
		}
		return s.TickID
	}
	tick() // the first encoding, and connections settled
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		tick()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N), "cpu-us/tick")
	cancel()
	srv.CloseClientConnections()
}

// readTicks reads the stream at url, closes ready once connected, and sends the id of
// every tick event to seen, until ctx ends.
func readTicks(ctx context.Context, b *testing.B, url string, ready chan struct{}, seen chan<- uint64) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/ticks/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Error(err)
		close(ready)
		return
	}
	defer res.Body.Close()
	close(ready)
	br := bufio.NewReaderSize(res.Body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
			_, n, _ := bytes.Cut(bytes.TrimSpace(id), []byte("-"))
			var v uint64
			for _, c := range n {
				v = 10*v + uint64(c-'0')
			}
			seen <- v
		}
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
