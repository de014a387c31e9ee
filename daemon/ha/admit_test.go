package ha

import (
	"testing"
	"time"
)

// TestAdmit is the gate's decision: only an active node admits, only before its renewal
// deadline (a late start also asks to step down), only inside the reserved ids, and the
// window is extended ahead of use.
func TestAdmit(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name             string
		active           bool
		deadline         time.Time
		floor, max, next uint64
		wantID           uint64
		wantOK           bool
		wantStep         bool
		wantExtend       bool
	}{
		{"standby", false, now.Add(time.Second), 1, 100, 1, 0, false, false, false},
		{"active", true, now.Add(time.Second), 1, 100, 7, 7, true, false, false},
		{"first tick of a term jumps to the window", true, now.Add(time.Second), 201, 300, 8, 201, true, false, false},
		{"at the deadline", true, now, 1, 100, 7, 0, false, true, false},
		{"past the deadline", true, now.Add(-time.Millisecond), 1, 100, 7, 0, false, true, false},
		{"half the window used", true, now.Add(time.Second), 1, 100, 60, 60, true, false, true},
		{"window exhausted", true, now.Add(time.Second), 1, 100, 101, 0, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{opts: Options{IDWindow: 100}, stepReq: make(chan string, 1), extendCh: make(chan struct{}, 1),
				active: tc.active, epoch: 9, deadline: tc.deadline, idFloor: tc.floor, idMax: tc.max}
			id, epoch, ok := n.Admit(now, tc.next)
			if ok != tc.wantOK || (ok && (id != tc.wantID || epoch != 9)) {
				t.Errorf("Admit = %d, %d, %v; want %d, 9, %v", id, epoch, ok, tc.wantID, tc.wantOK)
			}
			if got := len(n.stepReq) == 1; got != tc.wantStep {
				t.Errorf("step-down asked: %v, want %v", got, tc.wantStep)
			}
			if got := len(n.extendCh) == 1; got != tc.wantExtend {
				t.Errorf("extension asked: %v, want %v", got, tc.wantExtend)
			}
			if ok && n.Epoch() != 9 {
				t.Errorf("Epoch() = %d after an admitted tick", n.Epoch())
			}
		})
	}
}
