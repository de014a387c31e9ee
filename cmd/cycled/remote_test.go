package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// remoteModule is a loopback server playing an http module: it answers every tick with
// {"value": {"n": <requests so far>}} and records what it received.
type remoteModule struct {
	srv *httptest.Server

	mu     sync.Mutex
	bodies []map[string]json.RawMessage
	keys   []string
}

func newRemoteModule(t *testing.T) *remoteModule {
	rm := &remoteModule{}
	rm.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		rm.mu.Lock()
		rm.bodies = append(rm.bodies, body)
		rm.keys = append(rm.keys, r.Header.Get("Idempotency-Key"))
		n := len(rm.bodies)
		rm.mu.Unlock()
		fmt.Fprintf(w, `{"value": {"n": %d}}`, n)
	}))
	t.Cleanup(rm.srv.Close)
	return rm
}

func (rm *remoteModule) requests() int {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return len(rm.bodies)
}

func (rm *remoteModule) last() (map[string]json.RawMessage, string) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if len(rm.bodies) == 0 {
		return nil, ""
	}
	return rm.bodies[len(rm.bodies)-1], rm.keys[len(rm.keys)-1]
}

// status returns a module's status in a summary ("" when absent).
func (s summary) status(name string) string {
	for _, m := range s.Modules {
		if m.Name == name {
			return m.Status
		}
	}
	return ""
}

