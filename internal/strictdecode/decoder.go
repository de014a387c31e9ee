package strictdecode

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cycled/cycled/internal/didyoumean"
	"github.com/cycled/cycled/tiers"
	"go.yaml.in/yaml/v3"
)

// MaxNodes bounds the nodes one decode visits, so that YAML aliases cannot expand a small
// file into an exponential amount of work ("billion laughs").
const MaxNodes = 200_000

// MaxProblems caps the problems one decode reports.
const MaxProblems = 100

// A Decoder decodes node trees into Go values and collects the problems it finds. Use one
// Decoder for one document: its findings accumulate.
type Decoder struct {
	// Problems are the findings so far, each with its path.
	Problems tiers.Problems
	// Shapes counts the problems of shape among them: unknown keys, wrong types.
	Shapes int
	// Present holds the paths of the keys given with a non-null value.
	Present map[string]bool
	// Origins says where injected nodes come from ("env CYCLED_X"); a problem at such a
	// node names its origin instead of a line.
	Origins map[*yaml.Node]string

	lines   bool           // mention line numbers in messages
	json    bool           // scalars must have their field's JSON type
	sizes   []reflect.Type // text types of sizes in bytes: a JSON body may give an integer
	budget  int
	overrun bool
}

// NewYAML returns a Decoder for a YAML file: problems mention their line, and a scalar is
// read by its field's type (an environment override is a string, whatever the field).
func NewYAML() *Decoder {
	d := newDecoder()
	d.lines = true
	return d
}

// NewJSON returns a Decoder for a JSON body parsed by JSONObject: scalars must have the
// JSON type their field takes. sizes lists the text types (encoding.TextUnmarshaler) of
// sizes in bytes, which take a string ("1MiB") or a JSON integer (1048576).
func NewJSON(sizes ...reflect.Type) *Decoder {
	d := newDecoder()
	d.json = true
	d.sizes = sizes
	return d
}

func newDecoder() *Decoder {
	return &Decoder{Present: map[string]bool{}, Origins: map[*yaml.Node]string{}, budget: MaxNodes}
}

// Decode decodes n into the value v points to, reporting problems under path ("" at the
// top). A null or absent node leaves the value as it is.
func (d *Decoder) Decode(n *yaml.Node, v any, path string) {
	d.decode(n, reflect.ValueOf(v).Elem(), path)
}

// Fail records a problem at path, noting where the offending node n (may be nil) came
// from: its origin when it was injected, else its line for a file.
func (d *Decoder) Fail(path string, n *yaml.Node, format string, args ...any) {
	switch {
	case len(d.Problems) > MaxProblems:
		return
	case len(d.Problems) == MaxProblems:
		d.Problems = append(d.Problems, tiers.Problem{Path: path, Message: "too many problems; the rest are not reported"})
		return
	}
	if path == "" {
		path = "(top level)"
	}
	msg := fmt.Sprintf(format, args...)
	if src, ok := d.Origins[n]; ok {
		msg += " (from " + src + ")"
	} else if d.lines && n != nil && n.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", n.Line)
	}
	d.Problems = append(d.Problems, tiers.Problem{Path: path, Message: msg})
}

// failShape records a problem of shape (an unknown key, a value of the wrong type), as
// opposed to a value of the right type that does not parse or is out of range.
func (d *Decoder) failShape(path string, n *yaml.Node, format string, args ...any) {
	d.Shapes++
	d.Fail(path, n, format, args...)
}

// spend counts a node against the budget and reports whether decoding may go on.
func (d *Decoder) spend(path string, n *yaml.Node) bool {
	d.budget--
	if d.budget >= 0 {
		return true
	}
	if !d.overrun {
		d.overrun = true
		d.Fail(path, n, "document too large or too deeply aliased (more than %d nodes)", MaxNodes)
	}
	return false
}

