package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// TestRemoteModuleSecrets: a remote module's headers come from a literal, the environment
// or a file; the module sends the values, and GET /config's view shows neither them nor
// the URL's query values.
func TestRemoteModuleSecrets(t *testing.T) {
	const secret = "s3cret-7a1e"
	t.Setenv("PLANNER_TOKEN", "env-"+secret)
	file := writeFile(t, "token", "  file-"+secret+"\n")
	c := mustLoad(t, `
modules:
  - name: planner
    tier: planning
    kind: http
    http:
      url: "http://127.0.0.1:9000/plan?api_key=`+secret+`&v=2"
      headers:
        Authorization: {env: PLANNER_TOKEN}
        X-Api-Key: {file: '`+file+`'}
        X-Literal: lit-`+secret+`
        X-Mapped: {value: map-`+secret+`}
`)
	_, regs, err := c.Engine()
	if err != nil {
		t.Fatal(err)
	}
	h := regs[0].Module.(*modules.HTTP)
	want := map[string]string{"Authorization": "env-" + secret, "X-Api-Key": "file-" + secret, "X-Literal": "lit-" + secret, "X-Mapped": "map-" + secret}
	if got := h.Settings().Headers; !mapsEqual(got, want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	b, _ := json.Marshal(c.Redacted())
	s := string(b)
	if strings.Contains(s, secret) {
		t.Fatalf("GET /config view shows a secret: %s", s)
	}
	for _, w := range []string{`"url":"http://127.0.0.1:9000/plan?api_key=***\u0026v=***"`, `"Authorization":{"env":"PLANNER_TOKEN"}`,
		`"X-Api-Key":{"file":"` + file + `"}`, `"X-Literal":"***"`, `"X-Mapped":"***"`} {
		if !strings.Contains(s, w) {
			t.Errorf("view lacks %s: %s", w, s)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRemoteModuleHeaderProblems(t *testing.T) {
	t.Setenv("SET_VAR", "x")
	_, err := load(t, `
modules:
  - name: planner
    tier: planning
    kind: http
    http:
      url: "http://127.0.0.1:9000/plan"
      headers:
        A: {env: UNSET_VAR_4f1c}
        B: {file: /nonexistent/secret}
        C: {env: SET_VAR, file: /x}
        D: {envv: SET_VAR}
        Content-Type: text/plain
`)
	ps := problems(t, err)
	got := paths(ps)
	want := []string{"modules[0].http.headers.D.envv", "modules[0].http.headers.A.env", "modules[0].http.headers.B.file",
		"modules[0].http.headers.C", "modules[0].http.headers.Content-Type"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("paths %v, want %v\n%v", got, want, ps)
	}
	for _, p := range ps {
		if strings.Contains(p.Message, "secret") && p.Path != "modules[0].http.headers.B.file" {
			t.Errorf("%s", p)
		}
	}
}

func TestDecodeModuleHeaders(t *testing.T) {
	t.Setenv("PLANNER_TOKEN", "tok")
	body := []byte(`{"name": "p", "tier": "planning", "kind": "http",
		"http": {"url": "http://127.0.0.1:9000/p?k=v", "headers": {"Authorization": {"env": "PLANNER_TOKEN"}, "X-K": "lit"}}}`)
	var ve *tiers.ValidationError
	if _, err := config.DecodeModule(body); !errors.As(err, &ve) || ve.Problems[0].Path != "http.headers.Authorization.env" {
		t.Fatalf("a runtime registration reading an environment variable not listed: %v", err)
	}
	reg, err := config.DecodeModuleWith(body, config.WithHeaderSources(config.HeaderSources{Env: []string{"PLANNER_TOKEN"}}))
	if err != nil {
		t.Fatal(err)
	}
	if h := reg.Module.(*modules.HTTP).Settings().Headers; h["Authorization"] != "tok" || h["X-K"] != "lit" {
		t.Fatalf("headers %v", h)
	}
	_, err = config.DecodeModule([]byte(`{"name": "p", "tier": "planning", "kind": "http",
		"http": {"url": "http://127.0.0.1:9000/p", "headers": {"X-N": 5, "X-E": {"env": "NOT_SET_3b7"}}}}`))
	var de *config.DecodeError
	if err == nil || !strings.Contains(err.Error(), "http.headers.X-N") {
		t.Fatalf("a number as a header value: %v (%T, DecodeError %v)", err, err, de)
	}
}

// TestRuntimeHeaderSources: a runtime registration may read only the environment
// variables and files the configuration file lists; anything else is refused at its path
// before it is read, whatever exists.
func TestRuntimeHeaderSources(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME_TOKEN", "home")
	allow := config.HeaderSources{Env: []string{"HOME_TOKEN"}, File: []string{secret}}
	for _, tc := range []struct {
		name, header string
		src          config.HeaderSources
		path         string // "" : accepted
	}{
		{"literal", `"lit"`, config.HeaderSources{}, ""},
		{"env not listed", `{"env": "HOME_TOKEN"}`, config.HeaderSources{}, "http.headers.X.env"},
		{"file not listed", `{"file": "` + secret + `"}`, config.HeaderSources{}, "http.headers.X.file"},
		{"env listed", `{"env": "HOME_TOKEN"}`, allow, ""},
		{"file listed", `{"file": "` + secret + `"}`, allow, ""},
		{"file listed, written otherwise", `{"file": "` + dir + `/./secret"}`, allow, ""},
		{"another file", `{"file": "/etc/passwd"}`, allow, "http.headers.X.file"},
		{"another env", `{"env": "PATH"}`, allow, "http.headers.X.env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.DecodeModuleWith([]byte(`{"name": "p", "tier": "planning", "kind": "http",
				"http": {"url": "http://127.0.0.1:9/p", "headers": {"X": `+tc.header+`}}}`), config.WithHeaderSources(tc.src))
			var ve *tiers.ValidationError
			switch {
			case tc.path == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.path != "" && (!errors.As(err, &ve) || ve.Problems[0].Path != tc.path):
				t.Fatalf("%v, want a problem at %s", err, tc.path)
			}
		})
	}
}
