package faultsummary

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/cycled/cycled/blackboard"
)

func compactFixture(id uint64, n int) *Summary {
	s := &Summary{TickID: id, Tiers: []Tier{{Name: "t"}}}
	for i := 0; i < n; i++ {
		m := Module{Name: fmt.Sprintf("m%d", i), Tier: "t", Breaker: fmt.Sprintf("m%d", i), Status: StatusOK, Attempts: 1,
			LatencyMs: 0.25, CircuitState: "closed", Served: Served{Key: fmt.Sprintf("m%d.result", i), Source: blackboard.Live, Value: i}}
		if i%10 == int(id%10) {
			m.Status, m.FaultKind, m.Error = StatusFailed, "transient", "boom"
			m.Served = Served{Key: m.Served.Key, Source: blackboard.LastGood, Stale: true, AgeMs: 100}
		}
		s.Modules = append(s.Modules, m)
	}
	s.Normalize()
	return s
}

func TestHistoryCompactsOldSummaries(t *testing.T) {
	h := NewHistory(KeepWhole + 20)
	var orig []*Summary
	for id := uint64(1); id <= KeepWhole+20; id++ {
		s := compactFixture(id, 50)
		orig = append(orig, s)
		h.Append(s)
	}
	for id := uint64(1); id <= KeepWhole+20; id++ {
		got, ok := h.Get(id)
		if !ok {
			t.Fatalf("tick %d missing", id)
		}
		want := orig[id-1]
		old := id <= 20 // left the whole window
		if got.Compacted != old {
			t.Fatalf("tick %d: compacted %v, want %v", id, got.Compacted, old)
		}
		if !old {
			if got != want {
				t.Fatalf("tick %d: a recent summary must be the one appended", id)
			}
			continue
		}
		if len(got.Modules) != len(want.Modules) {
			t.Fatalf("tick %d: %d lines, want %d", id, len(got.Modules), len(want.Modules))
		}
		for i := range want.Modules {
			w, g := want.Modules[i], got.Modules[i]
			if plain(&w) {
				// Everything but the latency, the value and the write time survives.
				w.LatencyMs, w.Served.Value = 0, nil
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("tick %d line %d:\n got %+v\nwant %+v", id, i, g, w)
			}
		}
	}
	// The compact copy holds only the failed lines, and shares one roster.
	h.mu.RLock()
	defer h.mu.RUnlock()
	var rosters = map[*roster]bool{}
	for _, s := range h.ring {
		if s.packed != nil {
			rosters[s.packed.roster] = true
			if len(s.Modules) != 5 {
				t.Fatalf("tick %d keeps %d lines, want the 5 failed ones", s.TickID, len(s.Modules))
			}
		}
	}
	if len(rosters) != 1 {
		t.Fatalf("%d rosters for one set of modules", len(rosters))
	}
}
