package decide

import (
	"testing"

	"github.com/cycled/cycled/fault"
)

func TestJudgeAsync(t *testing.T) {
	for _, r := range []struct {
		name string
		e    AsyncEnd
		want AsyncVerdict
	}{
		{"ok: written", AsyncEnd{}, AsyncVerdict{Status: OK, Write: true}},
		{"failed: nothing written", AsyncEnd{Failed: true, Kind: fault.KindTransient}, AsyncVerdict{Status: Failed}},
		{"timed out: its late result discarded", AsyncEnd{TimedOut: true}, AsyncVerdict{Status: TimedOut}},
		{"timed out beats a late error", AsyncEnd{TimedOut: true, Failed: true, Kind: fault.KindInternal}, AsyncVerdict{Status: TimedOut}},
		{"control: nothing to do, not a failure", AsyncEnd{Failed: true, Kind: fault.KindControl}, AsyncVerdict{Status: OK}},
	} {
		if got := JudgeAsync(r.e); got != r.want {
			t.Errorf("%s: %+v, want %+v", r.name, got, r.want)
		}
	}
}

func TestAsyncStateNext(t *testing.T) {
	ok := AsyncVerdict{Status: OK, Write: true}
	bad := AsyncVerdict{Status: Failed}
	late := AsyncVerdict{Status: TimedOut}
	for _, r := range []struct {
		name   string
		s      AsyncState
		v      AsyncVerdict
		want   AsyncState
		change AsyncChange
	}{
		{"ok stays ok", AsyncState{}, ok, AsyncState{}, AsyncSame},
		{"the first failure is a change", AsyncState{}, bad, AsyncState{Failures: 1, Failing: true}, AsyncNowFailing},
		{"a timeout is a failure", AsyncState{}, late, AsyncState{Failures: 1, Failing: true}, AsyncNowFailing},
		{"more failures count, no change", AsyncState{Failures: 1, Failing: true}, late, AsyncState{Failures: 2, Failing: true}, AsyncSame},
		{"a success after failures recovers", AsyncState{Failures: 4, Failing: true}, ok, AsyncState{Failures: 4}, AsyncRecovered},
		{"then the count is gone", AsyncState{Failures: 4}, ok, AsyncState{}, AsyncSame},
	} {
		got, ch := r.s.Next(r.v)
		if got != r.want || ch != r.change {
			t.Errorf("%s: %+v %d, want %+v %d", r.name, got, ch, r.want, r.change)
		}
	}
	if !StartAsync(false) || StartAsync(true) {
		t.Error("StartAsync: start only when no run is in flight")
	}
}
