package advise_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/tools/sim"
	"github.com/cycled/cycled/tools/sim/advise"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func load(t *testing.T, path string) *config.Config {
	t.Helper()
	if path == "" {
		c, err := config.Demo()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, err := config.Load(config.WithFile(path), config.WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// On a knowledge tier whose budget is too small for its modules, advise proposes a larger
// budget, and the re-simulation with it shows the exhaustions gone.
func TestAdviseTooSmallBudget(t *testing.T) {
	cfg := load(t, "../testdata/tight.yaml")
	a, err := advise.Advise(context.Background(), sim.Options{Config: cfg, Ticks: 3000, Seed: 1}, advise.Objective{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	a.WriteText(&text)
	t.Log(text.String())
	before, after := a.Before.Tiers[1], a.After.Tiers[1]
	if before.Exhaustions == 0 {
		t.Fatal("the tight configuration exhausted nothing: the test proves nothing")
	}
	if len(a.Proposals) == 0 || a.Proposals[0].Path != "tiers[1].budget" || a.Proposals[0].From != "20ms" {
		t.Fatalf("proposals %+v; want tiers[1].budget raised from 20ms first", a.Proposals)
	}
	if after.Exhaustions != 0 || !a.Met {
		t.Fatalf("after the advice the knowledge tier exhausted its budget %d times (objective met: %v)", after.Exhaustions, a.Met)
	}
	if got := a.Config().Tiers[1].Budget.String(); got != a.Proposals[0].To || !strings.Contains(a.Patch, "name: knowledge\n    budget: "+got) {
		t.Fatalf("patch %q does not carry the proposed budget %s", a.Patch, got)
	}
}

// On the demo, which meets the objective, advise proposes nothing.
func TestAdviseWellTuned(t *testing.T) {
	a, err := advise.Advise(context.Background(), sim.Options{Config: load(t, ""), Ticks: 3000, Seed: 1}, advise.Objective{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Proposals) != 0 || a.Patch != "" || !a.Met {
		t.Fatalf("advise on the demo proposed %+v (patch %q, met %v); want nothing", a.Proposals, a.Patch, a.Met)
	}
}
