package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/tiers"
)

// maxNodes bounds the nodes one decode visits, so that YAML aliases cannot expand a small
// file into an exponential amount of work ("billion laughs").
const maxNodes = 200_000

// decoder decodes a yaml.Node tree into Go values strictly: every key must name a field,
// every scalar must parse into its field's type. It keeps going after a problem so that a
// whole file's mistakes are reported at once, each with its field path.
type decoder struct {
	problems tiers.Problems
	shapes   int                   // problems of shape: unknown keys, wrong types
	present  map[string]bool       // paths of the keys given (with a non-null value)
	origins  map[*yaml.Node]string // where injected nodes come from ("env CYCLED_X")
	lines    bool                  // mention line numbers in messages
	json     bool                  // the tree came from JSON: scalars must have their field's JSON type
	budget   int
	overrun  bool
}

func newDecoder(lines bool) *decoder {
	return &decoder{present: map[string]bool{}, origins: map[*yaml.Node]string{}, lines: lines, budget: maxNodes}
}

// maxProblems caps the problems one decode reports.
const maxProblems = 100

// fail records a problem at path, noting where the offending node came from.
func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	switch {
	case len(d.problems) > maxProblems:
		return
	case len(d.problems) == maxProblems:
		d.problems = append(d.problems, tiers.Problem{Path: path, Message: "too many problems; the rest are not reported"})
		return
	}
	if path == "" {
		path = "(top level)"
	}
	msg := fmt.Sprintf(format, args...)
	if src, ok := d.origins[n]; ok {
		msg += " (from " + src + ")"
	} else if d.lines && n != nil && n.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", n.Line)
	}
	d.problems = append(d.problems, tiers.Problem{Path: path, Message: msg})
}

// failShape records a problem of shape (an unknown key, a value of the wrong type), as
// opposed to a value of the right type that does not parse or is out of range.
func (d *decoder) failShape(path string, n *yaml.Node, format string, args ...any) {
	d.shapes++
	d.fail(path, n, format, args...)
}

// spend counts a node against the budget and reports whether decoding may go on.
func (d *decoder) spend(path string, n *yaml.Node) bool {
	d.budget--
	if d.budget >= 0 {
		return true
	}
	if !d.overrun {
		d.overrun = true
		d.fail(path, n, "document too large or too deeply aliased (more than %d nodes)", maxNodes)
	}
	return false
}