// deref follows aliases and unwraps documents.
func (d *Decoder) deref(n *yaml.Node, path string) *yaml.Node {
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

// IsNull reports whether n holds no value: absent, empty, or a YAML or JSON null.
func IsNull(n *yaml.Node) bool {
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
func (d *Decoder) pairs(n *yaml.Node, path string) []pair {
	var explicit, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.spend(path, k) {
			return explicit
		}
		switch {
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			for _, m := range d.mergeSources(v, path) {
				merged = append(merged, d.pairs(m, path)...)
			}
		case k.Kind != yaml.ScalarNode:
			d.failShape(path, k, "keys must be strings, got %s", kindName(k))
		default:
			for _, e := range explicit {
				if e.name == k.Value {
					d.duplicate(Join(path, k.Value), e.key, k)
				}
			}
			explicit = append(explicit, pair{key: k, val: v, name: k.Value})
		}
	}
	var out []pair
	at := map[string]int{}
	for _, p := range slices.Concat(merged, explicit) {
		if i, ok := at[p.name]; ok {
			out[i] = p
			continue
		}
		at[p.name] = len(out)
		out = append(out, p)
	}
	return out
}

// duplicate reports a key given twice in one mapping (first, then again): YAML forbids it,
// and taking the last silently would hide a whole section the author meant. Keys brought
// in by a merge ("<<") are not duplicates: the mapping's own keys override them.
func (d *Decoder) duplicate(path string, first, again *yaml.Node) {
	if d.lines && first.Line > 0 && again.Line > 0 {
		d.failShape(path, nil, "duplicate key %q (lines %d and %d)", again.Value, first.Line, again.Line)
		return
	}
	d.failShape(path, again, "duplicate key %q", again.Value)
}

// mergeSources returns the mappings a merge key's value v names: one mapping or a list.
func (d *Decoder) mergeSources(v *yaml.Node, path string) []*yaml.Node {
	src := d.deref(v, path)
	switch {
	case src == nil:
		return nil
	case src.Kind == yaml.MappingNode:
		return []*yaml.Node{src}
	case src.Kind == yaml.SequenceNode:
		var maps []*yaml.Node
		for _, e := range src.Content {
			if m := d.deref(e, path); m != nil && m.Kind == yaml.MappingNode {
				maps = append(maps, m)
			} else {
				d.failShape(path, e, "a merge key (<<) takes mappings")
			}
		}
		return maps
	}
	d.failShape(path, v, "a merge key (<<) takes a mapping")
	return nil
}

// A Field is a struct field addressed by its yaml key.
type Field struct {
	// Name is the key.
	Name string
	// Index is the field's index sequence for reflect.Value.FieldByIndex.
	Index []int
}

// Fields lists the yaml keys of struct type t; fields tagged ",inline" contribute their
// own keys. Fields without a yaml tag or tagged "-" are not decoded.
func Fields(t reflect.Type) []Field {
	var out []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("yaml")
		if !ok || tag == "-" || !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" && sf.Type.Kind() == reflect.Struct {
			for _, f := range Fields(sf.Type) {
				f.Index = append([]int{i}, f.Index...)
				out = append(out, f)
			}
			continue
		}
		out = append(out, Field{Name: name, Index: []int{i}})
	}
	return out
}

// maxListed is the most keys an unknown key's message lists when no key is close to it.
const maxListed = 12

// structure decodes mapping n into struct v, key by key.
func (d *Decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	fs := Fields(v.Type())
	byName := make(map[string]Field, len(fs))
	names := make([]string, 0, len(fs))
	for _, f := range fs {
		byName[f.Name] = f
		names = append(names, f.Name)
	}
	for _, p := range d.pairs(n, path) {
		kp := Join(path, p.name)
		f, ok := byName[p.name]
		if !ok {
			d.failShape(kp, p.key, "%s", unknownKey(p.name, names))
			continue
		}
		if !IsNull(d.deref(p.val, kp)) {
			d.Present[kp] = true
		}
		d.decode(p.val, v.FieldByIndex(f.Index), kp)
	}
}

// unknownKey is the message for key, which is none of names: the name it is probably a
// typo of, or the names when there are few.
func unknownKey(key string, names []string) string {
	if len(names) <= maxListed {
		return "unknown key" + didyoumean.HintOr(key, names, "want one of "+strings.Join(names, ", "))
	}
	return "unknown key" + didyoumean.Hint(key, names)
}
