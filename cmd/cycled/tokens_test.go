package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNamedAdminTokens runs the daemon with two named admin tokens, one from a file: an
// admin action shows its token's name in GET /events and in the log, a wrong token gets
// 401 without any name, and a reload after the file was rotated takes the new token and
// refuses the old one, without a restart.
func TestNamedAdminTokens(t *testing.T) {
	state := t.TempDir()
	carolFile := filepath.Join(t.TempDir(), "carol.token")
	writeToken := func(tok string) {
		if err := os.WriteFile(carolFile, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("carol-token-1")
	cfg := write(t, "cycled.yaml", `
cycle: {period: 0}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}}}
http:
  addr: 127.0.0.1:0
  admin_tokens:
    - {name: alice, token: alice-token}
    - {name: carol, token_file: '`+carolFile+`'}
recorder: {enabled: true, flush: 10ms}
state_dir: `+state+"\n")
	d := start(t, nil, "--config", cfg)
	admin := func(path, tok string) int {
		req, err := http.NewRequest(http.MethodPost, d.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusUnauthorized {
			for _, name := range []string{"alice", "carol"} {
				if strings.Contains(string(b), name) || strings.Contains(res.Header.Get("WWW-Authenticate"), name) {
					t.Errorf("a refusal names %q", name)
				}
			}
		}
		return res.StatusCode
	}
	if st := admin("/emergency/reset", "carol-token-1"); st != http.StatusOK {
		t.Fatalf("carol's token: %d", st)
	}
	if st := admin("/emergency/reset", "mallory"); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", st)
	}
	waitAdminEvent(t, d, "carol")
	d.waitLog(`"token_name": "carol"`)

	writeToken("carol-token-2")
	if st := admin("/config/reload", "alice-token"); st != http.StatusOK {
		t.Fatalf("reload: %d", st)
	}
	if st := admin("/emergency/reset", "carol-token-1"); st != http.StatusUnauthorized {
		t.Fatalf("carol's old token after the rotation: %d", st)
	}
	if st := admin("/emergency/reset", "carol-token-2"); st != http.StatusOK {
		t.Fatalf("carol's new token after the rotation: %d", st)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if logs := d.stderr(); strings.Contains(logs, "carol-token") || strings.Contains(logs, "alice-token") {
		t.Fatalf("a token appears in the log:\n%s", logs)
	}
}

// waitAdminEvent waits until GET /events?kind=admin lists an action by the token named name.
func waitAdminEvent(t *testing.T, d *daemon, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var page struct {
			Events []struct {
				Data struct {
					Name  string `json:"name"`
					Route string `json:"route"`
					Token string `json:"token"`
				} `json:"data"`
			} `json:"events"`
		}
		if st := d.do("GET", "/events?kind=admin", "", &page); st != http.StatusOK {
			t.Fatalf("GET /events = %d", st)
		}
		for _, e := range page.Events {
			if e.Data.Name == name && e.Data.Route == "POST /emergency/reset" && strings.HasPrefix(e.Data.Token, "sha256:") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin event by %q in %+v", name, page.Events)
		}
		time.Sleep(20 * time.Millisecond) // the recorder commits every recorder.flush
	}
}
