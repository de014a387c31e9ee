package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/retrybudget"
)

// BulkheadConfig is a bulkhead's settings (an item of "bulkheads").
type BulkheadConfig struct {
	// MaxInFlight is the number of runs of the modules naming it that may be in flight at
	// once, runs still outstanding from earlier ticks included. Required, at least 1.
	MaxInFlight int `yaml:"max_in_flight"`
	// Wait is how long a module may wait for a permit (within its tier's budget); 0
	// (default) rejects at once.
	Wait time.Duration `yaml:"wait"`
}

// RetryBudgetConfig is the "retry_budget" section.
type RetryBudgetConfig struct {
	// Tiers are the budgets of tiers, by tier name: every module of the tier that names
	// no downstream budget counts against it.
	Tiers map[string]RatioConfig `yaml:"tiers"`
	// Downstreams are the budgets of named downstreams (a module names one with
	// retry_budget: NAME).
	Downstreams map[string]RatioConfig `yaml:"downstreams"`
}

// RatioConfig is one retry budget.
type RatioConfig struct {
	// Ratio is the most retries per first attempt over the window (0.2: one retry for
	// five first attempts). Required.
	Ratio float64 `yaml:"ratio"`
	// Window is the window: a number of ticks (20) or a duration (5s). Default 10 ticks.
	Window RatioWindow `yaml:"window"`
	// MinPerTick is the number of retries per tick always allowed (default 0).
	MinPerTick int `yaml:"min_per_tick"`
}

// RatioWindow is a retry budget's window: ticks ("20") or a duration ("5s").
type RatioWindow struct {
	Ticks int
	Time  time.Duration
}

// MarshalText encodes w as its ticks or its duration ("" when unset).
func (w RatioWindow) MarshalText() ([]byte, error) {
	switch {
	case w.Time > 0:
		return []byte(w.Time.String()), nil
	case w.Ticks > 0:
		return []byte(strconv.Itoa(w.Ticks)), nil
	}
	return nil, nil
}

// UnmarshalText parses a number of ticks or a duration.
func (w *RatioWindow) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "" {
		*w = RatioWindow{}
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > retrybudget.MaxWindowTicks {
			return fmt.Errorf("window of %d ticks: must be between 1 and %d", n, retrybudget.MaxWindowTicks)
		}
		*w = RatioWindow{Ticks: n}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("invalid window %q (want a number of ticks such as 20, or a duration such as 5s)", s)
	}
	*w = RatioWindow{Time: d}
	return nil
}

// engine returns the engine's settings of r.
func (r RatioConfig) engine() retrybudget.RatioSettings {
	return retrybudget.RatioSettings{Ratio: r.Ratio, Window: r.Window.Ticks, WindowTime: r.Window.Time, MinPerTick: r.MinPerTick}
}

// resilienceEngine returns the engine's bulkheads and retry budgets of c (nil maps when
// none are configured).
func (c *Config) resilienceEngine() (map[string]bulkhead.Settings, cycle.RetryBudgets) {
	var bh map[string]bulkhead.Settings
	if len(c.Bulkheads) > 0 {
		bh = make(map[string]bulkhead.Settings, len(c.Bulkheads))
		for name, b := range c.Bulkheads {
			bh[name] = bulkhead.Settings{Name: name, MaxInFlight: b.MaxInFlight, Wait: b.Wait}
		}
	}
	var rb cycle.RetryBudgets
	for name, r := range c.RetryBudget.Tiers {
		if rb.Tiers == nil {
			rb.Tiers = make(map[string]retrybudget.RatioSettings)
		}
		rb.Tiers[name] = r.engine()
	}
	for name, r := range c.RetryBudget.Downstreams {
		if rb.Downstreams == nil {
			rb.Downstreams = make(map[string]retrybudget.RatioSettings)
		}
		rb.Downstreams[name] = r.engine()
	}
	return bh, rb
}
