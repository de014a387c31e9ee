package api_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cycled/cycled/api"
)

// TestNamedAdminTokens checks that each named token is accepted, that the audit and the
// log line name the token's holder, that a wrong token is refused without naming anyone,
// and that replacing the set (a reload that rotated a token file) takes effect at once.
func TestNamedAdminTokens(t *testing.T) {
	tokens := api.NewTokens(api.AdminToken{Token: "unnamed"},
		api.AdminToken{Name: "alice", Token: "alice-token"}, api.AdminToken{Name: "bob@ops", Token: "bob-token"})
	var mu sync.Mutex
	var audit []api.AdminAction
	r := newRig(t, rigOptions{opts: func(o *api.Options) {
		o.AdminTokens = tokens
		o.Audit = func(a api.AdminAction) { mu.Lock(); audit = append(audit, a); mu.Unlock() }
	}})
	for _, tc := range []struct{ token, name string }{{"alice-token", "alice"}, {"bob-token", "bob@ops"}, {"unnamed", ""}} {
		r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer "+tc.token)
		mu.Lock()
		a := audit[len(audit)-1]
		mu.Unlock()
		if a.Name != tc.name || a.Token != api.TokenFingerprint(tc.token) || a.Route != "POST /emergency/reset" {
			t.Errorf("token of %q: audit %+v", tc.name, a)
		}
		found := false
		for _, e := range r.logs.FilterMessage("admin request").All() {
			if e.ContextMap()["token_name"] == tc.name || (tc.name == "" && e.ContextMap()["token_name"] == nil) {
				found = true
			}
		}
		if !found {
			t.Errorf("no admin log line names %q", tc.name)
		}
	}
	res, body := r.do(http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer mallory")
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", res.StatusCode, body)
	}
	for _, name := range []string{"alice", "bob"} {
		if strings.Contains(string(body), name) || strings.Contains(res.Header.Get("WWW-Authenticate"), name) {
			t.Errorf("the refusal of a wrong token reveals %q: %s", name, body)
		}
	}

	tokens.Set([]api.AdminToken{{Name: "alice", Token: "alice-rotated"}})
	r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer alice-token")
	r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer unnamed")
	r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer alice-rotated")
}
