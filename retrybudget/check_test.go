package retrybudget_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/retrybudget"
)

func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}

// A backoff's rules: a zero factor means the default to the engine and is a mistake in a
// file, where every field is given.
func TestBackoffCheck(t *testing.T) {
	for _, c := range []struct {
		name            string
		b               retrybudget.Backoff
		check, explicit string
	}{
		{"complete", retrybudget.Backoff{Base: time.Millisecond, Factor: 2, Max: time.Second, Jitter: 0.2}, "", ""},
		{"zero", retrybudget.Backoff{}, "", "factor: must be >= 1"},
		{"factor below 1", retrybudget.Backoff{Factor: 0.5}, "factor: must be >= 1", "factor: must be >= 1"},
		{"negative base and max", retrybudget.Backoff{Base: -1, Factor: 1, Max: -1}, "base: must be >= 0\nmax: must be >= 0",
			"base: must be >= 0\nmax: must be >= 0"},
		{"jitter NaN", retrybudget.Backoff{Factor: 1, Jitter: math.NaN()}, "jitter: must be between 0 and 1", "jitter: must be between 0 and 1"},
		{"jitter above 1", retrybudget.Backoff{Factor: 1, Jitter: 1.5}, "jitter: must be between 0 and 1", "jitter: must be between 0 and 1"},
	} {
		if got := errText(c.b.Check()); got != c.check {
			t.Errorf("%s: Check %q, want %q", c.name, got, c.check)
		}
		if got := errText(c.b.CheckExplicit()); got != c.explicit {
			t.Errorf("%s: CheckExplicit %q, want %q", c.name, got, c.explicit)
		}
	}
}

func TestRatioSettingsCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		s    retrybudget.RatioSettings
		want string
	}{
		{"zero: the default window", retrybudget.RatioSettings{}, ""},
		{"ticks", retrybudget.RatioSettings{Ratio: 0.2, Window: 20, MinPerTick: 1}, ""},
		{"time", retrybudget.RatioSettings{Ratio: 0.2, WindowTime: time.Second}, ""},
		{"negative ratio", retrybudget.RatioSettings{Ratio: -1}, "ratio: must be a finite number >= 0"},
		{"infinite ratio", retrybudget.RatioSettings{Ratio: math.Inf(1)}, "ratio: must be a finite number >= 0"},
		{"window over the bound", retrybudget.RatioSettings{Window: retrybudget.MaxWindowTicks + 1}, "window: must be between 1 and 100000 ticks, or a duration"},
		{"both windows", retrybudget.RatioSettings{Window: 2, WindowTime: time.Second}, "window: give ticks or a duration, not both"},
		{"negative minimum", retrybudget.RatioSettings{MinPerTick: -1}, "min_per_tick: must be >= 0"},
	} {
		if got := errText(c.s.Check()); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
