package modules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/internal/strictdecode"
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
	Reset bool `yaml:"reset"`
	// Latency replaces the latency when set.
	Latency *Latency `yaml:"latency"`
	// FailRate replaces the failure probability when set.
	FailRate *float64 `yaml:"fail_rate"`
	// FailKind replaces the kind of injected failures when set.
	FailKind *fault.Kind `yaml:"fail_kind"`
	// FailTicks replaces the failure windows when set (an empty list clears them).
	FailTicks *[]Window `yaml:"fail_ticks"`
	// FailAttempts replaces the number of failing first attempts when set.
	FailAttempts *int `yaml:"fail_attempts"`
	// Hang replaces the hang duration when set.
	Hang *time.Duration `yaml:"hang"`
	// Panic replaces the panic switch when set.
	Panic *bool `yaml:"panic"`
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

// DecodeFaultsPatch decodes a FaultsPatch from a JSON object with the field names of the
// configuration: reset, latency ("2ms" or "1ms-5ms"), fail_rate, fail_kind, fail_ticks
// ([[3, 9]]), fail_attempts, hang ("2s") and panic. Decoding is strict (the decoder of the
// configuration file and of POST /modules): malformed JSON, trailing data, a key given
// twice, an unknown field or a value of the wrong JSON type give a *DecodeError; a value
// of the right type that does not parse (a duration, a latency, a fault kind) gives a
// *tiers.ValidationError. A field's problems carry its name as the path (a problem inside
// it, such as one window of fail_ticks, says where in its message); a malformed body has
// an empty path.
func DecodeFaultsPatch(body []byte) (FaultsPatch, error) {
	var p FaultsPatch
	n, ps := strictdecode.JSONObject(body, `{"fail_rate": 0.5}`)
	if ps != nil {
		return p, &DecodeError{Problems: ps}
	}
	d := strictdecode.NewJSON()
	d.Decode(n, &p, "")
	failed := func(path string) bool {
		return slices.ContainsFunc(d.Problems, func(q tiers.Problem) bool { return q.Path == path })
	}
	if p.FailKind != nil && *p.FailKind == fault.KindNone && !failed("fail_kind") {
		d.Fail("fail_kind", nil, "unknown fault kind %q", fault.KindNone.String())
	}
	ps = atFields(d.Problems)
	if d.Shapes > 0 {
		return p, &DecodeError{Problems: ps}
	}
	return p, ps.Err()
}

// atFields puts each problem at the field of the body it is in: "fail_ticks[0]: want a
// list of 2 items" becomes "fail_ticks: [0]: want a list of 2 items".
func atFields(ps tiers.Problems) tiers.Problems {
	for i, q := range ps {
		if j := strings.IndexAny(q.Path, ".["); j > 0 {
			rest := strings.TrimPrefix(q.Path[j:], ".")
			ps[i] = tiers.Problem{Path: q.Path[:j], Message: rest + ": " + q.Message}
		}
	}
	return ps
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
