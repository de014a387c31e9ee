package strictdecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/tiers"
)

// jsonTyped reports whether the JSON scalar n has the JSON type that t takes, and records
// a problem of shape when it does not: a JSON body is strictly typed, so a string where a
// number or a bool belongs (or a number where a string belongs) is refused rather than
// parsed. Durations and other textual values take strings; a size takes a string or an
// integer. A YAML file is not held to this: its scalars, and the
// environment's overrides, are read by the field's type.
func (d *Decoder) jsonTyped(n *yaml.Node, t reflect.Type, path string) bool {
	tags, want := d.jsonTags(t)
	if tags == nil || slices.Contains(tags, n.Tag) {
		return true
	}
	got := n.Value
	switch n.Tag {
	case "!!str":
		got = "the string " + strconv.Quote(n.Value)
	case "!!int", "!!float":
		got = "the number " + n.Value
	}
	d.failShape(path, n, "want %s, got %s", want, got)
	return false
}

// jsonTags returns the node tags a JSON scalar may have for a field of type t, and how to
// say so; nil when any will do (or the element type decides).
func (d *Decoder) jsonTags(t reflect.Type) ([]string, string) {
	switch {
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface:
		return nil, "" // checked at the element, or any JSON value
	case slices.Contains(d.sizes, t):
		return []string{"!!str", "!!int"}, "a size such as \"1MiB\" or 1048576"
	case reflect.PointerTo(t).Implements(jsonScalarType):
		return reflect.New(t).Interface().(JSONScalar).JSONScalars()
	case t == durationType:
		return []string{"!!str"}, "a duration string such as \"150ms\""
	case reflect.PointerTo(t).Implements(textUnmarshalerType), t.Kind() == reflect.String:
		return []string{"!!str"}, "a string"
	case t.Kind() == reflect.Bool:
		return []string{"!!bool"}, "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return []string{"!!int"}, "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return []string{"!!int", "!!float"}, "a number"
	}
	return nil, ""
}

// JSONObject parses body, which must hold exactly one JSON object, into a node tree for a
// Decoder made with NewJSON. A body that is empty, not an object, malformed, holds a key
// twice or data after the object gives problems with the empty path (the body as a
// whole); example is shown to say what is wanted ({"fail_rate": 0.5}).
func JSONObject(body []byte, example string) (*yaml.Node, tiers.Problems) {
	bad := func(format string, args ...any) tiers.Problems {
		return tiers.Problems{{Message: fmt.Sprintf(format, args...)}}
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, bad("empty body: want a JSON object such as %s", example)
	}
	if body[0] != '{' {
		return nil, bad("want a JSON object such as %s", example)
	}
	n, err := jsonNode(body)
	if err != nil {
		return nil, bad("malformed JSON: %v", err)
	}
	return n, nil
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

// maxDepth bounds the nesting of a JSON body.
const maxDepth = 100

func jsonValue(dec *json.Decoder, depth int) (*yaml.Node, error) {
	if depth > maxDepth {
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
			return jsonMapping(dec, depth)
		case '[':
			return jsonSequence(dec, depth)
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

// jsonMapping parses the members of an object whose '{' was read, and its '}'.
func jsonMapping(dec *json.Decoder, depth int) (*yaml.Node, error) {
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
}

// jsonSequence parses the elements of an array whose '[' was read, and its ']'.
func jsonSequence(dec *json.Decoder, depth int) (*yaml.Node, error) {
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

// JSONScalar is a text type (encoding.TextUnmarshaler) that takes more JSON scalars than
// strings: JSONScalars returns their node tags ("!!str", "!!int", …) and how to say what
// is wanted. A module's priority, an integer or "critical", is one.
type JSONScalar interface {
	JSONScalars() (tags []string, want string)
}

var jsonScalarType = reflect.TypeFor[JSONScalar]()
