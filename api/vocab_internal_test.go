package api

import (
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
)

// at walks the decoded description along path: map keys, or for a list the element whose
// "name" is the step.
func at(t *testing.T, doc any, path ...string) any {
	t.Helper()
	for i, step := range path {
		switch d := doc.(type) {
		case map[string]any:
			doc = d[step]
		case []any:
			doc = nil
			for _, e := range d {
				if m, ok := e.(map[string]any); ok && m["name"] == step {
					doc = m
				}
			}
		default:
			doc = nil
		}
		if doc == nil {
			t.Fatalf("openapi.yaml: nothing at %v", path[:i+1])
		}
	}
	return doc
}

func enumAt(t *testing.T, doc any, path ...string) []string {
	t.Helper()
	var out []string
	for _, v := range at(t, doc, path...).([]any) {
		out = append(out, v.(string))
	}
	slices.Sort(out)
	return out
}

// The HTTP description's enums of module statuses, tier statuses, fault kinds and recorded
// event kinds are those of the vocabularies' tables.
func TestOpenAPIVocabulary(t *testing.T) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		t.Fatal(err)
	}
	var all, searchable, async []string
	for _, row := range faultsummary.Statuses() {
		all = append(all, string(row.Name))
		if row.Searchable {
			searchable = append(searchable, string(row.Name))
		}
		if row.Async {
			async = append(async, string(row.Name))
		}
	}
	var tierStatuses []string
	for _, row := range faultsummary.TierStatuses() {
		tierStatuses = append(tierStatuses, string(row.Name))
	}
	kinds := recorder.EventKinds()
	faultKinds := []string{""} // no fault
	for _, k := range fault.Kinds() {
		faultKinds = append(faultKinds, k.String())
	}
	for _, c := range []struct {
		what string
		path []string
		want []string
	}{
		{"module statuses", []string{"components", "schemas", "ModuleLine", "properties", "status", "enum"}, all},
		{"searchable statuses", []string{"paths", "/ticks", "get", "parameters", "status", "schema", "enum"}, searchable},
		{"asynchronous statuses", []string{"components", "schemas", "AsyncRun", "properties", "status", "enum"}, async},
		{"tier statuses", []string{"components", "schemas", "TierLine", "properties", "status", "enum"}, tierStatuses},
		{"fault kinds", []string{"components", "schemas", "ModuleLine", "properties", "fault_kind", "enum"}, faultKinds},
		{"fault kinds", []string{"components", "schemas", "AsyncRun", "properties", "fault_kind", "enum"}, faultKinds},
		{"recorded event kinds", []string{"components", "schemas", "Event", "properties", "kind", "enum"}, kinds},
	} {
		want := slices.Sorted(slices.Values(c.want))
		if got := enumAt(t, doc, c.path...); !slices.Equal(got, want) {
			t.Errorf("openapi.yaml %v: %v, the table of %s %v", c.path, got, c.what, want)
		}
	}
}
