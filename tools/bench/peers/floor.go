package peers

import (
	"context"
	"slices"

	"github.com/cycled/cycled/tiers"
	"github.com/cycled/cycled/tools/bench/floor"
)

// Floor is not a peer but a bound: bench/floor's bare loop, which does for every module
// the work that cycled's tick semantics require of a run that succeeds, with cycled's own
// components, on one goroutine and without an engine (no tiers, deadlines, hand-offs,
// admission checks, settling or summary). An engine built on those components does at
// least this work, so on one core its tick takes at least this long. A failing module's
// line is only marked failed: it is measured on clean ticks.
type Floor struct {
	l     *floor.Loop
	mods  []Module // in the loop's order: by tier, as the engine runs them
	id    uint64
	lines []floor.Line
}

// NewFloor returns the floor loop over spec's modules.
func NewFloor(spec Spec) *Floor {
	mods := slices.Clone(spec.Modules)
	slices.SortStableFunc(mods, func(a, b Module) int { return a.Tier - b.Tier })
	names := make([]string, len(mods))
	ms := make([]tiers.Module, len(mods))
	for i, m := range mods {
		fn := m.Fn
		names[i] = m.Name
		ms[i] = tiers.ModuleFunc(func(ctx context.Context, _ *tiers.Input) (any, error) { return fn(ctx) })
	}
	return &Floor{l: floor.New(names, ms, 0), mods: mods}
}

// Tick runs every module once.
func (f *Floor) Tick(ctx context.Context) error {
	f.id++
	f.lines, _ = f.l.Tick(ctx, f.id)
	return nil
}

// Last returns the latest tick's module lines (ok or failed; the loop has no tiers).
func (f *Floor) Last() View {
	v := View{TickID: f.id, Lines: make([]Line, len(f.lines))}
	for i, ln := range f.lines {
		st := StatusOK
		if ln.Status != floor.StatusOK {
			st = StatusFailed
		}
		v.Lines[i] = Line{Name: f.mods[i].Name, Tier: f.mods[i].Tier, Status: st, Attempts: int(ln.Attempts), Latency: ln.Latency}
	}
	return v
}

// Close does nothing: the loop holds no goroutine.
func (f *Floor) Close() {}