type apiErr struct {
	Error struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Field    string `json:"field"`
		Problems []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"problems"`
	} `json:"error"`
}

// TestDaemonRemoteModuleRegistration registers an http module at runtime on the real
// binary, ticks, restarts the daemon (the registration survives and runs), then
// deregisters it and restarts again (it stays gone).
func TestDaemonRemoteModuleRegistration(t *testing.T) {
	rm := newRemoteModule(t)
	stateDir := t.TempDir()
	cfgPath := write(t, "cycled.yaml", stepConfig+"state_dir: "+stateDir+"\n")
	d := start(t, nil, "--config", cfgPath)

	body := `{"name": "remote", "tier": "perception", "kind": "http", "reads": ["guard.result"], "ttl": "2s",
		"http": {"url": "` + rm.srv.URL + `/tick", "max_body": "64KiB"}}`
	var created struct {
		Name    string `json:"name"`
		Origin  string `json:"origin"`
		Pending bool   `json:"pending"`
	}
	if st := d.do("POST", "/modules", body, &created); st != http.StatusCreated || created.Name != "remote" || !created.Pending {
		t.Fatalf("POST /modules = %d %+v", st, created)
	}

	// Duplicate: 409. Invalid: 422 with field paths, through the same code path as config.
	var e apiErr
	if st := d.do("POST", "/modules", body, &e); st != http.StatusConflict {
		t.Fatalf("duplicate = %d %+v", st, e)
	}
	e = apiErr{}
	if st := d.do("POST", "/modules", `{"name": "bad", "tier": "perception", "kind": "http", "http": {"url": "ftp://x", "max_body": "1GiB"}}`, &e); st != http.StatusUnprocessableEntity ||
		e.Error.Field != "http.url" || len(e.Error.Problems) != 2 || e.Error.Problems[1].Field != "http.max_body" {
		t.Fatalf("invalid = %d %+v", st, e)
	}
	e = apiErr{}
	if st := d.do("POST", "/modules", `{"name": "bad", "tier": "perception", "kind": "http", "http": {"url": "http://x", "hedaers": {}}}`, &e); st != http.StatusBadRequest ||
		e.Error.Field != "http.hedaers" {
		t.Fatalf("unknown field = %d %+v", st, e)
	}
	e = apiErr{}
	if st := d.do("POST", "/modules", `{"name": "bad", "tier": "nowhere", "kind": "http", "http": {"url": "http://x"}}`, &e); st != http.StatusUnprocessableEntity ||
		e.Error.Field != "tier" {
		t.Fatalf("unknown tier = %d %+v", st, e)
	}
	e = apiErr{}
	if st := d.do("POST", "/modules", `{"name": "bad", "tier": "knowlege", "kind": "http", "http": {"url": "http://x"}}`, &e); st != http.StatusUnprocessableEntity ||
		e.Error.Field != "tier" || !strings.Contains(e.Error.Message, `unknown tier "knowlege" (did you mean "knowledge"?)`) {
		t.Fatalf("misspelled tier = %d %+v", st, e)
	}
	if rm.requests() != 0 {
		t.Fatal("the remote was called before the next tick")
	}

	// The next tick runs it; its value is on the blackboard.
	var s summary
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK || s.status("remote") != "ok" || rm.requests() != 1 {
		t.Fatalf("tick: %d %+v, %d requests", st, s, rm.requests())
	}
	got, key := rm.last()
	if key != fmt.Sprintf("%d-remote", s.TickID) || !strings.Contains(string(got["inputs"]), `"guard.result"`) {
		t.Fatalf("remote saw key %q inputs %s", key, got["inputs"])
	}
	var entry struct {
		Value  map[string]any `json:"value"`
		Source string         `json:"source"`
	}
	if st := d.do("GET", "/blackboard/remote.result", "", &entry); st != http.StatusOK || entry.Source != "live" || entry.Value["n"] != 1.0 {
		t.Fatalf("GET /blackboard/remote.result = %d %+v", st, entry)
	}
	var view struct {
		Origin string `json:"origin"`
		Kind   string `json:"kind"`
		HTTP   struct {
			URL     string `json:"url"`
			MaxBody int64  `json:"max_body"`
		} `json:"http"`
		Last struct {
			Status string `json:"status"`
		} `json:"last"`
	}
	if st := d.do("GET", "/modules/remote", "", &view); st != http.StatusOK || view.Origin != "runtime" || view.Last.Status != "ok" ||
		view.Kind != "http" || view.HTTP.URL != rm.srv.URL+"/tick" || view.HTTP.MaxBody != 64<<10 {
		t.Fatalf("GET /modules/remote = %d %+v", st, view)
	}
	// A module of the configuration file cannot be deregistered.
	if st := d.do("DELETE", "/modules/guard", "", &e); st != http.StatusConflict {
		t.Fatalf("DELETE /modules/guard = %d", st)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, d.stderr())
	}

	// Restart: the registration is restored and runs on the first tick.
	d = start(t, nil, "--config", cfgPath)
	d.waitLog("runtime module restored")
	if st := d.do("GET", "/modules/remote", "", &view); st != http.StatusOK || view.Origin != "runtime" {
		t.Fatalf("after restart: GET /modules/remote = %d %+v\n%s", st, view, d.stderr())
	}
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK || s.status("remote") != "ok" || rm.requests() != 2 {
		t.Fatalf("tick after restart: %d %+v, %d requests", st, s, rm.requests())
	}

	// Deregistration persists.
	if st := d.do("DELETE", "/modules/remote", "", nil); st != http.StatusNoContent {
		t.Fatalf("DELETE /modules/remote = %d", st)
	}
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK || s.status("remote") != "" || rm.requests() != 2 {
		t.Fatalf("tick after DELETE: %d %+v, %d requests", st, s, rm.requests())
	}
	if b, _ := os.ReadFile(filepath.Join(stateDir, stateFile)); strings.Contains(string(b), `"remote"`) {
		t.Fatalf("state file still holds the deregistered module: %s", b)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	d = start(t, nil, "--config", cfgPath)
	if st := d.do("GET", "/modules/remote", "", nil); st != http.StatusNotFound {
		t.Fatalf("after DELETE and restart: GET /modules/remote = %d", st)
	}
	d.stop()
}

// TestDaemonCorruptStateFile: the daemon starts with the configuration file's modules,
// says what happened, and keeps the corrupt file aside.
func TestDaemonCorruptStateFile(t *testing.T) {
	stateDir := t.TempDir()
	corrupt := `{"version": 1, "modules": [{"name": "lost", "body": {"name": "lo`
	if err := os.WriteFile(filepath.Join(stateDir, stateFile), []byte(corrupt), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := write(t, "cycled.yaml", stepConfig+"state_dir: "+stateDir+"\n")
	d := start(t, nil, "--config", cfgPath)
	l := d.waitLog("runtime registrations not restored")
	if !strings.Contains(l, "ERROR") || !strings.Contains(l, "corrupt") || !strings.Contains(l, "moved aside to") {
		t.Fatalf("log line %q", l)
	}
	matches, _ := filepath.Glob(filepath.Join(stateDir, stateFile+".corrupt-*"))
	if len(matches) != 1 {
		t.Fatalf("corrupt file not moved aside: %v", matches)
	}
	if b, _ := os.ReadFile(matches[0]); string(b) != corrupt {
		t.Fatalf("moved-aside content %q", b)
	}
	var s summary
	if st := d.do("POST", "/ticks", "", &s); st != http.StatusOK || s.status("guard") != "ok" || s.status("recall") == "" {
		t.Fatalf("tick: %d %+v", st, s)
	}
	// New registrations persist again.
	if st := d.do("POST", "/modules", `{"name": "late", "tier": "planning", "builtin": {"value": 1}}`, nil); st != http.StatusCreated {
		t.Fatalf("POST /modules = %d", st)
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, stateFile)); err != nil || !strings.Contains(string(b), `"late"`) {
		t.Fatalf("state file after a new registration: %v %s", err, b)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestDaemonAdminTokenNeverShown: the token guards the admin routes and appears neither
// in GET /config nor in the logs (at debug level), whatever the requests.
func TestDaemonAdminTokenNeverShown(t *testing.T) {
	const token = "tok-5f1d9a3c7e2b4d60"
	cfgPath := write(t, "cycled.yaml", stepConfig+"state_dir: \"\"\n")
	d := start(t, []string{"CYCLED_HTTP_ADMIN_TOKEN=" + token}, "--config", cfgPath, "--log-level", "debug")

	req := func(auth string) int {
		r, _ := http.NewRequest("POST", d.base+"/ticks", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for auth, want := range map[string]int{
		"":                               http.StatusUnauthorized,
		"Bearer wrong":                   http.StatusUnauthorized,
		"Bearer " + token + "x":          http.StatusUnauthorized,
		"Bearer " + token[:len(token)-1]: http.StatusUnauthorized,
		"Basic " + token:                 http.StatusUnauthorized,
		"Bearer " + token:                http.StatusOK,
	} {
		if got := req(auth); got != want {
			t.Errorf("Authorization %q: %d, want %d", auth, got, want)
		}
	}
	resp, err := http.Get(d.base + "/config")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), token) || !strings.Contains(string(b), `"admin_token":"***"`) {
		t.Fatalf("GET /config = %d %s", resp.StatusCode, b)
	}
	d.stop()
	if logs := d.stderr(); strings.Contains(logs, token) || strings.Contains(logs, token[:8]) {
		t.Fatalf("the token appears in the logs:\n%s", logs)
	}
}
