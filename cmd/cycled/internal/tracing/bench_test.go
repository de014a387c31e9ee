package tracing

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

type trivial struct{}

func (trivial) Run(context.Context, *tiers.Input) (any, error) { return 1, nil }

// benchSummary returns a published summary of a tick of n trivial modules over the five
// seed tiers.
func benchSummary(b *testing.B, n int) *faultsummary.Summary {
	regs := make([]cycle.Registration, n)
	seeds := tiers.SeedTiers()
	for i := range regs {
		regs[i] = cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: seeds[i%len(seeds)].Name}, Module: trivial{}}
	}
	e, err := cycle.New(cycle.Config{Tiers: seeds}, regs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	s, err := e.Tick(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkTraceTick is the whole cost of one traced tick of N modules: its spans built
// and exported over OTLP/HTTP to a receiver that discards them (in this process, so its
// share of reading the requests is counted too). cpu-ns/op is the process's CPU time per
// traced tick; at a sampling ratio r a tick costs r times that on average.
func BenchmarkTraceTick(b *testing.B) {
	for _, n := range []int{500} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/x-protobuf")
			}))
			defer srv.Close()
			s := benchSummary(b, n)
			tr, err := New(context.Background(), Settings{Endpoint: srv.URL, ServiceName: "bench", Sampler: "always_on",
				QueueSize: 1 << 20, FlushInterval: 100 * time.Millisecond}, nil)
			if err != nil {
				b.Fatal(err)
			}
			cpu0 := processCPU()
			for b.Loop() {
				tr.build(s)
			}
			if err := tr.Close(context.Background()); err != nil { // the export of every span is counted
				b.Fatal(err)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
