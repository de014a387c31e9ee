package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
)

// TestRun runs the example and checks its whole output: a retried transient failure on
// tick 2, a stale last-known-good value (and a derived_from_stale planner) on tick 3. It
// runs on virtual time: on the real clock a test machine busy with other packages' tests
// can hold the first tick past its 20 ms safety budget (the safety tier then fails and
// emergency mode skips the other tiers for three ticks), which is not what the example
// shows.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		if err := run(context.Background(), &out, 4); err != nil {
			t.Fatal(err)
		}
	})
	const want = `tick 1 completed/ok: odometry ok after 1 attempt(s), serves live 1 (stale false); planner "advance from 1" (derived_from_stale false)
tick 2 completed/ok: odometry retried after 2 attempt(s), serves live 2 (stale false); planner "advance from 2" (derived_from_stale false)
tick 3 completed/degraded: odometry failed after 2 attempt(s), serves last_good 2 (stale true); planner "advance from 2" (derived_from_stale true)
tick 4 completed/ok: odometry ok after 1 attempt(s), serves live 3 (stale false); planner "advance from 3" (derived_from_stale false)
blackboard:
  guard.result = clear (live, tick 4)
  odometry.result = 3 (live, tick 4)
  planner.result = advance from 3 (live, tick 4)
`
	if got := out.String(); got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}
