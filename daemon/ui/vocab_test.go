package ui_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/cycled/cycled/faultsummary"
)

// jsTable returns the entries of the object literal `const name = { … };` in the dashboard's
// script: each key with the value of its class (`c: 'x'` for STATUS, the plain string for
// TIER_STATUS), in order.
func jsTable(t *testing.T, src []byte, name string) (keys []string, class map[string]string) {
	t.Helper()
	body := regexp.MustCompile(`const ` + name + ` = \{([^\n]*)\};`).FindSubmatch(src) // on one line
	if body == nil {
		body = regexp.MustCompile(`(?s)const ` + name + ` = \{(.*?)\n  \};`).FindSubmatch(src)
	}
	if body == nil {
		t.Fatalf("app.js: no object %s", name)
	}
	class = map[string]string{}
	entry := regexp.MustCompile(`(\w+): (?:\{[^}]*?\bc: '(\w+)'[^}]*\}|'(\w+)')`)
	for _, m := range entry.FindAllSubmatch(body[1], -1) {
		k := string(m[1])
		keys = append(keys, k)
		class[k] = string(m[2]) + string(m[3])
	}
	return keys, class
}

// The dashboard's legend and status drawing cover exactly the module and tier statuses of
// the status tables, with the class each table gives; it listens only to stream events
// that exist.
func TestDashboardVocabulary(t *testing.T) {
	src, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	keys, class := jsTable(t, src, "STATUS")
	var want []string
	for _, row := range faultsummary.Statuses() {
		want = append(want, string(row.Name))
		if class[string(row.Name)] != row.Class {
			t.Errorf("app.js STATUS.%s has class %q, the status table %q", row.Name, class[string(row.Name)], row.Class)
		}
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("app.js STATUS lists %v, the status table %v", keys, want)
	}
	keys, class = jsTable(t, src, "TIER_STATUS")
	want = want[:0]
	for _, row := range faultsummary.TierStatuses() {
		want = append(want, string(row.Name))
		if class[string(row.Name)] != row.Class {
			t.Errorf("app.js TIER_STATUS.%s is %q, the tier status table %q", row.Name, class[string(row.Name)], row.Class)
		}
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("app.js TIER_STATUS lists %v, the tier status table %v", keys, want)
	}
	for _, m := range regexp.MustCompile(`es\.addEventListener\('(\w+)'`).FindAllSubmatch(src, -1) {
		if !slices.Contains(faultsummary.EventTypes(), faultsummary.EventType(m[1])) {
			t.Errorf("app.js listens to stream event %q, which is not an event type", m[1])
		}
	}
}
