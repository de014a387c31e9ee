package ha

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestStatusIsDescribed: every field of GET /ha's answer (Status, all fields set, the
// active daemon's too) is a property of the HAStatus schema of the API's description,
// which the daemon's other answers are checked against by deploy/check.
func TestStatusIsDescribed(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]schema `yaml:"schemas"`
		} `yaml:"components"`
	}
	spec, err := os.ReadFile("../../api/openapi.yaml") // this module lives in daemon/ha
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	desc, ok := doc.Components.Schemas["HAStatus"]
	if !ok {
		t.Fatal("the description has no HAStatus schema")
	}
	b, err := json.Marshal(Status{Role: "active", Node: "a", Epoch: 7, Active: &Leader{Node: "a", URL: "http://a", Epoch: 7},
		Since: time.Unix(1, 0), Reason: "lease lost", Error: "etcd unreachable", IDs: [2]uint64{1, 1024}, Refused: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		p, ok := desc.Properties[k]
		if !ok {
			t.Errorf("GET /ha answers %q, which HAStatus does not declare", k)
			continue
		}
		if sub, isObj := got[k].(map[string]any); isObj {
			for _, k2 := range slices.Sorted(maps.Keys(sub)) {
				if _, ok := p.Properties[k2]; !ok {
					t.Errorf("GET /ha answers %s.%s, which HAStatus does not declare", k, k2)
				}
			}
		}
	}
}

// schema is the part of a JSON Schema the test reads.
type schema struct {
	Properties map[string]schema `yaml:"properties"`
}
