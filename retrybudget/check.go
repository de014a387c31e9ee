package retrybudget

import (
	"math"

	"github.com/cycled/cycled/internal/setting"
)

// Check reports the backoff's settings out of their bounds (each a field as a
// configuration file names it), as Run takes them: a zero Factor means its default. The
// one set of rules for a backoff; the engine's validation and the configuration's ask
// here.
func (b Backoff) Check() error { return b.check(false) }

// CheckExplicit is Check for a backoff whose every field was given (a configuration
// file's, its omitted fields filled with the defaults): a zero factor is then refused.
func (b Backoff) CheckExplicit() error { return b.check(true) }

func (b Backoff) check(explicit bool) error {
	var es []*setting.Error
	if b.Base < 0 {
		es = append(es, setting.Errorf("base", "must be >= 0"))
	}
	if !(b.Factor >= 1) && (explicit || b.Factor != 0) { // NaN too
		es = append(es, setting.Errorf("factor", "must be >= 1"))
	}
	if b.Max < 0 {
		es = append(es, setting.Errorf("max", "must be >= 0"))
	}
	if !(b.Jitter >= 0 && b.Jitter <= 1) { // NaN too
		es = append(es, setting.Errorf("jitter", "must be between 0 and 1"))
	}
	return setting.Join(es)
}

// Check reports the budget's settings out of their bounds (each a field as a
// configuration file names it): a zero Window means DefaultWindow unless WindowTime is
// set. The one set of rules for a retry budget.
func (s RatioSettings) Check() error {
	var es []*setting.Error
	if !(s.Ratio >= 0) || math.IsInf(s.Ratio, 0) {
		es = append(es, setting.Errorf("ratio", "must be a finite number >= 0"))
	}
	if s.Window < 0 || s.Window > MaxWindowTicks {
		es = append(es, setting.Errorf("window", "must be between 1 and %d ticks, or a duration", MaxWindowTicks))
	}
	if s.WindowTime < 0 {
		es = append(es, setting.Errorf("window", "must be > 0"))
	}
	if s.Window > 0 && s.WindowTime > 0 {
		es = append(es, setting.Errorf("window", "give ticks or a duration, not both"))
	}
	if s.MinPerTick < 0 {
		es = append(es, setting.Errorf("min_per_tick", "must be >= 0"))
	}
	return setting.Join(es)
}
