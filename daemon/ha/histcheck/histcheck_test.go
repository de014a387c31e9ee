package histcheck_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cycled/cycled/daemon/ha/histcheck"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// tick is a tick of epoch e with id id started at ms.
func tick(e, id uint64, ms int) histcheck.Tick {
	return histcheck.Tick{Epoch: e, ID: id, StartedAt: at(ms)}
}

// changes announces each epoch on its own node.
func changes(epochs ...uint64) []histcheck.Change {
	var cs []histcheck.Change
	for _, e := range epochs {
		cs = append(cs, histcheck.Change{Epoch: e, Node: fmt.Sprint("n", e)})
	}
	return cs
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    histcheck.History
		want []string // the rules broken, in any order
	}{
		{"a failover", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(5, 2, 10), tick(9, 1001, 2030), tick(9, 1002, 2040)},
			Changes: changes(5, 9)}, nil},
		{"given out of order", histcheck.History{
			Ticks:   []histcheck.Tick{tick(9, 1002, 2040), tick(5, 2, 10), tick(9, 1001, 2030), tick(5, 1, 0)},
			Changes: changes(9, 5)}, nil},
		{"empty", histcheck.History{}, nil},
		{"the old active started a tick after the new one's first", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(5, 2, 2035), tick(9, 1001, 2030)},
			Changes: changes(5, 9)}, []string{histcheck.RuleOverlap}},
		{"a start at the same instant overlaps", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(9, 1001, 0)},
			Changes: changes(5, 9)}, []string{histcheck.RuleOverlap}},
		{"overlap with an epoch before the previous one", histcheck.History{
			Ticks:   []histcheck.Tick{tick(3, 1, 0), tick(3, 2, 5000), tick(5, 10, 100), tick(9, 20, 4000)},
			Changes: changes(3, 5, 9)}, []string{histcheck.RuleOverlap, histcheck.RuleOverlap}},
		{"ids go back within an epoch", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(5, 3, 10), tick(5, 2, 20)},
			Changes: changes(5)}, []string{histcheck.RuleOrder}},
		{"an id repeated across epochs", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(5, 2, 10), tick(9, 2, 3000), tick(9, 3, 3010)},
			Changes: changes(5, 9)}, []string{histcheck.RuleRepeat, histcheck.RuleRegress}},
		{"an id repeated within an epoch", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(5, 1, 10)},
			Changes: changes(5)}, []string{histcheck.RuleRepeat, histcheck.RuleOrder}},
		{"a later epoch below an earlier one's ids", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 100, 0), tick(9, 50, 3000)},
			Changes: changes(5, 9)}, []string{histcheck.RuleRegress}},
		{"an epoch without its event", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0), tick(9, 1001, 3000)},
			Changes: changes(5)}, []string{histcheck.RuleNoEvent}},
		{"a tick without an epoch", histcheck.History{
			Ticks: []histcheck.Tick{tick(0, 1, 0)}}, []string{histcheck.RuleNoEpoch}},
		{"one epoch claimed by two daemons", histcheck.History{
			Ticks:   []histcheck.Tick{tick(5, 1, 0)},
			Changes: append(changes(5), histcheck.Change{Epoch: 5, Node: "other"})}, []string{histcheck.RuleTwoNodes}},
		{"a tick on another daemon than its epoch's", histcheck.History{
			Ticks:   []histcheck.Tick{{Node: "intruder", Epoch: 5, ID: 1, StartedAt: at(0)}},
			Changes: changes(5)}, []string{histcheck.RuleNodeDiff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range histcheck.Check(tc.h) {
				got = append(got, v.Rule)
				if v.Message == "" {
					t.Errorf("%s: no message", v.Rule)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("violations %v, want %v (%v)", got, want, histcheck.Check(tc.h))
			}
		})
	}
}

// A history in which the old active started one tick after the new active's first.
func ExampleCheck() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := histcheck.History{
		Ticks: []histcheck.Tick{
			{Epoch: 7, ID: 41, StartedAt: t0},
			{Epoch: 7, ID: 42, StartedAt: t0.Add(2100 * time.Millisecond)},
			{Epoch: 12, ID: 1001, StartedAt: t0.Add(2000 * time.Millisecond)},
		},
		Changes: []histcheck.Change{{Epoch: 7, Node: "a"}, {Epoch: 12, Node: "b"}},
	}
	for _, v := range histcheck.Check(h) {
		fmt.Println(v.Rule)
	}
	// Output:
	// overlapping_active
}
