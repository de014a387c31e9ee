package cycle

import (
	"context"
	"testing"
	"unsafe"

	"github.com/cycled/cycled/tiers"
)

// workerOf returns the worker of module name in the engine's active state after a tick.
func workerOf(t *testing.T, e *Engine, name string) *worker {
	t.Helper()
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, rt := range e.active.lines {
		if rt.name == name {
			return rt.w
		}
	}
	t.Fatalf("module %q not active", name)
	return nil
}

// A reload or registration keeps a module's worker (and with it a run still outstanding)
// exactly when it passes the same registration again: the same comparable module, or a
// registration the engine handed back, which carries its identity (also for a module of a
// type == cannot compare, such as a func). Any other module gets a worker of its own.
func TestRegistrationIdentityKeepsWorker(t *testing.T) {
	fn := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	same := ok(1)
	cases := []struct {
		name  string
		first tiers.Module
		// next returns the registrations of the reload, given the ones in force.
		next func(e *Engine) []Registration
		keep bool
	}{
		{"same pointer passed again", same, func(*Engine) []Registration { return []Registration{reg("m", "safety", same)} }, true},
		{"another pointer", same, func(*Engine) []Registration { return []Registration{reg("m", "safety", ok(1))} }, false},
		{"func passed again, no identity", fn, func(*Engine) []Registration { return []Registration{reg("m", "safety", fn)} }, false},
		{"func handed back by the engine", fn, func(e *Engine) []Registration { return e.desired.registrations() }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, Config{}, []Registration{reg("m", "safety", c.first)})
			before := workerOf(t, e, "m")
			if err := e.Reload(e.desired.cfg, c.next(e)); err != nil {
				t.Fatal(err)
			}
			if got := workerOf(t, e, "m") == before; got != c.keep {
				t.Fatalf("worker kept %v; want %v", got, c.keep)
			}
		})
	}
}

// A runtime registration keeps its worker across a reload of the configuration's modules
// whatever its type: Reload passes it on with its identity.
func TestRuntimeFuncModuleKeepsWorkerOnReload(t *testing.T) {
	fn := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
	e := newEngine(t, Config{}, []Registration{reg("s", "safety", ok(1))})
	if err := e.Register(reg("r", "knowledge", fn)); err != nil {
		t.Fatal(err)
	}
	before := workerOf(t, e, "r")
	if err := e.Reload(e.desired.cfg, []Registration{reg("s", "safety", ok(2))}); err != nil {
		t.Fatal(err)
	}
	if workerOf(t, e, "r") != before {
		t.Fatal("the runtime module got a new worker")
	}
}

// A module's runtime fits a 128-byte size class: two whole cache lines, which the runners
// read for every module of every tick.
func TestModRTSize(t *testing.T) {
	if n := unsafe.Sizeof(modRT{}); n > 128 {
		t.Fatalf("modRT is %d bytes; keep it within 128", n)
	}
}

// A module's worker fits the 288-byte size class: the next one is 320 bytes, memory every
// registered module would pay.
func TestWorkerSize(t *testing.T) {
	if n := unsafe.Sizeof(worker{}); n > 288 {
		t.Fatalf("worker is %d bytes; keep it within 288", n)
	}
}
