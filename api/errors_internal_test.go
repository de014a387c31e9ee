package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/cycled/cycled/config"
)

// A reload of a file that is not YAML is rejected as invalid (422), not a server error.
func TestReloadSyntaxErrorIs422(t *testing.T) {
	st, e := classify(fmt.Errorf("reload: %w", config.ErrSyntax), http.StatusInternalServerError)
	if st != http.StatusUnprocessableEntity || e.Code != "invalid" {
		t.Fatalf("status %d code %q, want 422 invalid", st, e.Code)
	}
}
