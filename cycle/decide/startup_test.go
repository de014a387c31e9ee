package decide

import (
	"maps"
	"slices"
	"testing"
	"time"
)

func TestStartupNext(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	safety := []string{"a", "b"}
	starting := Startup{Starting: true, Begin: t0}
	for _, r := range []struct {
		name    string
		s       Startup
		t       StartupTick
		timeout time.Duration
		want    Startup
		change  StartupChange
	}{
		{"past startup nothing changes", Startup{}, StartupTick{Now: at(time.Hour), Safety: safety}, time.Second,
			Startup{}, NoStartupChange},
		{"the first tick sets the beginning", Startup{Starting: true}, StartupTick{Now: at(0), Safety: safety, Succeeded: []string{"b"}}, time.Second,
			Startup{Starting: true, Begin: t0, Seen: []string{"b"}}, NoStartupChange},
		{"every safety module once, over several ticks", Startup{Starting: true, Begin: t0, Seen: []string{"b"}},
			StartupTick{Now: at(time.Millisecond), Safety: safety, Succeeded: []string{"a"}}, time.Second,
			Startup{Begin: t0, Seen: []string{"a", "b"}}, Ready},
		{"all at once", starting, StartupTick{Now: at(0), Safety: safety, Succeeded: []string{"b", "a"}}, 0,
			Startup{Begin: t0, Seen: []string{"a", "b"}}, Ready},
		{"no safety module: ready at once", Startup{Starting: true}, StartupTick{Now: at(0)}, time.Second,
			Startup{Begin: t0}, Ready},
		{"before the timeout it waits", starting, StartupTick{Now: at(999 * time.Millisecond), Safety: safety}, time.Second,
			starting, NoStartupChange},
		{"at the timeout it gives up", starting, StartupTick{Now: at(time.Second), Safety: safety, Succeeded: []string{"a"}}, time.Second,
			Startup{Begin: t0, Seen: []string{"a"}, TimedOut: true}, StartupTimedOut},
		{"success in the timeout's tick wins", starting, StartupTick{Now: at(2 * time.Second), Safety: safety, Succeeded: []string{"a", "b"}}, time.Second,
			Startup{Begin: t0, Seen: []string{"a", "b"}}, Ready},
		{"no timeout: it waits for ever", starting, StartupTick{Now: at(time.Hour), Safety: safety}, 0, starting, NoStartupChange},
		{"failures are counted, startup goes on", starting, StartupTick{Now: at(time.Millisecond), Safety: safety, Failed: []string{"a", "b"}}, time.Second,
			Startup{Starting: true, Begin: t0, Failures: map[string]int{"a": 1, "b": 1}}, NoStartupChange},
		{"failures first, then the first success of each ends it", Startup{Starting: true, Begin: t0, Seen: []string{"b"}, Failures: map[string]int{"a": 2}},
			StartupTick{Now: at(3 * time.Millisecond), Safety: safety, Succeeded: []string{"a"}}, time.Second,
			Startup{Begin: t0, Seen: []string{"a", "b"}, Failures: map[string]int{"a": 2}}, Ready},
		{"failing until the timeout ends it", Startup{Starting: true, Begin: t0, Failures: map[string]int{"a": 9}},
			StartupTick{Now: at(time.Second), Safety: safety, Failed: []string{"a"}}, time.Second,
			Startup{Begin: t0, TimedOut: true, Failures: map[string]int{"a": 10}}, StartupTimedOut},
		{"a module removed by a reload is not waited for", Startup{Starting: true, Begin: t0, Seen: []string{"a"}},
			StartupTick{Now: at(0), Safety: []string{"a"}}, 0, Startup{Begin: t0, Seen: []string{"a"}}, Ready},
	} {
		before := slices.Clone(r.s.Seen)
		got, ch := r.s.Next(r.t, r.timeout)
		if got.Starting != r.want.Starting || !got.Begin.Equal(r.want.Begin) || !slices.Equal(got.Seen, r.want.Seen) ||
			got.TimedOut != r.want.TimedOut || ch != r.change || !maps.Equal(got.Failures, r.want.Failures) {
			t.Errorf("%s:\n got %+v %d\nwant %+v %d", r.name, got, ch, r.want, r.change)
		}
		if !slices.Equal(r.s.Seen, before) {
			t.Errorf("%s: Next changed its receiver's Seen", r.name)
		}
	}
	if p := (Startup{Seen: []string{"b"}}).Pending([]string{"a", "b", "c"}); !slices.Equal(p, []string{"a", "c"}) {
		t.Errorf("Pending = %v", p)
	}
}
