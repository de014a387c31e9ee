package api_test

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/api"
)

// operations are the HTTP methods an OpenAPI path item may describe.
var operations = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIRoundTrips decodes the description, encodes it and decodes it again: the two
// decodings are equal, and no mapping holds a key without a value, the mark of a flow
// mapping cut short by an unquoted ", " (`{description: a, b}` reads as the keys
// "description" and "b").
func TestOpenAPIRoundTrips(t *testing.T) {
	var first any
	if err := yaml.Unmarshal(api.OpenAPI(), &first); err != nil {
		t.Fatalf("the description is not YAML: %v", err)
	}
	out, err := yaml.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	var second any
	if err := yaml.Unmarshal(out, &second); err != nil {
		t.Fatalf("the re-encoded description is not YAML: %v", err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Error("the description changes when it is encoded and decoded again")
	}
	for _, p := range nullKeys(first, "") {
		t.Errorf("%s: a key without a value (an unquoted comma in a flow mapping?)", p)
	}
	for _, p := range unknownKeywords(first, "", false) {
		t.Errorf("%s: not a JSON Schema keyword (an unquoted comma in a flow mapping?)", p)
	}
}

// schemaKeywords are the JSON Schema 2020-12 and OpenAPI 3.1 keywords a schema of the
// description may use; a key cut from a description by an unquoted comma is none of them.
var schemaKeywords = map[string]bool{
	"$ref": true, "type": true, "enum": true, "const": true, "format": true, "description": true,
	"title": true, "default": true, "examples": true, "example": true, "deprecated": true,
	"properties": true, "additionalProperties": true, "required": true, "items": true,
	"allOf": true, "oneOf": true, "anyOf": true, "not": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "minLength": true, "maxLength": true,
	"minItems": true, "maxItems": true, "pattern": true, "uniqueItems": true, "readOnly": true,
	"writeOnly": true, "nullable": true,
}

// unknownKeywords lists the paths of the keys of every schema in v (one reached through
// "schema", "schemas", "properties", "items", "additionalProperties" or a composition)
// that are neither JSON Schema keywords nor extensions (x-…).
func unknownKeywords(v any, path string, isSchema bool) []string {
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if isSchema && !schemaKeywords[k] && !strings.HasPrefix(k, "x-") {
				found = append(found, path+"/"+k)
			}
			sub := v[k]
			switch {
			case k == "schemas" || (isSchema && k == "properties"):
				m, _ := sub.(map[string]any)
				for _, name := range slices.Sorted(maps.Keys(m)) {
					found = append(found, unknownKeywords(m[name], path+"/"+k+"/"+name, true)...)
				}
			case k == "schema" || (isSchema && (k == "items" || k == "additionalProperties" || k == "not")):
				found = append(found, unknownKeywords(sub, path+"/"+k, true)...)
			case isSchema && (k == "allOf" || k == "oneOf" || k == "anyOf"):
				list, _ := sub.([]any)
				for i, e := range list {
					found = append(found, unknownKeywords(e, fmt.Sprintf("%s/%s/%d", path, k, i), true)...)
				}
			case !isSchema:
				found = append(found, unknownKeywords(sub, path+"/"+k, false)...)
			}
		}
	case []any:
		for i, e := range v {
			found = append(found, unknownKeywords(e, fmt.Sprintf("%s/%d", path, i), false)...)
		}
	}
	return found
}

// TestNullKeysFindsCutFlowMappings shows that the round-trip test catches the defects it
// exists for: a cut-off text read as a key without a value, or with one.
func TestNullKeysFindsCutFlowMappings(t *testing.T) {
	var doc any
	if err := yaml.Unmarshal([]byte("a: {type: integer, description: Steps, lowest first.}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	if got := nullKeys(doc, ""); !slices.Equal(got, []string{"/a/lowest first."}) {
		t.Errorf("nullKeys = %q, want the cut-off text as a key", got)
	}
	if err := yaml.Unmarshal([]byte("schemas: {A: {properties: {a: {type: string, description: Steps, shed first: yes}}}}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	if got := unknownKeywords(doc, "", false); !slices.Equal(got, []string{"/schemas/A/properties/a/shed first"}) {
		t.Errorf("unknownKeywords = %q, want the cut-off text as a key", got)
	}
}

// nullKeys lists the paths of the mapping keys whose value is null.
func nullKeys(v any, path string) []string {
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if v[k] == nil {
				found = append(found, path+"/"+k)
				continue
			}
			found = append(found, nullKeys(v[k], path+"/"+k)...)
		}
	case []any:
		for _, e := range v {
			found = append(found, nullKeys(e, path+"/[]")...)
		}
	}
	return found
}

// spec is the part of the description the route tests read.
type spec struct {
	Paths map[string]map[string]struct {
		OperationID string `yaml:"operationId"`
	} `yaml:"paths"`
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	var s spec
	if err := yaml.Unmarshal(api.OpenAPI(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOpenAPIOperationIDs: every operation has an operationId, and no two share one.
func TestOpenAPIOperationIDs(t *testing.T) {
	seen := map[string]string{}
	for path, item := range loadSpec(t).Paths {
		for method, op := range item {
			if !slices.Contains(operations, method) {
				continue
			}
			where := strings.ToUpper(method) + " " + path
			switch prev, dup := seen[op.OperationID]; {
			case op.OperationID == "":
				t.Errorf("%s has no operationId", where)
			case dup:
				t.Errorf("%s and %s share the operationId %q", where, prev, op.OperationID)
			}
			seen[op.OperationID] = where
		}
	}
}

// pathParam matches a path parameter of either notation: chi's {name} and trailing *, the
// description's {name}.
var pathParam = regexp.MustCompile(`\{[^}]*\}|\*$`)

// TestOpenAPIRoutesMatchRouter: the routes the router serves are the operations of the
// description, no more and no fewer (HEAD, which chi answers for every GET, aside).
func TestOpenAPIRoutesMatchRouter(t *testing.T) {
	r := newRig(t, rigOptions{})
	h := api.New(api.Options{Engine: r.e})
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("api.New returned a %T, not a chi router", h)
	}
	var served []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+pathParam.ReplaceAllString(route, "{}"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for path, item := range loadSpec(t).Paths {
		for method := range item {
			if slices.Contains(operations, method) {
				described = append(described, strings.ToUpper(method)+" "+pathParam.ReplaceAllString(path, "{}"))
			}
		}
	}
	slices.Sort(served)
	slices.Sort(described)
	for _, s := range served {
		if !slices.Contains(described, s) {
			t.Errorf("the router serves %s, which the description does not describe", s)
		}
	}
	for _, d := range described {
		if !slices.Contains(served, d) {
			t.Errorf("the description describes %s, which the router does not serve", d)
		}
	}
}
