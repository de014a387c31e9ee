package cycle

import (
	"context"
	"github.com/cycled/cycled/cycle/decide"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// readyLines returns the lines waiting in p, in order, and puts them back: the i-th
// prepared records with the i-th prepared values.
func readyLines(p *linePrep) []lineBuf {
	recs, vals := readySlices(p.recs), readySlices(p.vals)
	out := make([]lineBuf, max(len(recs), len(vals)))
	for i := range out {
		if i < len(recs) {
			out[i].recs = recs[i]
		}
		if i < len(vals) {
			out[i].vals = vals[i]
		}
	}
	return out
}

// readySlices returns what waits in ch, in order, and puts it back.
func readySlices[T any](ch chan []T) [][]T {
	var out [][]T
	for len(ch) > 0 {
		out = append(out, <-ch)
	}
	for _, s := range out {
		ch <- s
	}
	return out
}

// newLineBuf returns fresh lines of n modules.
func newLineBuf(n int) lineBuf { return lineBuf{recs: make([]lineRec, n), vals: make([]any, n)} }

func TestLinesAhead(t *testing.T) {
	line := int(unsafe.Sizeof(lineRec{})) + 16 // a record and its value
	if line != lineBytes || line > 64 {
		t.Fatalf("a line is %d bytes (lineBytes %d): keep it within a cache line", line, lineBytes)
	}
	for _, c := range []struct{ n, want int }{
		{1, maxAhead},
		{500, min(aheadBytes/(500*line), maxAhead)},
		{aheadBytes / line / 3, 3},
		{5000, aheadBytes / (5000 * line)},
		{maxPreparedLines, 2},
	} {
		if got := linesAhead(c.n); got != c.want {
			t.Errorf("linesAhead(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestLinePrep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		p := newLinePrep(&wg)
		if got := p.take(3); len(got.recs) != 3 || len(got.vals) != 3 {
			t.Fatalf("take without a request: %d lines, want 3", len(got.recs))
		}
		p.request(4)
		synctest.Wait() // the goroutine has prepared them
		ready := readyLines(p)
		if len(ready) != linesAhead(4) || len(ready[0].recs) != 4 || len(ready[1].vals) != 4 {
			t.Fatalf("after request(4): %d sets ready, want %d of 4 lines", len(ready), linesAhead(4))
		}
		// Enough lines are waiting: another request allocates nothing.
		p.request(4)
		synctest.Wait()
		if again := readyLines(p); len(again) != linesAhead(4) || &again[0].recs[0] != &ready[0].recs[0] {
			t.Fatal("a request with the buffer full replaced lines that were still unused")
		}
		if got := p.take(4); &got.recs[0] != &ready[0].recs[0] {
			t.Fatal("take(4) did not return the first prepared lines")
		}
		if left := readyLines(p); len(left) != linesAhead(4)-1 || &left[0].recs[0] != &ready[1].recs[0] {
			t.Fatal("prepared lines handed out twice, or lost")
		}
		// Prepared lines of another size (the configuration changed) are dropped.
		if got := p.take(5); len(got.recs) != 5 || len(readyLines(p)) != 0 {
			t.Fatalf("take(5) with lines of 4 ready: %d lines, %d sets left", len(got.recs), len(readyLines(p)))
		}
		// A cycle too large to be worth it gets none.
		p.request(maxPreparedLines + 1)
		synctest.Wait()
		if len(readyLines(p)) != 0 {
			t.Fatal("prepared lines over the cap")
		}
		p.request(4)
		synctest.Wait()
		p.stop()
		wg.Wait() // the goroutine has ended
		if len(readyLines(p)) != 0 {
			t.Fatal("stop kept prepared lines")
		}
		p.request(4) // ignored after stop
		synctest.Wait()
		if len(readyLines(p)) != 0 {
			t.Fatal("request after stop prepared lines")
		}
	})
}

// While the scheduler runs, the engine prepares the next ticks' lines, and the next tick
// uses them; in step mode it prepares none.
func TestEnginePreparesNextLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		regs := []Registration{reg("a", "safety", ok(1)), reg("b", "planning", ok(2))}
		step := newEngine(t, Config{}, regs)
		tick(t, step)
		synctest.Wait()
		if n := len(readyLines(step.lines)); n != 0 {
			t.Fatalf("step mode prepared %d sets of lines", n)
		}

		e := newEngine(t, Config{Period: 10 * time.Millisecond}, regs)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(5 * time.Millisecond) // the first tick ran at 0
		synctest.Wait()
		ready := readyLines(e.lines)
		if len(ready) != linesAhead(2) || len(ready[0].recs) != 2 {
			t.Fatalf("after a scheduled tick: %d sets ready, want %d of 2 lines", len(ready), linesAhead(2))
		}
		time.Sleep(10 * time.Millisecond) // the second tick, at 10ms
		s := e.Latest()
		if s.TickID != 2 || ready[0].recs[0].status != decide.OK || ready[0].recs[1].status != decide.OK {
			t.Fatalf("tick %d did not use the prepared lines", s.TickID)
		}
		if s.Modules()[0].Name != "a" || s.Modules()[1].Name != "b" {
			t.Fatalf("lines %q %q", s.Modules()[0].Name, s.Modules()[1].Name)
		}
		cancel()
		<-done
	})
}
