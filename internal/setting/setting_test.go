package setting

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestReport(t *testing.T) {
	var got []string
	add := func(path, format string, args ...any) { got = append(got, path+": "+fmt.Sprintf(format, args...)) }
	Report("breakers.db", Join([]*Error{Errorf("cooldown", "must be > %d", 0), Errorf("", "whole")}), add)
	Report("x", errors.New("plain"), add)
	Report("y", nil, add)
	Report("z", Join(nil), add)
	want := []string{"breakers.db.cooldown: must be > 0", "breakers.db: whole", "x: plain"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestHas(t *testing.T) {
	err := Join([]*Error{Errorf("base", "x"), Errorf("factor", "y")})
	if !Has(err, "factor") || Has(err, "max") || Has(nil, "factor") {
		t.Fatal("Has does not find the fields err holds")
	}
}