// join appends key to path. A key that is empty or holds spaces, quotes, brackets or
// control characters is quoted, so that every path is non-empty and unambiguous.
func join(path, key string) string {
	if key == "" || strings.ContainsFunc(key, func(r rune) bool {
		return r <= ' ' || r == '"' || r == '[' || r == ']' || r == 0x7f || !strconv.IsPrint(r)
	}) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// sub appends the relative path rel ("fail_ticks[0]") to path.
func sub(path, rel string) string {
	switch {
	case rel == "":
		return path
	case path == "":
		return rel
	}
	return path + "." + rel
}

// deref follows aliases and unwraps documents.
func (d *decoder) deref(n *yaml.Node, path string) *yaml.Node {
	for n != nil {
		switch n.Kind {
		case yaml.AliasNode:
			if !d.spend(path, n) {
				return nil
			}
			n = n.Alias
		case yaml.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// pair is one key and value of a mapping after merge keys ("<<") were expanded.
type pair struct {
	key, val *yaml.Node
	name     string
}

// pairs returns the entries of mapping n; merged entries come first and are overridden by
// explicit ones. Non-string keys are reported.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	at := map[string]int{}
	put := func(p pair) {
		if i, ok := at[p.name]; ok {
			out[i] = p
			return
		}
		at[p.name] = len(out)
		out = append(out, p)
	}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.spend(path, k) {
			return out
		}
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			src := d.deref(v, path)
			var maps []*yaml.Node
			switch {
			case src == nil:
			case src.Kind == yaml.MappingNode:
				maps = append(maps, src)
			case src.Kind == yaml.SequenceNode:
				for _, e := range src.Content {
					if m := d.deref(e, path); m != nil && m.Kind == yaml.MappingNode {
						maps = append(maps, m)
					} else {
						d.failShape(path, e, "a merge key (<<) takes mappings")
					}
				}
			default:
				d.failShape(path, v, "a merge key (<<) takes a mapping")
			}
			for _, m := range maps {
				merged = append(merged, d.pairs(m, path)...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.failShape(path, k, "keys must be strings, got %s", kindName(k))
			continue
		}
		out = append(out, pair{key: k, val: v, name: k.Value})
	}
	explicit := out
	out = nil
	for _, p := range merged {
		put(p)
	}
	for _, p := range explicit {
		put(p)
	}
	return out
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decode decodes n into v (addressable), reporting problems at path. A null or absent
// node leaves v as it is, so pre-filled defaults survive.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.spend(path, n) {
		return
	}
	n = d.deref(n, path)
	if isNull(n) {
		return
	}
	t := v.Type()
	if t == headerValueType && n.Kind == yaml.ScalarNode {
		d.headerScalar(n, v, path)
		return
	}
	if d.json && n.Kind == yaml.ScalarNode && !d.jsonTyped(n, t, path) {
		return
	}
	if t == durationType {
		d.duration(n, v, path)
		return
	}
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			d.failShape(path, n, "want a string, got %s", kindName(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(path, n, "%v", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		if t.NumMethod() != 0 {
			d.failShape(path, n, "cannot decode into %s", t)
			return
		}
		if x, ok := d.plain(n, path); ok {
			if x == nil {
				v.SetZero()
			} else {
				v.Set(reflect.ValueOf(x))
			}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.failShape(path, n, "want a mapping, got %s", kindName(n))
			return
		}
		d.structure(n, v, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.failShape(path, n, "want a mapping, got %s", kindName(n))
			return
		}
		if t.Key().Kind() != reflect.String {
			d.failShape(path, n, "cannot decode into %s", t)
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(t))
		}
		for _, p := range d.pairs(n, path) {
			kp := join(path, p.name)
			ev := reflect.New(t.Elem()).Elem()
			if old := v.MapIndex(reflect.ValueOf(p.name).Convert(t.Key())); old.IsValid() {
				ev.Set(old)
			}
			if !isNull(d.deref(p.val, kp)) {
				d.present[kp] = true
			}
			d.decode(p.val, ev, kp)
			v.SetMapIndex(reflect.ValueOf(p.name).Convert(t.Key()), ev)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.failShape(path, n, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.decode(e, s.Index(i), index(path, i))
		}
		v.Set(s)
	case reflect.Array:
		if n.Kind != yaml.SequenceNode || len(n.Content) != t.Len() {
			d.failShape(path, n, "want a list of %d items, got %s", t.Len(), kindName(n))
			return
		}
		for i, e := range n.Content {
			d.decode(e, v.Index(i), index(path, i))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.failShape(path, n, "want a string, got %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind == yaml.ScalarNode {
			switch strings.ToLower(n.Value) {
			case "true":
				v.SetBool(true)
				return
			case "false":
				v.SetBool(false)
				return
			}
		}
		d.failShape(path, n, "want true or false, got %s", kindName(n))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits())
		if n.Kind != yaml.ScalarNode || err != nil {
			d.failShape(path, n, "want an integer, got %s", kindName(n))
			return
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits())
		if n.Kind != yaml.ScalarNode || err != nil {
			d.failShape(path, n, "want a non-negative integer, got %s", kindName(n))
			return
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(n.Value, t.Bits())
		if n.Kind != yaml.ScalarNode || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			d.failShape(path, n, "want a finite number, got %s", kindName(n))
			return
		}
		v.SetFloat(x)
	default:
		d.failShape(path, n, "cannot decode into %s", t)
	}
}

var byteSizeType = reflect.TypeFor[ByteSize]()

// jsonTyped reports whether the JSON scalar n has the JSON type that t takes, and records
// a problem of shape when it does not: a JSON body is strictly typed, so a string where a
// number or a bool belongs (or a number where a string belongs) is refused rather than
// parsed, as POST /modules/{name}/faults refuses it. Durations and other textual values
// (ttl, latency, policy, fail_kind) take strings; a size (max_body) takes a string or an
// integer. A YAML file is not held to this: its scalars, and the environment's overrides,
// are read by the field's type.
func (d *decoder) jsonTyped(n *yaml.Node, t reflect.Type, path string) bool {
	var tags []string
	var want string
	switch {
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface:
		return true // checked at the element, or any JSON value
	case t == byteSizeType:
		tags, want = []string{"!!str", "!!int"}, "a size such as \"1MiB\" or 1048576"
	case t == durationType:
		tags, want = []string{"!!str"}, "a duration string such as \"150ms\""
	case reflect.PointerTo(t).Implements(textUnmarshalerType), t.Kind() == reflect.String:
		tags, want = []string{"!!str"}, "a string"
	case t.Kind() == reflect.Bool:
		tags, want = []string{"!!bool"}, "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		tags, want = []string{"!!int"}, "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		tags, want = []string{"!!int", "!!float"}, "a number"
	default:
		return true
	}
	if slices.Contains(tags, n.Tag) {
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

// duration parses "150ms"; a bare 0 is accepted, other bare numbers are refused because
// their unit would be a guess.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
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
			d.fail(path, n, "invalid duration %q: give a unit, e.g. %sms or %ss", s, s, s)
			return
		}
		d.fail(path, n, "invalid duration %q (want e.g. 150ms, 2s, 1m)", s)
		return
	}
	v.SetInt(int64(x))
}

// field is a struct field addressed by its yaml key.
type field struct {
	name  string
	index []int
}

// fieldsOf lists the yaml keys of struct type t; fields tagged ",inline" contribute
// their own keys. Fields without a yaml tag or tagged "-" are not decoded.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("yaml")
		if !ok || tag == "-" || !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" && sf.Type.Kind() == reflect.Struct {
			for _, f := range fieldsOf(sf.Type) {
				f.index = append([]int{i}, f.index...)
				out = append(out, f)
			}
			continue
		}
		out = append(out, field{name: name, index: []int{i}})
	}
	return out
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	fs := fieldsOf(v.Type())
	byName := make(map[string]field, len(fs))
	names := make([]string, 0, len(fs))
	for _, f := range fs {
		byName[f.name] = f
		names = append(names, f.name)
	}
	for _, p := range d.pairs(n, path) {
		kp := join(path, p.name)
		f, ok := byName[p.name]
		if !ok {
			msg := "unknown key"
			if s := suggest(p.name, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.failShape(kp, p.key, "%s", msg)
			continue
		}
		if !isNull(d.deref(p.val, kp)) {
			d.present[kp] = true
		}
		d.decode(p.val, v.FieldByIndex(f.index), kp)
	}
}

// plain converts n into JSON-compatible Go values: map[string]any, []any, string, bool,
// int64 / uint64 / float64 (finite), nil.
func (d *decoder) plain(n *yaml.Node, path string) (any, bool) {
	if !d.spend(path, n) {
		return nil, false
	}
	n = d.deref(n, path)
	if isNull(n) {
		return nil, true
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		ok := true
		for _, p := range d.pairs(n, path) {
			x, good := d.plain(p.val, join(path, p.name))
			ok = ok && good
			m[p.name] = x
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, e := range n.Content {
			x, good := d.plain(e, index(path, i))
			ok = ok && good
			s[i] = x
		}
		return s, ok
	}
	switch n.Tag {
	case "!!bool":
		switch strings.ToLower(n.Value) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	case "!!int":
		if x, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err == nil {
			return x, true
		}
		if x, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err == nil {
			return x, true
		}
		if x, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(x, 0) {
			return x, true
		}
		d.fail(path, n, "integer %s out of range", n.Value)
		return nil, false
	case "!!float":
		x, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			d.fail(path, n, "want a finite number, got %q", n.Value)
			return nil, false
		}
		return x, true
	}
	return n.Value, true
}

// suggest returns the candidate closest to s when it is close enough to be a typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if dd := levenshtein(s, c); dd < bestD {
			best, bestD = c, dd
		}
	}
	return best
}

func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// encodePlain renders v as JSON-friendly values with the configuration's key names:
// structs by their yaml tags (inline fields flattened), durations and text marshalers as
// strings, maps with sorted keys.
func encodePlain(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	if t == durationType {
		return time.Duration(v.Int()).String()
	}
	if p, ok := v.Interface().(plainer); ok && t.Kind() != reflect.Pointer {
		return p.plainValue()
	}
	if t.Implements(reflect.TypeFor[encoding.TextMarshaler]()) && (t.Kind() != reflect.Pointer || !v.IsNil()) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return encodePlain(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for _, f := range fieldsOf(t) {
			m[f.name] = encodePlain(v.FieldByIndex(f.index))
		}
		return m
	case reflect.Map:
		m := map[string]any{}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			m[fmt.Sprint(k.Interface())] = encodePlain(v.MapIndex(k))
		}
		return m
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = encodePlain(v.Index(i))
		}
		return s
	}
	return v.Interface()
}
