package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hardReq sends an admin request with the given Host (empty: the daemon's address) and
// extra headers (name, value pairs); it returns the status, the error code and the body.
func hardReq(t *testing.T, base, method, path, host, body string, hdr ...string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e errorAnswer
	_ = json.Unmarshal(b, &e)
	code := ""
	if e.Error != nil {
		code = e.Error.Code
	}
	return resp.StatusCode, code, string(b)
}

// TestDaemonDNSRebinding sends the daemon (no token, loopback) the request of a web page
// on a name that resolves to 127.0.0.1: its own name as Host and Origin, same-origin by
// the browser's account. It is refused and registers nothing, while a page served by the
// daemon itself (a loopback origin) and local tools keep working; a request presenting a
// token to a daemon with none is refused 401.
func TestDaemonDNSRebinding(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: 127.0.0.1:0}")))
	waitTick(t, d, 0)
	u, _ := url.Parse(d.base)
	evil := "evil.example:" + u.Port()
	reg := `{"name": "x", "tier": "planning", "kind": "http", "http": {"url": "http://attacker.example/x"}}`

	st, code, body := hardReq(t, d.base, "POST", "/modules", evil, reg,
		"Origin", "http://"+evil, "Sec-Fetch-Site", "same-origin")
	if st != http.StatusForbidden || code != "foreign_host" {
		t.Fatalf("rebinding registration: %d %s", st, body)
	}
	if st, code, body := hardReq(t, d.base, "POST", "/emergency/reset", evil, ""); st != http.StatusForbidden || code != "foreign_host" {
		t.Fatalf("rebinding emergency reset: %d %s", st, body)
	}
	if st := d.do("GET", "/modules/x", "", nil); st != http.StatusNotFound {
		t.Fatalf("GET /modules/x = %d: the refused registration was admitted", st)
	}
	// The daemon's own origin (its dashboard) and a local tool.
	own := "http://" + u.Host
	if st, _, body := hardReq(t, d.base, "POST", "/emergency/reset", "", "", "Origin", own, "Sec-Fetch-Site", "same-origin"); st != http.StatusOK {
		t.Fatalf("same-origin loopback request: %d %s", st, body)
	}
	if st, _, body := hardReq(t, d.base, "POST", "/emergency/reset", "localhost:"+u.Port(), ""); st != http.StatusOK {
		t.Fatalf("Host localhost: %d %s", st, body)
	}
	// A token where none is configured (issue: a wrong token used to be served).
	if st, code, body := hardReq(t, d.base, "POST", "/emergency/reset", "", "", "Authorization", "Bearer wrong"); st != http.StatusUnauthorized || code != "unauthorized" {
		t.Fatalf("a token presented to a daemon with none: %d %s", st, body)
	}
	d.waitLog("admin request refused")
}

