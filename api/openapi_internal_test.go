package api

import (
	stdencoding "encoding"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// TestOpenAPIDeclaresEveryField: every JSON field of the types the API encodes is a
// property of its schema in the description, the fields that only rare answers carry (an
// ended emergency, a skipped tier, a failed asynchronous run, a rate breaker's window)
// included. The conformance test in deploy/check checks the same of a real daemon's
// answers, every route's.
func TestOpenAPIDeclaresEveryField(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, typ := range map[string]reflect.Type{
		"Summary":        reflect.TypeFor[faultsummary.Summary](),
		"BreakerEvent":   reflect.TypeFor[faultsummary.BreakerEvent](),
		"EmergencyEvent": reflect.TypeFor[faultsummary.EmergencyEvent](),
		"ShedEvent":      reflect.TypeFor[faultsummary.ShedEvent](),
		"Module":         reflect.TypeFor[moduleView](),
		"Registered":     reflect.TypeFor[registeredView](),
		"Breaker":        reflect.TypeFor[breakerView](),
		"Bulkhead":       reflect.TypeFor[bulkheadView](),
		"Health":         reflect.TypeFor[health](),
		"TickList":       reflect.TypeFor[tickPage](),
		"EventList":      reflect.TypeFor[eventPage](),
		"Error":          reflect.TypeFor[errorBody](),
		"Problem":        reflect.TypeFor[tiers.Problem](),
	} {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("the description has no schema %s", name)
			continue
		}
		for _, f := range undeclaredFields(schemas, s, typ, name) {
			t.Errorf("%s is encoded but not declared in the description", f)
		}
	}
}

// Types that encode themselves are left to the answers' check (deploy/check).
var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[stdencoding.TextMarshaler]()
)

// schemaBranches is schema s with its $ref resolved in schemas and its allOf, oneOf and
// anyOf parts: a field is declared when one of them declares it.
func schemaBranches(schemas map[string]any, s any) []map[string]any {
	m, _ := s.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		m, _ = schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	if m == nil {
		return nil
	}
	out := []map[string]any{m}
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		list, _ := m[k].([]any)
		for _, b := range list {
			out = append(out, schemaBranches(schemas, b)...)
		}
	}
	return out
}

// undeclaredFields lists the JSON fields of typ that schema s does not declare.
func undeclaredFields(schemas map[string]any, s any, typ reflect.Type, path string) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Implements(jsonMarshaler) || typ.Implements(textMarshaler) || typ == reflect.TypeFor[time.Time]() {
		return nil
	}
	bs := schemaBranches(schemas, s)
	sub := func(key string) []any {
		var out []any
		for _, b := range bs {
			if v, ok := b[key]; ok {
				out = append(out, v)
			}
		}
		return out
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		return undeclaredFields(schemas, map[string]any{"anyOf": sub("items")}, typ.Elem(), path+"[]")
	case reflect.Map:
		return undeclaredFields(schemas, map[string]any{"anyOf": sub("additionalProperties")}, typ.Elem(), path+"{}")
	case reflect.Struct:
	default:
		return nil
	}
	var found []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
			continue
		case f.Anonymous && name == "":
			found = append(found, undeclaredFields(schemas, s, f.Type, path)...)
			continue
		case name == "":
			name = f.Name
		}
		var props []any
		for _, b := range bs {
			ps, _ := b["properties"].(map[string]any)
			if p, ok := ps[name]; ok {
				props = append(props, p)
			}
		}
		if len(props) == 0 {
			found = append(found, path+"."+name)
			continue
		}
		found = append(found, undeclaredFields(schemas, map[string]any{"anyOf": props}, f.Type, path+"."+name)...)
	}
	return found
}
