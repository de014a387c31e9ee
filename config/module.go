package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/cycle"
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

// DecodeModuleWith is DecodeModule with build options (WithClock, WithRand).
func DecodeModuleWith(body []byte, opts ...BuildOption) (cycle.Registration, error) {
	o := buildOptions{}
	for _, op := range opts {
		op.apply(&o)
	}
	m, err := decodeModuleConfig(body)
	if err != nil {
		return cycle.Registration{}, err
	}
	reg, ps := m.registration("", o)
	if err := ps.Err(); err != nil {
		return cycle.Registration{}, err
	}
	return reg, nil
}

func decodeModuleConfig(body []byte) (ModuleConfig, error) {
	bad := func(format string, args ...any) error {
		return &DecodeError{Problems: tiers.Problems{{Message: fmt.Sprintf(format, args...)}}}
	}
	if len(body) > MaxModuleBody {
		return ModuleConfig{}, bad("body larger than %d bytes", MaxModuleBody)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ModuleConfig{}, bad("empty body: want a JSON object such as {\"name\": \"probe\", \"tier\": \"perception\"}")
	}
	if body[0] != '{' {
		return ModuleConfig{}, bad("want a JSON object such as {\"name\": \"probe\", \"tier\": \"perception\"}")
	}
	n, err := jsonNode(body)
	if err != nil {
		return ModuleConfig{}, bad("malformed JSON: %v", err)
	}
	d := newDecoder(false)
	d.json = true
	m := ModuleConfig{Kind: KindBuiltin}
	d.decode(n, reflect.ValueOf(&m).Elem(), "")
	if m.Builtin != nil {
		m.Builtin.Faults.FailKind = m.Builtin.Faults.Kind()
	}
	if m.HTTP != nil && m.HTTP.MaxBody == 0 {
		m.HTTP.MaxBody = modules.DefaultMaxBody
	}
	ps := d.problems
	if m.Name == "" && !d.present["name"] {
		ps = append(ps, tiers.Problem{Path: "name", Message: "required"})
	} else if !tiers.ValidName(m.Name) && !slices.ContainsFunc(ps, func(p tiers.Problem) bool { return p.Path == "name" }) {
		ps = append(ps, tiers.Problem{Path: "name", Message: fmt.Sprintf("%q: use letters, digits, '.', '_' and '-'", m.Name)})
	}
	ps = mergeProblems(ps, m.check(""))
	if d.shapes > 0 {
		return ModuleConfig{}, &DecodeError{Problems: ps}
	}
	if err := ps.Err(); err != nil {
		return ModuleConfig{}, err
	}
	return m, nil
}

// jsonNode parses one JSON value into a yaml.Node tree, refusing duplicate keys and
// trailing data, so that JSON bodies go through the same strict decoder as files.
func jsonNode(b []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := jsonValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return n, nil
}

func jsonValue(dec *json.Decoder, depth int) (*yaml.Node, error) {
	if depth > 100 {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if seen[k] {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				seen[k] = true
				v, err := jsonValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := jsonValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}
