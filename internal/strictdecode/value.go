package strictdecode

import (
	"encoding"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	scalarSetterType    = reflect.TypeFor[ScalarSetter]()
)

// ScalarSetter is implemented (on its pointer) by a value that is usually a mapping but
// may also be given as a plain string, such as a secret given either literally or as
// {env: NAME}: a scalar node is passed to SetScalar (in a JSON body it must be a string),
// a mapping is decoded as usual.
type ScalarSetter interface{ SetScalar(s string) }

// scalarSetter decodes the scalar n into v through its SetScalar.
func (d *Decoder) scalarSetter(n *yaml.Node, v reflect.Value, path string) {
	if d.json && n.Tag != "!!str" {
		d.failShape(path, n, "want a string or a mapping, got %s", kindName(n))
		return
	}
	v.Addr().Interface().(ScalarSetter).SetScalar(n.Value)
}

// decode decodes n into v (addressable), reporting problems at path. A null or absent
// node leaves v as it is, so pre-filled defaults survive.
func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.spend(path, n) {
		return
	}
	n = d.deref(n, path)
	if IsNull(n) {
		return
	}
	t := v.Type()
	switch {
	case n.Kind == yaml.ScalarNode && reflect.PointerTo(t).Implements(scalarSetterType):
		d.scalarSetter(n, v, path)
	case d.json && n.Kind == yaml.ScalarNode && !d.jsonTyped(n, t, path):
	case t == durationType:
		d.duration(n, v, path)
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		d.text(n, v, path)
	case t.Kind() == reflect.Interface:
		d.any(n, v, path)
	case t.Kind() == reflect.Struct:
		if d.want(n, yaml.MappingNode, path, "a mapping") {
			d.structure(n, v, path)
		}
	case t.Kind() == reflect.Map:
		if d.want(n, yaml.MappingNode, path, "a mapping") {
			d.mapping(n, v, path)
		}
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		d.list(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

// want reports whether n is of kind k, and records a problem of shape when it is not.
func (d *Decoder) want(n *yaml.Node, k yaml.Kind, path, what string) bool {
	if n.Kind == k {
		return true
	}
	d.failShape(path, n, "want %s, got %s", what, kindName(n))
	return false
}

// text decodes a scalar through the value's encoding.TextUnmarshaler.
func (d *Decoder) text(n *yaml.Node, v reflect.Value, path string) {
	if !d.want(n, yaml.ScalarNode, path, "a string") {
		return
	}
	if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
		d.Fail(path, n, "%v", err)
	}
}

// any decodes n into an empty interface as plain JSON-compatible values.
func (d *Decoder) any(n *yaml.Node, v reflect.Value, path string) {
	if v.Type().NumMethod() != 0 {
		d.failShape(path, n, "cannot decode into %s", v.Type())
		return
	}
	x, ok := d.plain(n, path)
	switch {
	case !ok:
	case x == nil:
		v.SetZero()
	default:
		v.Set(reflect.ValueOf(x))
	}
}

// mapping decodes mapping n into map v (string keys), on top of what v holds.
func (d *Decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		d.failShape(path, n, "cannot decode into %s", t)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	for _, p := range d.pairs(n, path) {
		kp := Join(path, p.name)
		key := reflect.ValueOf(p.name).Convert(t.Key())
		ev := reflect.New(t.Elem()).Elem()
		if old := v.MapIndex(key); old.IsValid() {
			ev.Set(old)
		}
		if !IsNull(d.deref(p.val, kp)) {
			d.Present[kp] = true
		}
		d.decode(p.val, ev, kp)
		v.SetMapIndex(key, ev)
	}
}

// list decodes sequence n into slice or array v; an array takes exactly its length.
func (d *Decoder) list(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if t.Kind() == reflect.Array {
		if n.Kind != yaml.SequenceNode || len(n.Content) != t.Len() {
			d.failShape(path, n, "want a list of %d items, got %s", t.Len(), kindName(n))
			return
		}
		for i, e := range n.Content {
			d.decode(e, v.Index(i), Index(path, i))
		}
		return
	}
	if !d.want(n, yaml.SequenceNode, path, "a list") {
		return
	}
	s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
	for i, e := range n.Content {
		d.decode(e, s.Index(i), Index(path, i))
	}
	v.Set(s)
}

// scalar decodes n into a string, bool or number by v's kind.
func (d *Decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	num := strings.ReplaceAll(n.Value, "_", "")
	isScalar := n.Kind == yaml.ScalarNode
	switch t.Kind() {
	case reflect.String:
		if d.want(n, yaml.ScalarNode, path, "a string") {
			v.SetString(n.Value)
		}
	case reflect.Bool:
		b, ok := parseBool(n.Value)
		if !isScalar || !ok {
			d.failShape(path, n, "want true or false, got %s", kindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(num, 0, t.Bits())
		if !isScalar || err != nil {
			d.failShape(path, n, "want an integer, got %s", kindName(n))
			return
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(num, 0, t.Bits())
		if !isScalar || err != nil {
			d.failShape(path, n, "want a non-negative integer, got %s", kindName(n))
			return
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(n.Value, t.Bits())
		if !isScalar || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			d.failShape(path, n, "want a finite number, got %s", kindName(n))
			return
		}
		v.SetFloat(x)
	default:
		d.failShape(path, n, "cannot decode into %s", t)
	}
}

// parseBool accepts true and false in any case, and nothing else (not YAML 1.1's yes/no).
func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// duration parses "150ms"; a bare 0 is accepted, other bare numbers are refused because
// their unit would be a guess.
func (d *Decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.failShape(path, n, "want a duration such as 150ms, got %s", kindName(n))
		return
	}
	s := strings.TrimSpace(n.Value)
	if s == "0" {
		v.SetInt(0)
		return
	}
	x, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			d.Fail(path, n, "invalid duration %q: give a unit, e.g. %sms or %ss", s, s, s)
			return
		}
		d.Fail(path, n, "invalid duration %q (want e.g. 150ms, 2s, 1m)", s)
		return
	}
	v.SetInt(int64(x))
}

// plain converts n into JSON-compatible Go values: map[string]any, []any, string, bool,
// int64 / uint64 / float64 (finite), nil.
func (d *Decoder) plain(n *yaml.Node, path string) (any, bool) {
	if !d.spend(path, n) {
		return nil, false
	}
	n = d.deref(n, path)
	if IsNull(n) {
		return nil, true
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		ok := true
		for _, p := range d.pairs(n, path) {
			x, good := d.plain(p.val, Join(path, p.name))
			ok = ok && good
			m[p.name] = x
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, e := range n.Content {
			x, good := d.plain(e, Index(path, i))
			ok = ok && good
			s[i] = x
		}
		return s, ok
	}
	return d.plainScalar(n, path)
}

// plainScalar converts scalar n by its tag; an untagged or string scalar is a string.
func (d *Decoder) plainScalar(n *yaml.Node, path string) (any, bool) {
	switch n.Tag {
	case "!!bool":
		if b, ok := parseBool(n.Value); ok {
			return b, true
		}
	case "!!int":
		num := strings.ReplaceAll(n.Value, "_", "")
		if x, err := strconv.ParseInt(num, 0, 64); err == nil {
			return x, true
		}
		if x, err := strconv.ParseUint(num, 0, 64); err == nil {
			return x, true
		}
		if x, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(x, 0) {
			return x, true
		}
		d.Fail(path, n, "integer %s out of range", n.Value)
		return nil, false
	case "!!float":
		x, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			d.Fail(path, n, "want a finite number, got %q", n.Value)
			return nil, false
		}
		return x, true
	}
	return n.Value, true
}
