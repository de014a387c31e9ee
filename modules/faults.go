package modules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// Latency is how long a builtin module takes per attempt: Min when Min == Max, otherwise a
// duration drawn uniformly from [Min, Max]. It is written "2ms" or "1ms-5ms".
type Latency struct {
	// Min is the shortest latency.
	Min time.Duration
	// Max is the longest latency; equal to Min for a fixed latency.
	Max time.Duration
}

// FixedLatency returns a latency of exactly d.
func FixedLatency(d time.Duration) Latency { return Latency{Min: d, Max: d} }

// ParseLatency parses "2ms" (fixed) or "1ms-5ms" (a uniform range). The empty string is
// zero latency.
func ParseLatency(s string) (Latency, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Latency{}, nil
	}
	// A range separator is a '-' after the first character (a leading '-' is a sign).
	if i := strings.IndexByte(s[1:], '-'); i >= 0 {
		lo, hi := strings.TrimSpace(s[:i+1]), strings.TrimSpace(s[i+2:])
		min, err := time.ParseDuration(lo)
		if err != nil {
			return Latency{}, fmt.Errorf("invalid latency range %q: %w (want e.g. 1ms-5ms)", s, err)
		}
		max, err := time.ParseDuration(hi)
		if err != nil {
			return Latency{}, fmt.Errorf("invalid latency range %q: %w (want e.g. 1ms-5ms)", s, err)
		}
		return Latency{Min: min, Max: max}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if s == "0" {
			return Latency{}, nil
		}
		return Latency{}, fmt.Errorf("invalid latency %q: %w (want e.g. 2ms or 1ms-5ms)", s, err)
	}
	return FixedLatency(d), nil
}

// String returns "2ms" for a fixed latency and "1ms-5ms" for a range.
func (l Latency) String() string {
	if l.Min == l.Max {
		return l.Min.String()
	}
	return l.Min.String() + "-" + l.Max.String()
}

// IsZero reports whether l never waits.
func (l Latency) IsZero() bool { return l.Min <= 0 && l.Max <= 0 }

