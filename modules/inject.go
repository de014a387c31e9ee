package modules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// ErrNotInjectable is wrapped by ApplyFaultsJSON when the module does not support runtime
// fault injection (it is not a builtin module).
var ErrNotInjectable = errors.New("module does not support fault injection")

// DecodeError is a fault-injection body that could not be decoded: malformed JSON, an
// unknown field, or a value of the wrong JSON type. An HTTP API answers it with 400, unlike
// a *tiers.ValidationError (well-formed but invalid values: 422). Its problems name the
// fields ("" for a malformed body) and include the invalid values found alongside.
type DecodeError struct {
	// Problems are the findings, each with its path.
	Problems tiers.Problems
}

// Error lists every problem.
func (e *DecodeError) Error() string {
	return "decode faults: " + (&tiers.ValidationError{Problems: e.Problems}).Error()
}

// Injectable is a module whose faults can be switched at runtime. *Builtin implements it.
type Injectable interface {
	// PatchFaults applies p atomically and returns the faults now in force.
	PatchFaults(p FaultsPatch) (Faults, error)
}

// FaultsPatch is a change of a builtin module's faults: the body of
// POST /modules/{name}/faults. Nil fields are left as they are; Reset first restores the
// configured faults, then the given fields apply on top of them.
type FaultsPatch struct {
	// Reset restores the configured faults before applying the other fields.
	Reset bool
	// Latency replaces the latency when set.
	Latency *Latency
	// FailRate replaces the failure probability when set.
	FailRate *float64
	// FailKind replaces the kind of injected failures when set.
	FailKind *fault.Kind
	// FailTicks replaces the failure windows when set (an empty list clears them).
	FailTicks *[]Window
	// FailAttempts replaces the number of failing first attempts when set.
	FailAttempts *int
	// Hang replaces the hang duration when set.
	Hang *time.Duration
	// Panic replaces the panic switch when set.
	Panic *bool
}

// apply returns base with p's fields set (Reset is the caller's business).
func (p FaultsPatch) apply(base Faults) Faults {
	f := base
	if p.Latency != nil {
		f.Latency = *p.Latency
	}
	if p.FailRate != nil {
		f.FailRate = *p.FailRate
	}
	if p.FailKind != nil {
		f.FailKind = *p.FailKind
	}
	if p.FailTicks != nil {
		f.FailTicks = slices.Clone(*p.FailTicks)
	}
	if p.FailAttempts != nil {
		f.FailAttempts = *p.FailAttempts
	}
	if p.Hang != nil {
		f.Hang = *p.Hang
	}
	if p.Panic != nil {
		f.Panic = *p.Panic
	}
	return f
}

// patchFields are the JSON fields of a FaultsPatch, in documentation order.
var patchFields = []string{"reset", "latency", "fail_rate", "fail_kind", "fail_ticks", "fail_attempts", "hang", "panic"}

// DecodeFaultsPatch decodes a FaultsPatch from a JSON object with the field names of the
// configuration: reset, latency ("2ms" or "1ms-5ms"), fail_rate, fail_kind, fail_ticks
// ([[3, 9]]), fail_attempts, hang ("2s") and panic. Decoding is strict: malformed JSON,
// trailing data, an unknown field or a value of the wrong JSON type give a *DecodeError;
// a value of the right type that does not parse (a duration, a latency, a fault kind)
// gives a *tiers.ValidationError. A field's problems carry its name as the path; a
// malformed body has an empty path.
func DecodeFaultsPatch(body []byte) (FaultsPatch, error) {
	var p FaultsPatch
	bad := func(path, format string, args ...any) error {
		return &DecodeError{Problems: tiers.Problems{{Path: path, Message: fmt.Sprintf(format, args...)}}}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return p, bad("", "empty body: want a JSON object such as {\"fail_rate\": 0.5}")
	}
	if trimmed[0] != '{' {
		return p, bad("", "want a JSON object such as {\"fail_rate\": 0.5}")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return p, bad("", "malformed JSON: %v", err)
	}
	if dec.InputOffset() != int64(len(trimmed)) {
		return p, bad("", "malformed JSON: data after the object")
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ps tiers.Problems
	shapes := 0
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	shape := func(path, format string, args ...any) {
		shapes++
		add(path, format, args...)
	}
	for _, k := range keys {
		if !slices.Contains(patchFields, k) {
			shape(k, "unknown field (want one of %s)", strings.Join(patchFields, ", "))
		}
	}
	str := func(k string) (string, bool) {
		var s string
		if err := json.Unmarshal(raw[k], &s); err != nil {
			shape(k, "want a string")
			return "", false
		}
		return s, true
	}
	for _, k := range patchFields {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			continue
		}
		switch k {
		case "reset":
			if err := json.Unmarshal(v, &p.Reset); err != nil {
				shape(k, "want true or false")
			}
		case "latency":
			if s, ok := str(k); ok {
				l, err := ParseLatency(s)
				if err != nil {
					add(k, "%v", err)
					continue
				}
				p.Latency = &l
			}
		case "fail_rate":
			var x float64
			if err := json.Unmarshal(v, &x); err != nil || !finite(x) {
				shape(k, "want a number between 0 and 1")
				continue
			}
			p.FailRate = &x
		case "fail_kind":
			if s, ok := str(k); ok {
				kd, err := fault.ParseKind(s)
				if err != nil || kd == fault.KindNone {
					add(k, "unknown fault kind %q", s)
					continue
				}
				p.FailKind = &kd
			}
		case "fail_ticks":
			// Decoded through [][]uint64 first: into a Window (an array), encoding/json
			// would drop a third number, or take one number for [n, 0], silently.
			var raw [][]uint64
			if err := json.Unmarshal(v, &raw); err != nil || slices.ContainsFunc(raw, func(x []uint64) bool { return len(x) != 2 }) {
				shape(k, "want a list of [first, last] tick windows such as [[3, 9]]")
				continue
			}
			var w []Window
			for _, x := range raw {
				w = append(w, Window{x[0], x[1]})
			}
			if w == nil {
				w = []Window{}
			}
			p.FailTicks = &w
		case "fail_attempts":
			var n int
			if err := json.Unmarshal(v, &n); err != nil {
				shape(k, "want an integer")
				continue
			}
			p.FailAttempts = &n
		case "hang":
			if s, ok := str(k); ok {
				d, err := time.ParseDuration(s)
				if err != nil {
					add(k, "invalid duration %q (want e.g. 2s)", s)
					continue
				}
				p.Hang = &d
			}
		case "panic":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				shape(k, "want true or false")
				continue
			}
			p.Panic = &b
		}
	}
	if shapes > 0 {
		return p, &DecodeError{Problems: ps}
	}
	return p, ps.Err()
}

// ApplyFaultsJSON decodes body as a FaultsPatch and applies it to m, returning the faults
// now in force. It is what POST /modules/{name}/faults calls. A module that does not
// implement Injectable gives an error wrapping ErrNotInjectable; a bad body or invalid
// resulting faults give a *DecodeError or a *tiers.ValidationError (as DecodeFaultsPatch;
// paths are the body's field names), and nothing changes.
func ApplyFaultsJSON(m tiers.Module, body []byte) (Faults, error) {
	inj, ok := m.(Injectable)
	if !ok {
		return Faults{}, fmt.Errorf("apply faults to %T: %w", m, ErrNotInjectable)
	}
	p, err := DecodeFaultsPatch(body)
	if err != nil {
		return Faults{}, err
	}
	return inj.PatchFaults(p)
}
