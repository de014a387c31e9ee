package config

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/internal/strictdecode"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// MaxModuleBody caps the JSON body accepted by DecodeModule.
const MaxModuleBody = 1 << 20

// DecodeError is a body that DecodeModule could not decode: malformed JSON, an unknown
// field, or a value of the wrong type (a string where a number belongs). An HTTP API
// answers it with 400, unlike a *tiers.ValidationError (well-formed but invalid: 422).
// Its problems name the fields, and include the invalid values found alongside.
type DecodeError struct {
	// Problems are the findings, each with its path ("" for a malformed body).
	Problems tiers.Problems
}

// Error lists every problem.
func (e *DecodeError) Error() string {
	return "decode module: " + (&tiers.ValidationError{Problems: e.Problems}).Error()
}

// DecodeModule decodes one module from a JSON object with exactly the field names of an
// item of "modules" in the configuration file ({"name": "probe", "tier": "perception",
// "builtin": {"latency": "2ms"}}, or {"name": "planner", "tier": "planning", "kind":
// "http", "http": {"url": "http://127.0.0.1:9000/tick"}}) and builds it. Decoding is
// strict: a malformed body, an unknown field or a value of the wrong type gives a
// *DecodeError. JSON types are strict: a string where a number or a bool belongs ("every":
// "3", "emergency": "true"), a number where a string belongs ("name": 123, "hang": 5) or a
// float where an integer belongs is a wrong type, never converted; durations, ttl, latency
// and the other textual values take strings, and http.max_body a string or an integer. A
// well-formed module with invalid values (a duration that does not parse,
// fail_rate 2, an http.url that is not an absolute http or https URL) gives a
// *tiers.ValidationError. Paths are relative to the object ("builtin.fail_rate",
// "http.url"); a malformed body has an empty path. The module is checked on its own
// (name, kind, builtin or http settings); its place in the running configuration (tier,
// keys, breaker) is checked by cycle.Engine.Register.
//
// Modules are built on the real clock; DecodeModuleWith takes build options (the engine's
// clock), and Reloader.DecodeModule uses the Reloader's.
func DecodeModule(body []byte) (cycle.Registration, error) { return DecodeModuleWith(body) }

// DecodeModuleWith is DecodeModule with build options (WithClock, WithRand,
// WithHeaderSources). A module registered at runtime takes header values from literals
// only, or from the environment variables and files WithHeaderSources lists: any other
// source is a *tiers.ValidationError at http.headers.NAME.env or .file, and nothing is read.
func DecodeModuleWith(body []byte, opts ...BuildOption) (cycle.Registration, error) {
	o := buildOptions{}
	for _, op := range opts {
		op.apply(&o)
	}
	m, err := decodeModuleConfig(body, o.sources)
	if err != nil {
		return cycle.Registration{}, err
	}
	reg, ps := m.registration("", o)
	if err := ps.Err(); err != nil {
		return cycle.Registration{}, err
	}
	return reg, nil
}

// decodeModuleConfig decodes and checks a module registered at runtime, whose header
// values may come from src besides literals.
func decodeModuleConfig(body []byte, src HeaderSources) (ModuleConfig, error) {
	if len(body) > MaxModuleBody {
		return ModuleConfig{}, &DecodeError{Problems: tiers.Problems{{Message: fmt.Sprintf("body larger than %d bytes", MaxModuleBody)}}}
	}
	n, ps := strictdecode.JSONObject(body, `{"name": "probe", "tier": "perception"}`)
	if ps != nil {
		return ModuleConfig{}, &DecodeError{Problems: ps}
	}
	d := strictdecode.NewJSON(reflect.TypeFor[ByteSize]())
	m := ModuleConfig{Kind: KindBuiltin}
	d.Decode(n, &m, "")
	if m.Builtin != nil {
		m.Builtin.Faults.FailKind = m.Builtin.Faults.Kind()
	}
	if m.HTTP != nil && m.HTTP.MaxBody == 0 {
		m.HTTP.MaxBody = modules.DefaultMaxBody
	}
	ps = d.Problems
	if m.Name == "" && !d.Present["name"] {
		ps = append(ps, tiers.Problem{Path: "name", Message: "required"})
	} else if !tiers.ValidName(m.Name) && !slices.ContainsFunc(ps, func(p tiers.Problem) bool { return p.Path == "name" }) {
		ps = append(ps, tiers.Problem{Path: "name", Message: fmt.Sprintf("%q: use letters, digits, '.', '_' and '-'", m.Name)})
	}
	if d.Shapes == 0 {
		if hps := m.checkHeaderSources(src); len(hps) > 0 {
			return ModuleConfig{}, hps.Err() // refused before any variable or file is read
		}
	}
	ps = mergeProblems(ps, m.check(""))
	if d.Shapes > 0 {
		return ModuleConfig{}, &DecodeError{Problems: ps}
	}
	if err := ps.Err(); err != nil {
		return ModuleConfig{}, err
	}
	return m, nil
}
