package didyoumean_test

import (
	"testing"

	"github.com/cycled/cycled/internal/didyoumean"
)

func TestHint(t *testing.T) {
	tiers := []string{"safety", "perception", "knowledge", "planning", "execution"}
	for _, tt := range []struct {
		name, in, want string
	}{
		{"one letter missing", "safty", ` (did you mean "safety"?)`},
		{"two letters off", "knowlege", ` (did you mean "knowledge"?)`},
		{"too far", "vision", ""},
		{"exact name", "planning", ` (did you mean "planning"?)`},
		{"no candidates", "safty", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tiers
			if tt.name == "no candidates" {
				c = nil
			}
			if got := didyoumean.Hint(tt.in, c); got != tt.want {
				t.Errorf("Hint(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if got := didyoumean.HintOr("db", []string{"llm"}, "declare it under breakers"); got != " (declare it under breakers)" {
		t.Errorf("HintOr without a suggestion = %q", got)
	}
	if got := didyoumean.HintOr("lm", []string{"llm"}, "declare it under breakers"); got != ` (did you mean "llm"?)` {
		t.Errorf("HintOr with a suggestion = %q", got)
	}
}
