package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/cycled/cycled/tiers"
)

// The shed refusal's place among the others and its verdict.
func TestAdmitShed(t *testing.T) {
	for _, c := range []struct {
		name string
		g    Gate
		want Refusal
	}{
		{"shed", Gate{Tick: 7, Shed: true}, ShedLoad},
		{"shed beats busy: an outstanding run is no failure of a shed tick", Gate{Tick: 7, Shed: true, Busy: true}, ShedLoad},
		{"not due beats shed", Gate{Tick: 7, Every: 2, Shed: true}, NotDueTick},
		{"tier skipped beats shed", Gate{Tick: 7, TierSkipped: true, Shed: true}, TierSkipped},
		{"emergency-only outside emergency beats shed", Gate{Tick: 7, EmergencyOnly: true, Shed: true}, EmergencyOnly},
	} {
		if got := Admit(c.g); got != c.want {
			t.Errorf("%s: Admit = %d, want %d", c.name, got, c.want)
		}
	}
	for _, p := range []Policy{{Policy: tiers.Degrade}, {Policy: tiers.FailFast}, {Policy: tiers.Abort}, {Policy: tiers.Degrade, OnOpen: tiers.Fail}} {
		want := Verdict{Status: Shed, Serve: Stale}
		if got := Judge(Outcome{Refusal: ShedLoad}, p); got != want {
			t.Errorf("shed under %+v:\n got %+v\nwant %+v", p, got, want)
		}
	}
	if Shed.Nominal() || Shed.Public() != "shed" {
		t.Errorf("shed: Nominal %v, name %q", Shed.Nominal(), Shed.Public())
	}
}

func TestSheddingNext(t *testing.T) {
	c := SheddingConfig{AfterOverruns: 2, RestoreAfter: 3}
	over := ShedTick{Tick: 9, Overrun: true, Wall: 150 * time.Millisecond, Target: 100 * time.Millisecond}
	fit := ShedTick{Tick: 9, Wall: 50 * time.Millisecond, Target: 100 * time.Millisecond}
	reason := "2 consecutive overruns (tick 9: wall 150ms > 100ms)"
	for _, r := range []struct {
		name   string
		s      Shedding
		t      ShedTick
		max    int
		want   Shedding
		change ShedChange
	}{
		{"a fitting tick with nothing shed", Shedding{}, fit, 3, Shedding{}, NoShedChange},
		{"one overrun counts", Shedding{}, over, 3, Shedding{Overruns: 1}, NoShedChange},
		{"enough overruns shed the first step", Shedding{Overruns: 1}, over, 3,
			Shedding{Level: 1, Since: 9, Reason: reason}, ShedStep},
		{"a fitting tick restarts the overrun count", Shedding{Overruns: 1}, fit, 3, Shedding{}, NoShedChange},
		{"the next step needs as many overruns again", Shedding{Level: 1, Since: 4, Reason: "r"}, over, 3,
			Shedding{Level: 1, Overruns: 1, Since: 4, Reason: "r"}, NoShedChange},
		{"a second step keeps since", Shedding{Level: 1, Overruns: 1, Since: 4, Reason: "r"}, over, 3,
			Shedding{Level: 2, Since: 4, Reason: reason}, ShedStep},
		{"no step past the last", Shedding{Level: 3, Overruns: 1, Since: 4, Reason: "r"}, over, 3,
			Shedding{Level: 3, Overruns: 2, Since: 4, Reason: "r"}, NoShedChange},
		{"nothing to shed", Shedding{Overruns: 1}, over, 0, Shedding{Overruns: 2}, NoShedChange},
		{"an overrun restarts the fit count", Shedding{Level: 2, Fits: 2, Since: 4, Reason: "r"}, over, 3,
			Shedding{Level: 2, Overruns: 1, Since: 4, Reason: "r"}, NoShedChange},
		{"a fitting tick counts towards restoring", Shedding{Level: 2, Fits: 1, Since: 4, Reason: "r"}, fit, 3,
			Shedding{Level: 2, Fits: 2, Since: 4, Reason: "r"}, NoShedChange},
		{"enough fitting ticks restore one step", Shedding{Level: 2, Fits: 2, Since: 4, Reason: "r"}, fit, 3,
			Shedding{Level: 1, Since: 4, Reason: "r"}, RestoreStep},
		{"the last step restored clears the reason", Shedding{Level: 1, Fits: 2, Since: 4, Reason: "r"}, fit, 3,
			Shedding{Since: 4}, RestoreStep},
		{"a reload with fewer steps caps the level", Shedding{Level: 3, Since: 4, Reason: "r"}, fit, 1,
			Shedding{Level: 1, Fits: 1, Since: 4, Reason: "r"}, NoShedChange},
	} {
		got, ch := r.s.Next(r.t, c, r.max)
		if got != r.want || ch != r.change {
			t.Errorf("%s:\n got %+v %d\nwant %+v %d", r.name, got, ch, r.want, r.change)
		}
	}
}

func TestShedClasses(t *testing.T) {
	floor := 50
	cs := []ShedCandidate{
		{Tier: 0, Priority: -5},                      // safety: never
		{Tier: 1, Priority: 3},                       //
		{Tier: 2, Priority: 3},                       // same class
		{Tier: 1, Priority: -1},                      // lowest: shed first
		{Tier: 2, Priority: 60},                      // at or above the floor
		{Tier: 3, Priority: -9, Critical: true},      // critical: never
		{Tier: 3, Priority: -9, EmergencyOnly: true}, // runs only in emergency mode
		{Tier: 4, Priority: 10},
	}
	if got, want := ShedClasses(cs, &floor), []int{-1, 3, 10}; !slices.Equal(got, want) {
		t.Fatalf("classes with floor = %v, want %v", got, want)
	}
	if got, want := ShedClasses(cs, nil), []int{-1, 3, 10, 60}; !slices.Equal(got, want) {
		t.Fatalf("classes without floor = %v, want %v", got, want)
	}
	classes := ShedClasses(cs, &floor)
	for _, r := range []struct {
		level int
		want  []bool
	}{
		{0, []bool{false, false, false, false, false, false, false, false}},
		{1, []bool{false, false, false, true, false, false, false, false}},
		{2, []bool{false, true, true, true, false, false, false, false}},
		{3, []bool{false, true, true, true, false, false, false, true}},
		{9, []bool{false, true, true, true, false, false, false, true}}, // past the last step: all of them
	} {
		for i, c := range cs {
			if got := Sheds(c, classes, r.level, &floor); got != r.want[i] {
				t.Errorf("level %d, candidate %d %+v: Sheds = %v, want %v", r.level, i, c, got, r.want[i])
			}
		}
	}
}