// MarshalText encodes l as String does.
func (l Latency) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses l as ParseLatency does.
func (l *Latency) UnmarshalText(b []byte) error {
	v, err := ParseLatency(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// pick draws a latency with u uniform in [0, 1).
func (l Latency) pick(u float64) time.Duration {
	if l.Max <= l.Min {
		return l.Min
	}
	return l.Min + time.Duration(u*float64(l.Max-l.Min))
}

// Window is an inclusive range of tick ids [from, to], written [3, 9] in configuration.
type Window [2]uint64

// Contains reports whether tick lies in w.
func (w Window) Contains(tick uint64) bool { return tick >= w[0] && tick <= w[1] }

// Upper bounds of injected delays: a longer one could never be observed (every tier
// budget is far shorter, and an abandoned attempt would keep its module busy for longer
// than a test or a demo runs), so it is refused as a mistake.
const (
	// MaxLatency is the largest latency of a builtin module.
	MaxLatency = time.Hour
	// MaxHang is the largest hang of a builtin module.
	MaxHang = time.Hour
)

// Faults are the injected faults of a builtin module. The zero value injects nothing.
// A Builtin holds its Faults immutably: change them with SetFaults or PatchFaults.
type Faults struct {
	// Latency is waited on every attempt, honouring the context: an attempt whose context
	// ends first returns the context's error.
	Latency Latency `yaml:"latency"`
	// FailRate is the probability that an attempt fails (in [0, 1]).
	FailRate float64 `yaml:"fail_rate"`
	// FailKind is the fault kind of every injected failure. KindNone means transient.
	FailKind fault.Kind `yaml:"fail_kind"`
	// FailTicks are inclusive tick windows in which every attempt fails.
	FailTicks []Window `yaml:"fail_ticks"`
	// FailAttempts makes the first N attempts of every tick fail.
	FailAttempts int `yaml:"fail_attempts"`
	// Hang blocks every attempt this long, ignoring the context (before the latency).
	Hang time.Duration `yaml:"hang"`
	// Panic makes every attempt panic.
	Panic bool `yaml:"panic"`
}

// Kind returns the fault kind of injected failures (FailKind, or transient when unset).
func (f Faults) Kind() fault.Kind {
	if f.FailKind == fault.KindNone {
		return fault.KindTransient
	}
	return f.FailKind
}

// Validate returns every problem of f, with paths relative to the builtin settings
// ("fail_rate", "fail_ticks[1]").
func (f Faults) Validate() tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case f.Latency.Min < 0 || f.Latency.Max < 0:
		add("latency", "must be >= 0")
	case f.Latency.Max > MaxLatency:
		add("latency", "must be at most %s", MaxLatency)
	case f.Latency.Min > f.Latency.Max:
		add("latency", "range minimum %s is above its maximum %s", f.Latency.Min, f.Latency.Max)
	}
	if !(f.FailRate >= 0 && f.FailRate <= 1) { // also rejects NaN
		add("fail_rate", "must be between 0 and 1")
	}
	if f.FailKind != fault.KindNone && !slices.Contains(fault.Kinds(), f.FailKind) {
		add("fail_kind", "unknown fault kind")
	}
	for i, w := range f.FailTicks {
		switch {
		case w[0] < 1:
			add(fmt.Sprintf("fail_ticks[%d]", i), "tick ids start at 1")
		case w[0] > w[1]:
			add(fmt.Sprintf("fail_ticks[%d]", i), "window start %d is after its end %d", w[0], w[1])
		}
	}
	if f.FailAttempts < 0 || f.FailAttempts > tiers.MaxAttempts {
		add("fail_attempts", "must be between 0 and %d", tiers.MaxAttempts)
	}
	if f.Hang < 0 || f.Hang > MaxHang {
		add("hang", "must be between 0 and %s", MaxHang)
	}
	return ps
}

// clone returns a copy of f that shares no memory with it, with the kind resolved.
func (f Faults) clone() Faults {
	f.FailTicks = slices.Clone(f.FailTicks)
	f.FailKind = f.Kind()
	return f
}

// faultsJSON is the JSON form of Faults: durations as strings, like the configuration.
type faultsJSON struct {
	Latency      string     `json:"latency"`
	FailRate     float64    `json:"fail_rate"`
	FailKind     fault.Kind `json:"fail_kind"`
	FailTicks    []Window   `json:"fail_ticks"`
	FailAttempts int        `json:"fail_attempts"`
	Hang         string     `json:"hang"`
	Panic        bool       `json:"panic"`
}

// MarshalJSON encodes f with the field names of the configuration and durations as
// strings ("2ms", "1ms-5ms").
func (f Faults) MarshalJSON() ([]byte, error) {
	ticks := f.FailTicks
	if ticks == nil {
		ticks = []Window{}
	}
	return json.Marshal(faultsJSON{Latency: f.Latency.String(), FailRate: f.FailRate, FailKind: f.Kind(),
		FailTicks: ticks, FailAttempts: f.FailAttempts, Hang: f.Hang.String(), Panic: f.Panic})
}

// Settings configure a builtin module: the value it returns and its faults.
type Settings struct {
	// Value is returned as-is by every successful attempt.
	Value any `yaml:"value"`
	// Faults are the configured faults; a reset of runtime fault injection restores them.
	Faults Faults `yaml:",inline"`
}

// MarshalJSON encodes s flat, as in the configuration: value next to the fault fields.
func (s Settings) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(s.Faults)
	if err != nil {
		return nil, err
	}
	v, err := json.Marshal(s.Value)
	if err != nil {
		return nil, fmt.Errorf("builtin value: %w", err)
	}
	out := make([]byte, 0, len(b)+len(v)+10)
	out = append(out, `{"value":`...)
	out = append(out, v...)
	out = append(out, ',')
	return append(out, b[1:]...), nil
}
