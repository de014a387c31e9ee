package cycle

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// TestTickCPU measures the process CPU time (user+sys) per clean tick at N=$TICKCPU
// modules over $TICKS ticks: a measure that other processes' load does not inflate as it
// does wall time (BENCHMARKS.md). Skipped unless both are set. Its errors are
// ignored on purpose: a tick of trivial modules cannot fail, and a measurement is all it is.
func TestTickCPU(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TICKCPU"))
	k, _ := strconv.Atoi(os.Getenv("TICKS"))
	if n == 0 || k == 0 {
		t.Skip()
	}
	e, err := New(Config{Tiers: benchTiers(), History: 16}, benchModules(n, false))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for range 20 {
		_, _ = e.Tick(ctx)
	}
	runtime.GC()
	tv := func(x syscall.Timeval) float64 { return float64(x.Sec)*1e9 + float64(x.Usec)*1e3 }
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for range k {
		_, _ = e.Tick(ctx)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := tv(r1.Utime) + tv(r1.Stime) - tv(r0.Utime) - tv(r0.Stime)
	fmt.Printf("TICKCPU N=%d %.0f\n", n, cpu/float64(k)) // ns of CPU per tick
}
