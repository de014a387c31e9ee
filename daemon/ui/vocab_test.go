package ui_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cycled/cycled/faultsummary"
)

// jsTable returns the entries of the object literal `const name = { … };` in the dashboard's
// script: each key with the value of its class (`c: 'x'` for STATUS, the plain string for
// TIER_STATUS), in order, and the body of each entry. An entry marked derived (a status
// the page shows instead of another, not one of the summary) is left out.
func jsTable(t *testing.T, src []byte, name string) (keys []string, class, body map[string]string) {
	t.Helper()
	obj := regexp.MustCompile(`const ` + name + ` = \{([^\n]*)\};`).FindSubmatch(src) // on one line
	if obj == nil {
		obj = regexp.MustCompile(`(?s)const ` + name + ` = \{(.*?)\n  \};`).FindSubmatch(src)
	}
	if obj == nil {
		t.Fatalf("app.js: no object %s", name)
	}
	class, body = map[string]string{}, map[string]string{}
	entry := regexp.MustCompile(`(\w+): (?:(\{[^}]*?\bc: '(\w+)'[^}]*\})|'(\w+)')`)
	for _, m := range entry.FindAllSubmatch(obj[1], -1) {
		if regexp.MustCompile(`\bderived:`).Match(m[2]) {
			continue
		}
		k := string(m[1])
		keys = append(keys, k)
		class[k], body[k] = string(m[3])+string(m[4]), string(m[2])
	}
	return keys, class, body
}

// The dashboard's legend, status drawing and search filter cover exactly the module and
// tier statuses of the status tables, with the class and searchability each table gives;
// it listens only to stream events that exist.
func TestDashboardVocabulary(t *testing.T) {
	src, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	keys, class, body := jsTable(t, src, "STATUS")
	var want []string
	for _, row := range faultsummary.Statuses() {
		want = append(want, string(row.Name))
		if class[string(row.Name)] != row.Class {
			t.Errorf("app.js STATUS.%s has class %q, the status table %q", row.Name, class[string(row.Name)], row.Class)
		}
		if unsearchable := strings.Contains(body[string(row.Name)], "unsearchable: true"); unsearchable == row.Searchable {
			t.Errorf("app.js STATUS.%s: unsearchable %v, the status table's searchable %v", row.Name, unsearchable, row.Searchable)
		}
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("app.js STATUS lists %v, the status table %v", keys, want)
	}
	keys, class, _ = jsTable(t, src, "TIER_STATUS")
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
