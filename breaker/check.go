package breaker

import (
	"time"

	"github.com/cycled/cycled/internal/setting"
)

// Check reports the settings out of their bounds (each a field as a configuration file
// names it, "failure_threshold: must be >= 1"), as New takes them: a zero field means its
// default (see WithDefaults) and is in bounds. The one set of rules for a breaker's
// settings; the engine's validation and the configuration's ask here.
func (s Settings) Check() error { return s.check(false) }

// CheckExplicit is Check for settings whose every field was given, as a configuration
// file's are once its omitted fields are filled with the defaults: a zero is then a value
// written, refused where it would silently mean the default.
func (s Settings) CheckExplicit() error { return s.check(true) }

// MaxCooldown bounds Cooldown: a breaker open for longer than an hour before a probe is
// a breaker open for good, a mistake (2000h for 2s) rather than a setting.
const MaxCooldown = time.Hour

func (s Settings) check(explicit bool) error {
	var es []*setting.Error
	bad := func(v, lowest int) bool { return v < lowest && (explicit || v != 0) }
	if bad(s.FailureThreshold, 1) {
		es = append(es, setting.Errorf("failure_threshold", "must be >= 1"))
	}
	switch {
	case explicit && s.Cooldown <= 0:
		es = append(es, setting.Errorf("cooldown", "must be > 0"))
	case s.Cooldown < 0:
		es = append(es, setting.Errorf("cooldown", "must be >= 0 (0 means %s)", time.Duration(defaultCooldown)))
	case s.Cooldown > MaxCooldown:
		es = append(es, setting.Errorf("cooldown", "%v is beyond the upper bound of %v", s.Cooldown, time.Duration(MaxCooldown)))
	}
	if bad(s.HalfOpenProbes, 1) {
		es = append(es, setting.Errorf("half_open_probes", "must be >= 1"))
	}
	if bad(s.HalfOpenSuccesses, 1) {
		es = append(es, setting.Errorf("half_open_successes", "must be >= 1"))
	}
	switch s.Kind {
	case Consecutive:
		// A rate field set on a consecutive breaker would be ignored.
		for _, f := range []struct {
			name string
			set  bool
		}{{"window", s.Window != 0}, {"min_ticks", s.MinTicks != 0}, {"failure_rate", s.FailureRate != 0}} {
			if f.set {
				es = append(es, setting.Errorf(f.name, "only for kind: rate"))
			}
		}
	case Rate:
		if bad(s.Window, 1) || s.Window > MaxWindow {
			es = append(es, setting.Errorf("window", "must be between 1 and %d", MaxWindow))
		}
		if bad(s.MinTicks, 1) || s.Window >= 1 && s.MinTicks > s.Window {
			es = append(es, setting.Errorf("min_ticks", "must be between 1 and window (%d)", s.Window))
		}
		if !(s.FailureRate > 0 && s.FailureRate <= 1) && (explicit || s.FailureRate != 0) { // NaN too
			es = append(es, setting.Errorf("failure_rate", "must be > 0 and <= 1"))
		}
	default:
		es = append(es, setting.Errorf("kind", "unknown breaker kind %s", s.Kind))
	}
	return setting.Join(es)
}
