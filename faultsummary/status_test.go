package faultsummary

import "testing"

// The status table is whole and codeOf is its inverse: every row has a name, a class and
// a doc, names are distinct, and a name maps back to its row's code; what is not a status
// maps to NoStatus, which has no property.
func TestStatusTable(t *testing.T) {
	seen := map[Status]bool{}
	for c := NoStatus + 1; c < numStatusCodes; c++ {
		row := c.Info()
		if row.Code != c || row.Name == "" || row.Class == "" || row.Doc == "" || seen[row.Name] {
			t.Errorf("row %d: %+v", c, row)
		}
		seen[row.Name] = true
		if got := codeOf(row.Name); got != c {
			t.Errorf("codeOf(%q) = %d, want %d", row.Name, got, c)
		}
		if row.Produced && (!row.Ran || !row.Nominal) {
			t.Errorf("%s: produced a value without running, or as a degradation", row.Name)
		}
		if row.Name.Failing() == row.Nominal || !row.Name.Valid() || c.Public() != row.Name {
			t.Errorf("%s: Failing %v Valid %v Public %q", row.Name, row.Name.Failing(), row.Name.Valid(), c.Public())
		}
	}
	if len(Statuses()) != int(numStatusCodes)-1 {
		t.Errorf("Statuses returns %d rows, want %d", len(Statuses()), numStatusCodes-1)
	}
	for _, s := range []Status{"", "OK", "quarantined"} {
		if s.Code() != NoStatus || s.Valid() || s.Failing() || s.Nominal() || s.Ran() || s.Produced() || s.Searchable() {
			t.Errorf("%q is taken for a status", s)
		}
	}
	if NoStatus.Public() != "" || NoStatus.Nominal() {
		t.Error("NoStatus is neither published nor nominal")
	}
	for _, ts := range TierStatuses() {
		if !ts.Name.Valid() || ts.Class == "" {
			t.Errorf("tier status %+v", ts)
		}
	}
	if TierStatus("fine").Valid() {
		t.Error(`"fine" is taken for a tier status`)
	}
}
