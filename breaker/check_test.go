package breaker_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
)

// One set of rules, two readings of a zero: Check (the engine's settings, a zero field
// means its default) and CheckExplicit (a configuration file's, every field given).
func TestSettingsCheck(t *testing.T) {
	full := breaker.Settings{FailureThreshold: 5, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1}
	rate := full
	rate.Kind, rate.Window, rate.MinTicks, rate.FailureRate = breaker.Rate, 10, 5, 0.5
	for _, c := range []struct {
		name           string
		s              breaker.Settings
		check, explict string // the problems, "" for none
	}{
		{"complete", full, "", ""},
		{"complete rate", rate, "", ""},
		{"zero: every default", breaker.Settings{}, "",
			"failure_threshold: must be >= 1\ncooldown: must be > 0\nhalf_open_probes: must be >= 1\nhalf_open_successes: must be >= 1"},
		{"zero rate fields: their defaults", breaker.Settings{Kind: breaker.Rate, FailureThreshold: 1, Cooldown: 1, HalfOpenProbes: 1, HalfOpenSuccesses: 1}, "",
			"window: must be between 1 and 100000\nmin_ticks: must be between 1 and window (0)\nfailure_rate: must be > 0 and <= 1"},
		{"negative threshold", func() breaker.Settings { s := full; s.FailureThreshold = -1; return s }(),
			"failure_threshold: must be >= 1", "failure_threshold: must be >= 1"},
		{"negative cooldown", func() breaker.Settings { s := full; s.Cooldown = -time.Second; return s }(),
			"cooldown: must be >= 0 (0 means 30s)", "cooldown: must be > 0"},
		{"cooldown over the bound", func() breaker.Settings { s := full; s.Cooldown = 2 * time.Hour; return s }(),
			"cooldown: 2h0m0s is beyond the upper bound of 1h0m0s", "cooldown: 2h0m0s is beyond the upper bound of 1h0m0s"},
		{"rate field on a consecutive breaker", func() breaker.Settings { s := full; s.Window = 3; return s }(),
			"window: only for kind: rate", "window: only for kind: rate"},
		{"min_ticks above window", func() breaker.Settings { s := rate; s.MinTicks = 11; return s }(),
			"min_ticks: must be between 1 and window (10)", "min_ticks: must be between 1 and window (10)"},
		{"rate NaN", func() breaker.Settings { s := rate; s.FailureRate = math.NaN(); return s }(),
			"failure_rate: must be > 0 and <= 1", "failure_rate: must be > 0 and <= 1"},
		{"window over the bound", func() breaker.Settings { s := rate; s.Window, s.MinTicks = breaker.MaxWindow+1, 1; return s }(),
			"window: must be between 1 and 100000", "window: must be between 1 and 100000"},
		{"unknown kind", func() breaker.Settings { s := full; s.Kind = 7; return s }(),
			"kind: unknown breaker kind kind(7)", "kind: unknown breaker kind kind(7)"},
	} {
		if got := errText(c.s.Check()); got != c.check {
			t.Errorf("%s: Check\n got %q\nwant %q", c.name, got, c.check)
		}
		if got := errText(c.s.CheckExplicit()); got != c.explict {
			t.Errorf("%s: CheckExplicit\n got %q\nwant %q", c.name, got, c.explict)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
