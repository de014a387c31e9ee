package replaycheck

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/faultsummary"
)

// recordedRules is a recorder.Rules event with the tick and run it was recorded at.
type recordedRules struct {
	tick  uint64
	run   string
	rules recorder.Rules
}

// loadRules reads every recorded recorder.KindRules event, oldest first.
func loadRules(ctx context.Context, rd *sqlite.Reader) ([]recordedRules, error) {
	evs, err := rd.Events(ctx, recorder.EventQuery{Kind: recorder.KindRules})
	if err != nil {
		return nil, err
	}
	out := make([]recordedRules, 0, len(evs))
	whole := map[string]map[string]recorder.ModuleRules{} // by run: the rules of its last event
	for _, ev := range evs {
		rr := recordedRules{tick: ev.TickID, run: ev.RunID}
		if err := json.Unmarshal(ev.Data, &rr.rules); err != nil {
			return nil, fmt.Errorf("replay check: decode the rules of event %d: %w", ev.ID, err)
		}
		rr.rules = rr.rules.ApplyDelta(whole[ev.RunID])
		whole[ev.RunID] = rr.rules.Modules
		out = append(out, rr)
	}
	return out, nil
}

// rulesFor returns the recorded rules tick s ran with: of its run, those recorded for its
// generation, else the newest recorded at or before it; nil if none.
func rulesFor(all []recordedRules, s *faultsummary.Summary) *recorder.Rules {
	var best *recorder.Rules
	for i := range all {
		r := &all[i]
		if r.run != s.RunID || r.tick > s.TickID {
			continue
		}
		if r.rules.Generation == s.Generation && s.Generation != 0 {
			return &r.rules
		}
		best = &r.rules
	}
	return best
}

// policyOf returns the policy of line m of tick s: WithPolicy's, else the recorded one,
// else the one InferPolicy reads from the tick.
func (c *Checker) policyOf(s *faultsummary.Summary, m *faultsummary.Module) decide.Policy {
	if c.policy != nil {
		return c.policy(s, m)
	}
	if c.rules != nil {
		if mr, ok := c.rules.Modules[m.Name]; ok {
			return decide.Policy{Policy: mr.Policy, OnOpen: mr.OnOpen, Safety: m.TierIndex == 0, OnReject: onRejectOf(m)}
		}
	}
	return InferPolicy(s, m)
}
