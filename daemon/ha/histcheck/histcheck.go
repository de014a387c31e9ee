// Package histcheck checks, in the spirit of Jepsen's checkers, the history of an
// active/standby group: every summary its daemons published (from the export stream) and
// every change of active daemon. It verifies what fencing and continuity promise:
//
//   - no two epochs' active intervals overlap in starting ticks: every tick of an epoch
//     starts after every tick of every earlier epoch has started (epochs are the
//     election's revisions, so they order the terms);
//   - tick ids strictly increase within an epoch, in the order the ticks started;
//   - no tick id repeats, in any epoch, and a later epoch's ids are above an earlier one's;
//   - every epoch that has ticks was announced by an event (ha_active) for that epoch.
package histcheck

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The rules, as named in a Violation.
const (
	RuleOverlap  = "overlapping_active"  // an epoch started a tick after a later epoch's first
	RuleOrder    = "id_not_increasing"   // ids within an epoch do not increase with the start
	RuleRepeat   = "id_repeated"         // one id in two summaries
	RuleRegress  = "id_below_earlier"    // a later epoch gave an id at or below an earlier epoch's
	RuleNoEvent  = "epoch_without_event" // an epoch with ticks and no change event
	RuleNoEpoch  = "tick_without_epoch"  // a summary of a group carries no epoch
	RuleTwoNodes = "epoch_on_two_nodes"  // two daemons' events claim one epoch
	RuleNodeDiff = "epoch_node_mismatch" // a tick's daemon is not the one its epoch's event names
)

// Tick is one summary as the checker sees it. Node is optional (a summary does not name
// its daemon); when set, it is checked against the epoch's event.
type Tick struct {
	Node      string
	Epoch     uint64
	ID        uint64
	StartedAt time.Time
}

// Change is an event announcing that Node became active under Epoch.
type Change struct {
	Node  string
	Epoch uint64
	At    time.Time
}

// History is what a run left: its summaries and its changes of active daemon, in any order.
type History struct {
	Ticks   []Tick
	Changes []Change
}

// Violation is one broken rule.
type Violation struct {
	Rule    string
	Message string
}

func (v Violation) String() string { return v.Rule + ": " + v.Message }

// epochSpan is what the checker keeps of one epoch.
type epochSpan struct {
	epoch        uint64
	first, last  time.Time // the earliest and latest start
	minID, maxID uint64
	ticks        []Tick
}

// Check returns every violation of h's rules (none: the history is consistent).
func Check(h History) []Violation {
	var out []Violation
	add := func(rule, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	spans := spansOf(h.Ticks, add)
	checkOverlap(spans, add)
	checkIDs(h.Ticks, spans, add)
	checkEvents(h, spans, add)
	return out
}

// spansOf groups the ticks by epoch, in epoch order.
func spansOf(ticks []Tick, add func(string, string, ...any)) []*epochSpan {
	by := map[uint64]*epochSpan{}
	for _, t := range ticks {
		if t.Epoch == 0 {
			add(RuleNoEpoch, "tick %d carries no epoch", t.ID)
			continue
		}
		s := by[t.Epoch]
		if s == nil {
			s = &epochSpan{epoch: t.Epoch, first: t.StartedAt, last: t.StartedAt, minID: t.ID, maxID: t.ID}
			by[t.Epoch] = s
		}
		s.ticks = append(s.ticks, t)
		if t.StartedAt.Before(s.first) {
			s.first = t.StartedAt
		}
		if t.StartedAt.After(s.last) {
			s.last = t.StartedAt
		}
		s.minID, s.maxID = min(s.minID, t.ID), max(s.maxID, t.ID)
	}
	spans := make([]*epochSpan, 0, len(by))
	for _, s := range by {
		slices.SortStableFunc(s.ticks, func(a, b Tick) int { return a.StartedAt.Compare(b.StartedAt) })
		spans = append(spans, s)
	}
	slices.SortFunc(spans, func(a, b *epochSpan) int { return cmp.Compare(a.epoch, b.epoch) })
	return spans
}

// checkOverlap: every tick of an epoch starts after the last start of every earlier one.
func checkOverlap(spans []*epochSpan, add func(string, string, ...any)) {
	var prev *epochSpan // the earlier epoch with the latest start so far
	for _, s := range spans {
		if prev != nil && !s.first.After(prev.last) {
			add(RuleOverlap, "epoch %d started a tick at %s, at or before the last tick start of epoch %d (%s)",
				s.epoch, s.first.Format(time.RFC3339Nano), prev.epoch, prev.last.Format(time.RFC3339Nano))
		}
		if prev == nil || s.last.After(prev.last) {
			prev = s
		}
	}
}

// checkIDs: ids increase within an epoch, never repeat, and later epochs' ids are above
// earlier ones'.
func checkIDs(ticks []Tick, spans []*epochSpan, add func(string, string, ...any)) {
	seen := make(map[uint64]uint64, len(ticks)) // id → the epoch of its first summary
	for _, t := range ticks {
		if e, dup := seen[t.ID]; dup {
			add(RuleRepeat, "tick id %d appears in epoch %d and again in epoch %d", t.ID, e, t.Epoch)
			continue
		}
		seen[t.ID] = t.Epoch
	}
	var maxBefore uint64
	var maxEpoch uint64
	for _, s := range spans {
		for i := 1; i < len(s.ticks); i++ {
			if a, b := s.ticks[i-1], s.ticks[i]; b.ID <= a.ID {
				add(RuleOrder, "epoch %d: tick %d started after tick %d", s.epoch, b.ID, a.ID)
			}
		}
		if maxEpoch != 0 && s.minID <= maxBefore {
			add(RuleRegress, "epoch %d gave id %d, at or below id %d of epoch %d", s.epoch, s.minID, maxBefore, maxEpoch)
		}
		if s.maxID > maxBefore {
			maxBefore, maxEpoch = s.maxID, s.epoch
		}
	}
}

// checkEvents: every epoch with ticks has its change event, one daemon per epoch.
func checkEvents(h History, spans []*epochSpan, add func(string, string, ...any)) {
	owner := map[uint64]string{}
	for _, c := range h.Changes {
		if o, ok := owner[c.Epoch]; ok && o != c.Node {
			add(RuleTwoNodes, "epoch %d announced by %q and by %q", c.Epoch, o, c.Node)
			continue
		}
		owner[c.Epoch] = c.Node
	}
	for _, s := range spans {
		o, ok := owner[s.epoch]
		if !ok {
			add(RuleNoEvent, "epoch %d has %d tick(s) (ids %d–%d) and no change event", s.epoch, len(s.ticks), s.minID, s.maxID)
			continue
		}
		for _, t := range s.ticks {
			if t.Node != "" && o != "" && t.Node != o {
				add(RuleNodeDiff, "tick %d of epoch %d ran on %q; the epoch is %q's", t.ID, s.epoch, t.Node, o)
				break
			}
		}
	}
}
