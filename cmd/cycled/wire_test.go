package main

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
)

// TestRestoreNamesRuntimeModule: a saved module that no longer registers is logged with
// its problems named after the runtime module, not after its index among the engine's
// modules ("modules[2].tier" when the file has one module).
func TestRestoreNamesRuntimeModule(t *testing.T) {
	cfg, err := config.Load(config.WithData([]byte(`
cycle: {period: 0}
tiers: [{name: safety}, {name: planning}]
modules:
  - {name: guard, tier: safety}
`), "c.yaml"), config.WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	ec, regs, _ := cfg.Engine()
	e, err := cycle.New(ec, regs)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	store, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put("rt0", []byte(`{"name": "rt0", "tier": "planning"}`)); err != nil {
		t.Fatal(err)
	}
	if err := store.Put("rt1", []byte(`{"name": "rt1", "tier": "knowledge"}`)); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	restore(e, config.NewReloader(cfg, regs, e), store, zap.New(core))

	lost := logs.FilterMessage("runtime module not restored").All()
	if len(lost) != 1 || lost[0].ContextMap()["module"] != "rt1" {
		t.Fatalf("not restored: %+v", lost)
	}
	msg, _ := lost[0].ContextMap()["error"].(string)
	if !strings.Contains(msg, `runtime_modules[1].tier: runtime module "rt1": unknown tier "knowledge"`) || strings.Contains(msg, "modules[2]") {
		t.Fatalf("error %q does not name the runtime module", msg)
	}
	if n := logs.FilterMessage("runtime module restored").Len(); n != 1 {
		t.Fatalf("%d modules restored, want 1 (rt0)", n)
	}
}