// TestDaemonAuthFailures sends wrong tokens to the daemon: each is logged (remote address
// and route, never the token) and counted in /metrics, and past the burst the address is
// answered 429 even with the right token.
func TestDaemonAuthFailures(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: 127.0.0.1:0, admin_token: "+badInputToken+"}")))
	waitTick(t, d, 0)
	const wrong = "wrong-token-a61f03"
	for i := range 10 {
		if st, _, body := hardReq(t, d.base, "POST", "/emergency/reset", "", "", "Authorization", "Bearer "+wrong); st != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s", i, st, body)
		}
	}
	st, code, body := hardReq(t, d.base, "POST", "/emergency/reset", "", "", "Authorization", "Bearer "+badInputToken)
	if st != http.StatusTooManyRequests || code != "too_many_failures" {
		t.Fatalf("the right token after 10 failures: %d %s", st, body)
	}
	line := d.waitLog("admin request refused")
	if !strings.Contains(line, "/emergency/reset") || !strings.Contains(line, "127.0.0.1:") {
		t.Errorf("refusal log line without route or remote address: %s", line)
	}
	m := d.metrics()
	if !strings.Contains(m, `cycled_http_admin_refused_total{reason="invalid_token"} 10`) ||
		!strings.Contains(m, `cycled_http_admin_refused_total{reason="too_many_failures"} 1`) {
		t.Errorf("refusals not counted:\n%s", grepLines(m, "admin_refused"))
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if logs := d.stderr(); strings.Contains(logs, wrong) || strings.Contains(logs, badInputToken) {
		t.Fatalf("a token appears in the log:\n%s", logs)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// pyOversized posts an oversized body with urllib and with http.client (Expect:
// 100-continue, body sent at once, as http.client does), and prints each answer's status
// and error code, or the exception.
const pyOversized = `
import http.client, json, sys, urllib.error, urllib.request
base, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = b"x" * (16 << 20)
req = urllib.request.Request(base + "/modules", data=body, method="POST", headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=20)
    print("urllib 200")
except urllib.error.HTTPError as e:
    print("urllib", e.code, json.loads(e.read())["error"]["code"])
except Exception as e:
    print("urllib exception", repr(e))
c = http.client.HTTPConnection(host, port, timeout=20)
try:
    c.request("POST", "/modules", body, {"Content-Type": "application/json", "Expect": "100-continue"})
    r = c.getresponse()
    print("http.client", r.status, json.loads(r.read())["error"]["code"])
except Exception as e:
    print("http.client exception", repr(e))
`

// TestDaemonOversizedBody: clients that write a body over the limit before reading the
// answer get the daemon's 413 rather than a connection reset: a raw TCP client, and
// Python's urllib and http.client when python3 is present.
func TestDaemonOversizedBody(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: 127.0.0.1:0}")))
	waitTick(t, d, 0)
	u, _ := url.Parse(d.base)
	for _, size := range []int{4 << 20, 32 << 20} {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "POST /modules HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Host, size)
		if _, err := c.Write(bytes.Repeat([]byte{'x'}, size)); err != nil {
			t.Fatalf("%d bytes: writing the body: %v", size, err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%d bytes: reading the answer: %v", size, err)
		}
		b, _ := io.ReadAll(res.Body)
		c.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "body_too_large") {
			t.Fatalf("%d bytes: %d %s", size, res.StatusCode, b)
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not on PATH: urllib not exercised")
		return
	}
	out, err := exec.Command(py, "-c", pyOversized, d.base, u.Hostname(), u.Port()).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "urllib 413 body_too_large\nhttp.client 413 body_too_large" {
		t.Fatalf("python clients got:\n%s", got)
	}
}

// TestRuntimeStoreRemovesStaleTemps: the temporary files of saves interrupted by kill -9
// are removed when the store opens; the state file and everything else stay.
func TestRuntimeStoreRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	state := `{"version": 1, "modules": [{"name": "a", "body": {"name": "a", "tier": "planning"}}]}`
	files := map[string]string{
		stateFile:                       state,
		stateFile + ".1234.tmp":         state,
		stateFile + ".99.tmp":           "{\"vers",
		stateFile + ".corrupt-2026.tmp": "matches the pattern of a save's temporary file",
		"other.tmp":                     "kept",
		stateFile + ".corrupt-x":        "kept",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, stateFile+".dir.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Saved(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("saved modules %v", got)
	}
	slices.Sort(s.removedTemps)
	if want := []string{stateFile + ".1234.tmp", stateFile + ".99.tmp", stateFile + ".corrupt-2026.tmp"}; !slices.Equal(s.removedTemps, want) {
		t.Errorf("removed %v, want %v", s.removedTemps, want)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{stateFile, stateFile + ".corrupt-x", stateFile + ".dir.tmp", "other.tmp"}; !slices.Equal(left, want) {
		t.Errorf("left in state_dir %v, want %v", left, want)
	}
}

// TestDaemonRemoteModuleSecrets runs remote modules whose URLs carry a secret in their
// query and whose Authorization header comes from the environment (one from the
// configuration file, one registered at runtime with a literal header, one whose remote
// is down so that its error quotes the URL): the remotes get the secrets, and no read
// answer, no stream event and no log line shows them.
func TestDaemonRemoteModuleSecrets(t *testing.T) {
	const secret = "s3cret-51c0be"
	var mu sync.Mutex
	auth := map[string]string{}
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.URL.Path+"?"+r.URL.RawQuery] = r.Header.Get("Authorization")
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"value": 1}`)
	}))
	t.Cleanup(remote.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	cfg := `
cycle: {period: 0}
modules:
  - {name: guard, tier: safety, builtin: {value: 1}}
  - name: planner
    tier: planning
    kind: http
    http:
      url: "` + remote.URL + `/plan?api_key=` + secret + `"
      headers: {Authorization: {env: PLANNER_TOKEN}}
  - {name: gone, tier: execution, kind: http, http: {url: "http://` + down + `/x?token=` + secret + `"}}
http: {addr: 127.0.0.1:0}
log: {level: debug}
state_dir: ` + t.TempDir() + "\n"
	d := start(t, []string{"PLANNER_TOKEN=Bearer env-" + secret}, "--config", write(t, "cycled.yaml", cfg))
	reg := `{"name": "runtime", "tier": "planning", "kind": "http", "http": {"url": "` + remote.URL + `/rt?key=` + secret +
		`", "headers": {"Authorization": "Bearer lit-` + secret + `"}}}`
	if st := d.do("POST", "/modules", reg, nil); st != http.StatusCreated {
		t.Fatalf("POST /modules = %d", st)
	}
	for range 2 {
		if st := d.do("POST", "/ticks", "", nil); st != http.StatusOK {
			t.Fatalf("POST /ticks = %d", st)
		}
	}
	mu.Lock()
	if auth["/plan?api_key="+secret] != "Bearer env-"+secret || auth["/rt?key="+secret] != "Bearer lit-"+secret {
		t.Errorf("remotes got %v", auth)
	}
	mu.Unlock()
	for _, path := range []string{"/modules", "/modules/planner", "/modules/runtime", "/modules/gone", "/config", "/ticks/latest", "/ticks", "/emergency", "/blackboard"} {
		resp, err := http.Get(d.base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), secret) {
			t.Errorf("GET %s: %d, shows the secret: %v\n%.600s", path, resp.StatusCode, strings.Contains(string(b), secret), b)
		}
		if path == "/modules/gone" && !strings.Contains(string(b), "token=***") {
			t.Errorf("GET /modules/gone does not show the redacted URL: %.600s", b)
		}
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if logs := d.stderr(); strings.Contains(logs, secret) {
		t.Fatalf("the log shows the secret:\n%s", grepLines(logs, secret))
	}
}
