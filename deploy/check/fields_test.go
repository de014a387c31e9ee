package check

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// description is api/openapi.yaml as plain data, read to find the fields an answer may
// carry. The validator checks types and required fields; it accepts a key no schema
// declares (JSON Schema's default), so a field added to an answer without the description
// would pass it. fields refuses such a key wherever it appears.
type description struct {
	doc   map[string]any
	paths []route // literal paths first, so /ticks/latest is not read as /ticks/{id}
}

// route is one path of the description with the pattern that matches its requests.
type route struct {
	template string
	match    *regexp.Regexp
	item     map[string]any
}

// paramPattern is a path parameter; the last one of a path may hold slashes
// (/blackboard/{key}, /ui/{path}).
var paramPattern = regexp.MustCompile(`\{[^}]+\}`)

func loadDescription(t *testing.T, spec []byte) *description {
	t.Helper()
	d := &description{}
	if err := yaml.Unmarshal(spec, &d.doc); err != nil {
		t.Fatal(err)
	}
	for tmpl, item := range d.doc["paths"].(map[string]any) {
		var pat strings.Builder
		parts := paramPattern.Split(tmpl, -1)
		for i, p := range parts {
			switch {
			case i == 0:
			case i == len(parts)-1 && p == "":
				pat.WriteString(`.+`)
			default:
				pat.WriteString(`[^/]+`)
			}
			pat.WriteString(regexp.QuoteMeta(p))
		}
		d.paths = append(d.paths, route{tmpl, regexp.MustCompile("^" + pat.String() + "$"), item.(map[string]any)})
	}
	slices.SortFunc(d.paths, func(a, b route) int {
		return strings.Count(a.template, "{") - strings.Count(b.template, "{")
	})
	return d
}

// operation returns the operation that answers method on path.
func (d *description) operation(method, path string) (map[string]any, error) {
	path, _, _ = strings.Cut(path, "?")
	for _, r := range d.paths {
		if r.match.MatchString(path) {
			if op, ok := r.item[strings.ToLower(method)].(map[string]any); ok {
				return op, nil
			}
		}
	}
	return nil, fmt.Errorf("no operation %s %s in the description", method, path)
}

// responseSchema returns the schema of the JSON answer with status to method on path.
func (d *description) responseSchema(method, path string, status int) (any, error) {
	op, err := d.operation(method, path)
	if err != nil {
		return nil, err
	}
	resp, ok := op["responses"].(map[string]any)[strconv.Itoa(status)]
	if !ok {
		return nil, fmt.Errorf("%s %s: no answer %d described", method, path, status)
	}
	content, _ := d.resolve(resp)["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	return media["schema"], nil
}

// resolve follows a local $ref.
func (d *description) resolve(s any) map[string]any {
	m, _ := s.(map[string]any)
	for m != nil && m["$ref"] != nil {
		var at any = d.doc
		for _, p := range strings.Split(strings.TrimPrefix(m["$ref"].(string), "#/"), "/") {
			at = at.(map[string]any)[p]
		}
		m, _ = at.(map[string]any)
	}
	return m
}

// branches is a schema with its allOf, oneOf and anyOf parts, resolved and flattened:
// a key is declared when one of them declares it.
func (d *description) branches(s any) []map[string]any {
	m := d.resolve(s)
	if m == nil {
		return nil
	}
	out := []map[string]any{m}
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		list, _ := m[k].([]any)
		for _, b := range list {
			out = append(out, d.branches(b)...)
		}
	}
	return out
}

// fields lists the paths of the keys of v (a decoded JSON answer) that its schema s does
// not declare. An object schema declares its keys by properties, or admits any key by
// additionalProperties (true or a schema, which then applies to the values); a schema
// that says nothing of the value's type (`{}`) admits anything.
func (d *description) fields(s any, v any, path string) []string {
	bs := d.branches(s)
	if len(bs) == 0 || !constrains(bs) {
		return nil
	}
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var sub []any
			free := false
			for _, b := range bs {
				props, _ := b["properties"].(map[string]any)
				if p, ok := props[k]; ok {
					sub = append(sub, p)
				}
				switch a := b["additionalProperties"].(type) {
				case bool:
					free = free || a
				case map[string]any:
					sub = append(sub, a)
				}
			}
			switch {
			case len(sub) > 0:
				found = append(found, d.fields(map[string]any{"anyOf": sub}, v[k], path+"/"+k)...)
			case !free:
				found = append(found, path+"/"+k)
			}
		}
	case []any:
		var items []any
		for _, b := range bs {
			if it, ok := b["items"]; ok {
				items = append(items, it)
			}
		}
		for i, e := range v {
			found = append(found, d.fields(map[string]any{"anyOf": items}, e, path+"/"+strconv.Itoa(i))...)
		}
	}
	return found
}

// constrains reports whether a schema's branches say anything of the value's shape.
func constrains(bs []map[string]any) bool {
	for _, b := range bs {
		for _, k := range []string{"type", "properties", "additionalProperties", "items", "enum", "const"} {
			if _, ok := b[k]; ok {
				return true
			}
		}
	}
	return false
}

// undeclared decodes a JSON body and lists its keys that the schema s does not declare.
func (d *description) undeclared(s any, body []byte) ([]string, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	return d.fields(s, v, ""), nil
}

// TestFieldsRefusesUndeclaredKeys shows that the check finds a key the description does
// not declare, at the top of an answer, inside a $ref, an array and an allOf.
func TestFieldsRefusesUndeclaredKeys(t *testing.T) {
	d := loadDescription(t, []byte(`
components:
  schemas:
    Line: {type: object, properties: {name: {type: string}}}
    Base: {type: object, properties: {id: {type: integer}}}
    Free: {type: object, additionalProperties: true}
    Map: {type: object, additionalProperties: {$ref: "#/components/schemas/Line"}}
paths:
  /things/{id}:
    get:
      responses:
        "200":
          content:
            application/json:
              schema:
                allOf:
                  - {$ref: "#/components/schemas/Base"}
                  - type: object
                    properties:
                      lines: {type: array, items: {$ref: "#/components/schemas/Line"}}
                      free: {$ref: "#/components/schemas/Free"}
                      byName: {$ref: "#/components/schemas/Map"}
                      any: {}
`))
	s, err := d.responseSchema("GET", "/things/7", 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		body string
		want []string
	}{
		{`{"id": 1, "lines": [{"name": "a"}], "free": {"x": 1}, "byName": {"k": {"name": "b"}}, "any": {"y": 2}}`, nil},
		{`{"id": 1, "extra": true}`, []string{"/extra"}},
		{`{"lines": [{"name": "a"}, {"name": "b", "new": 1}]}`, []string{"/lines/1/new"}},
		{`{"byName": {"k": {"nom": "b"}}}`, []string{"/byName/k/nom"}},
	} {
		got, err := d.undeclared(s, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: undeclared %q, want %q", c.body, got, c.want)
		}
	}
}
