package cycle

import (
	"sync"
	"testing"
	"testing/synctest"
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

// After a tick the engine has the next tick's lines prepared, and the next tick uses them.
func TestEnginePreparesNextLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{}, []Registration{reg("a", "safety", ok(1)), reg("b", "planning", ok(2))})
		tick(t, e)
		synctest.Wait()
		prepared := e.lines.ready.Load()
		if prepared == nil || len(*prepared) != 2 {
			t.Fatalf("after a tick: prepared %v, want 2 lines", prepared)
		}
		s := tick(t, e)
		if &s.Modules[0] != &(*prepared)[0] {
			t.Fatal("the tick did not use the prepared lines")
		}
		if s.Modules[0].Name != "a" || s.Modules[1].Name != "b" {
			t.Fatalf("lines %q %q", s.Modules[0].Name, s.Modules[1].Name)
		}
	})
}
