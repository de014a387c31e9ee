package cycle

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestLinePrep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		p := &linePrep{wg: &wg}
		if got := p.take(3); len(got) != 3 {
			t.Fatalf("take without a request: %d lines, want 3", len(got))
		}
		p.request(4)
		synctest.Wait() // the goroutine has prepared them
		prepared := p.ready.Load()
		if prepared == nil || len(*prepared) != 4 {
			t.Fatalf("after request(4): ready = %v", prepared)
		}
		// Lines of the size asked for are waiting: a second request allocates nothing.
		p.request(4)
		synctest.Wait()
		if p.ready.Load() != prepared {
			t.Fatal("a second request replaced lines that were still unused")
		}
		if got := p.take(4); &got[0] != &(*prepared)[0] {
			t.Fatal("take(4) did not return the prepared lines")
		}
		if p.ready.Load() != nil {
			t.Fatal("prepared lines handed out twice")
		}
		// Prepared lines of another size (the configuration changed) are not used.
		p.request(4)
		synctest.Wait()
		if got := p.take(5); len(got) != 5 {
			t.Fatalf("take(5) with 4 prepared: %d lines", len(got))
		}
		p.stop()
		wg.Wait()    // the goroutine has ended
		p.request(4) // ignored after stop
		if p.req == nil || p.ready.Load() != nil {
			t.Fatal("request after stop prepared lines")
		}
	})
}

// While the scheduler runs, the engine prepares the next tick's lines after each tick, and
// the next tick uses them; in step mode it prepares none.
func TestEnginePreparesNextLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		regs := []Registration{reg("a", "safety", ok(1)), reg("b", "planning", ok(2))}
		step := newEngine(t, Config{}, regs)
		tick(t, step)
		synctest.Wait()
		if p := step.lines.ready.Load(); p != nil {
			t.Fatalf("step mode prepared %d lines", len(*p))
		}

		e := newEngine(t, Config{Period: 10 * time.Millisecond}, regs)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(5 * time.Millisecond) // the first tick ran at 0
		synctest.Wait()
		prepared := e.lines.ready.Load()
		if prepared == nil || len(*prepared) != 2 {
			t.Fatalf("after a scheduled tick: prepared %v, want 2 lines", prepared)
		}
		time.Sleep(10 * time.Millisecond) // the second tick, at 10ms
		s := e.Latest()
		if s.TickID != 2 || &s.Modules[0] != &(*prepared)[0] {
			t.Fatalf("tick %d did not use the prepared lines", s.TickID)
		}
		if s.Modules[0].Name != "a" || s.Modules[1].Name != "b" {
			t.Fatalf("lines %q %q", s.Modules[0].Name, s.Modules[1].Name)
		}
		cancel()
		<-done
	})
}
