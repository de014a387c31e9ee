package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// hostileIP is the loopback address the hostile actors send from, so that the daemon's
// per-address slow-down of failed authentications (which they trigger) does not fall on
// the operators' requests from 127.0.0.1.
const hostileIP = "127.0.0.2"

// hostile is the client of the actors that try what an attacker would: wrong tokens,
// foreign Host and Origin headers (a DNS-rebinding page), registrations of modules that
// would call the attacker.
type hostile struct {
	base  string
	host  string // the daemon's host:port
	wrong string // the wrong token they send: it must never show in the log
	hc    *http.Client
}

// newHostile returns the hostile client, or an error if hostileIP cannot be bound.
func newHostile(base, wrong string) (*hostile, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(hostileIP)}, Timeout: 5 * time.Second}
	probe, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return nil, fmt.Errorf("cannot connect from %s: %w", hostileIP, err)
	}
	probe.Close()
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}
	return &hostile{base: base, host: strings.TrimPrefix(base, "http://"), wrong: wrong,
		hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// attempt is one hostile admin request and the statuses that mean "refused".
type attempt struct {
	name, method, path, body string
	hdr                      []string
}

// attempts returns the hostile requests for evil, the name of a module that must never
// be admitted.
func (h *hostile) attempts(evil, attacker string) []attempt {
	_, port, _ := net.SplitHostPort(h.host)
	foreign := "evil.example:" + port
	reg := `{"name": "` + evil + `", "tier": "planning", "kind": "http", "http": {"url": "` + attacker + `"}}`
	return []attempt{
		{name: "wrong_token", method: "POST", path: "/modules", body: reg, hdr: []string{"Authorization", "Bearer " + h.wrong}},
		{name: "wrong_token", method: "POST", path: "/emergency/reset", hdr: []string{"Authorization", "Bearer " + h.wrong}},
		{name: "wrong_token", method: "DELETE", path: "/modules/k_00", hdr: []string{"Authorization", "Bearer " + h.wrong}},
		{name: "wrong_token", method: "POST", path: "/modules/" + safetyFlaky + "/faults", body: `{"panic": true}`, hdr: []string{"Authorization", "Bearer " + h.wrong}},
		{name: "rebinding", method: "POST", path: "/modules", body: reg,
			hdr: []string{"Host", foreign, "Origin", "http://" + foreign, "Sec-Fetch-Site", "same-origin"}},
		{name: "rebinding", method: "POST", path: "/config/reload", hdr: []string{"Host", foreign, "Origin", "http://" + foreign}},
		{name: "rebinding_token", method: "POST", path: "/breakers/k_00/reset",
			hdr: []string{"Host", foreign, "Origin", "http://" + foreign, "Authorization", "Bearer " + h.wrong}},
		{name: "cross_site", method: "POST", path: "/emergency/reset", hdr: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}},
	}
}

// send sends a and returns its status.
func (h *hostile) send(ctx context.Context, a attempt) (int, []byte, error) {
	var body io.Reader
	if a.body != "" {
		body = strings.NewReader(a.body)
	}
	req, err := http.NewRequestWithContext(ctx, a.method, h.base+a.path, body)
	if err != nil {
		return 0, nil, err
	}
	if a.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(a.hdr); i += 2 {
		if a.hdr[i] == "Host" {
			req.Host = a.hdr[i+1]
			continue
		}
		req.Header.Set(a.hdr[i], a.hdr[i+1])
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// attacker sends hostile admin requests from hostileIP: every one must be refused (401,
// 403, or 429 once the address is slowed down), and the module it tries to register must
// never appear.
func (s *soak) attacker(ctx context.Context) {
	if s.hostile == nil {
		return
	}
	r := s.rng(70)
	h := s.hostile
	evil := "evil_module"
	all := h.attempts(evil, s.remote.srv.URL+"/attacker")
	for sleep(ctx, between(r, 20*time.Millisecond, 120*time.Millisecond)) {
		a := all[r.IntN(len(all))]
		status, body, err := h.send(ctx, a)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			s.fail("hostile %s %s %s: %v", a.name, a.method, a.path, err)
		case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusTooManyRequests:
			s.count("hostile."+a.name, 1)
			s.count(fmt.Sprintf("hostile.status.%d", status), 1)
		default:
			s.fail("hostile %s %s %s was admitted: status %d: %s", a.name, a.method, a.path, status, bytes.TrimSpace(body))
		}
	}
}

// secretQuery and secretHeader are what the registrar puts in the URL query and the
// Authorization header of every remote module; they must never be shown.
func (s *soak) secretQuery() string  { return "api_key=" + s.secret }
func (s *soak) secretHeader() string { return "Bearer " + s.secret }

// secretPaths are the read routes that show remote modules, their errors and the
// configuration.
func secretPaths(names []string) []string {
	paths := []string{"/modules", "/config", "/ticks?limit=50", "/ticks/latest", "/blackboard", "/emergency", "/breakers"}
	for _, n := range names {
		paths = append(paths, "/modules/"+url.PathEscape(n))
	}
	return paths
}

// leakReader reads the routes that show remote modules, as an unauthenticated reader
// would, and fails the soak if one shows a remote module's secret or the hostile module.
func (s *soak) leakReader(ctx context.Context) {
	r := s.rng(71)
	for sleep(ctx, between(r, 100*time.Millisecond, 400*time.Millisecond)) {
		paths := secretPaths(s.book.runtimeNames())
		p := paths[r.IntN(len(paths))]
		res, ok := s.expect(ctx, http.MethodGet, p, nil, false, http.StatusOK, http.StatusNotFound) // a module deregistered since
		if !ok {
			continue
		}
		s.count("leak.reads", 1)
		if bytes.Contains(res.body, []byte(s.secret)) {
			s.fail("GET %s shows a remote module's secret", p)
		}
		if p == "/modules" && bytes.Contains(res.body, []byte(`"evil_module"`)) {
			s.fail("GET /modules lists the module a hostile request tried to register")
		}
	}
}

// logLeaks reports a remote module's secret or the attacker's wrong token in the log.
func (s *soak) logLeaks(logText string) []string {
	var out []string
	if strings.Contains(logText, s.secret) {
		out = append(out, "a remote module's secret appears in the daemon's log")
	}
	if s.hostile != nil && strings.Contains(logText, s.hostile.wrong) {
		out = append(out, "a wrong admin token appears in the daemon's log")
	}
	return out
}

// hostileLeaks reports, at the end (the daemon still running), what the hostile actors
// and the secrets left behind: a secret in a read answer, a hostile registration
// admitted or called, a remote that did not get its header, refusals not counted.
func (s *soak) hostileLeaks(ctx context.Context, logText string) []string {
	var out []string
	for _, p := range secretPaths(nil) {
		res, err := s.c.do(ctx, http.MethodGet, p, nil, false)
		switch {
		case err != nil || res.status != http.StatusOK:
			out = append(out, fmt.Sprintf("GET %s could not be checked for secrets: %v %d", p, err, res.status))
		case bytes.Contains(res.body, []byte(s.secret)):
			out = append(out, "GET "+p+" shows a remote module's secret")
		}
	}
	if res, err := s.c.do(ctx, http.MethodGet, "/modules/evil_module", nil, false); err == nil && res.status != http.StatusNotFound {
		out = append(out, fmt.Sprintf("the hostile module exists: GET /modules/evil_module = %d", res.status))
	}
	if n := s.remote.attackerCalls.Load(); n > 0 {
		out = append(out, fmt.Sprintf("the daemon called the attacker's URL %d times", n))
	}
	if n := s.remote.badAuth.Load(); n > 0 {
		out = append(out, fmt.Sprintf("%d remote module requests without the configured Authorization header", n))
	}
	if s.hostile != nil && s.get("hostile.status.401")+s.get("hostile.status.403")+s.get("hostile.status.429") > 0 {
		if res, err := s.c.do(ctx, http.MethodGet, "/metrics", nil, false); err != nil || !bytes.Contains(res.body, []byte("cycled_http_admin_refused_total{")) {
			out = append(out, "hostile requests were refused but cycled_http_admin_refused_total does not count them")
		}
		if !strings.Contains(logText, "admin request refused") {
			out = append(out, "hostile requests were refused but no refusal was logged")
		}
	}
	return out
}

// startTokenless starts a second, small daemon from bin with no admin token on loopback,
// the default a DNS-rebinding page aims at; its files go under dir.
func startTokenless(bin, dir string) (*daemon, error) {
	cfg := filepath.Join(dir, "tokenless.yaml")
	y := "cycle: {period: 100ms}\nmodules:\n  - {name: guard, tier: safety, builtin: {value: 1}}\n" +
		"http: {addr: 127.0.0.1:0}\nstate_dir: " + filepath.Join(dir, "tokenless-state") + "\n"
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		return nil, err
	}
	return startDaemon(bin, cfg)
}

// rebinder sends the token-less daemon what a DNS-rebinding page would (its own name as
// Host and Origin) and a token it does not have: every one must be refused (403, 401);
// and, now and then, what the daemon's own page would (a loopback Host and the same
// Origin), which must be served.
func (s *soak) rebinder(ctx context.Context) {
	if s.rebind == nil {
		return
	}
	r := s.rng(72)
	h := s.rebind
	_, port, _ := net.SplitHostPort(h.host)
	own := "http://" + h.host
	all := h.attempts("evil_module", s.remote.srv.URL+"/attacker")
	all = append(all,
		attempt{name: "rebinding_no_origin", method: "POST", path: "/emergency/reset", hdr: []string{"Host", "rebind.example:" + port}},
		attempt{name: "foreign_origin", method: "POST", path: "/emergency/reset", hdr: []string{"Origin", "http://rebind.example:" + port}})
	for sleep(ctx, between(r, 20*time.Millisecond, 120*time.Millisecond)) {
		if r.IntN(8) == 0 {
			own := attempt{name: "own_page", method: "POST", path: "/emergency/reset", hdr: []string{"Origin", own, "Sec-Fetch-Site", "same-origin"}}
			if status, body, err := h.send(ctx, own); ctx.Err() == nil && (err != nil || status != http.StatusOK) {
				s.fail("token-less daemon: a same-origin loopback request (its own page): %v %d %s", err, status, bytes.TrimSpace(body))
			} else if err == nil {
				s.count("tokenless.own_page", 1)
			}
			continue
		}
		a := all[r.IntN(len(all))]
		status, body, err := h.send(ctx, a)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.fail("token-less daemon: hostile %s: %v", a.name, err)
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			s.count("tokenless.refused", 1)
		default:
			s.fail("token-less daemon: hostile %s %s %s was admitted: status %d: %s", a.name, a.method, a.path, status, bytes.TrimSpace(body))
		}
	}
}

// tokenlessLeaks checks, at the end, that the hostile module does not exist on the
// token-less daemon, and stops it.
func (s *soak) tokenlessLeaks(ctx context.Context) []string {
	if s.tokenless == nil {
		return nil
	}
	var out []string
	c := &client{base: s.tokenless.base, hc: s.c.hc}
	if res, err := c.do(ctx, http.MethodGet, "/modules/evil_module", nil, false); err != nil || res.status != http.StatusNotFound {
		out = append(out, fmt.Sprintf("token-less daemon: GET /modules/evil_module = %d (%v): a rebinding registration was admitted", res.status, err))
	}
	if code, _, err := s.tokenless.stop(5 * time.Second); err != nil || code != 0 {
		out = append(out, fmt.Sprintf("token-less daemon: SIGTERM: exit %d (%v)", code, err))
	}
	if strings.Contains(s.tokenless.logText(), s.hostile.wrong) {
		out = append(out, "token-less daemon: a presented token appears in its log")
	}
	return out
}

// arm sets the remote modules' secret and prepares the hostile actors: against the
// checked daemon from hostileIP, and against tokenless. If hostileIP cannot be used, the
// hostile actors do not run and the report says so.
func (s *soak) arm(tokenless *daemon, logf func(string, ...any)) error {
	s.secret = "secret-" + randomHex(8)
	s.remote.setAuth(s.secretHeader(), s.secretQuery())
	h, err := newHostile(s.c.base, "wrong-"+randomHex(8))
	if err != nil {
		s.hostileNote = "the hostile actors did not run: " + err.Error()
		logf("%s", s.hostileNote)
		return nil
	}
	s.hostile = h
	if s.rebind, err = newHostile(tokenless.base, h.wrong); err != nil {
		return err
	}
	s.tokenless = tokenless
	return nil
}

// printHostile prints what the hostile actors did.
func (s *soak) printHostile(p func(string, ...any)) {
	p("  hostile          %d refused (wrong token %d, rebinding %d, rebinding with a token %d, cross-site %d; 401 %d, 403 %d, 429 %d), none admitted; %d secret checks of read routes",
		s.get("hostile.status.401")+s.get("hostile.status.403")+s.get("hostile.status.429"), s.get("hostile.wrong_token"),
		s.get("hostile.rebinding"), s.get("hostile.rebinding_token"), s.get("hostile.cross_site"),
		s.get("hostile.status.401"), s.get("hostile.status.403"), s.get("hostile.status.429"), s.get("leak.reads"))
	p("  token-less       a second daemon without a token: %d rebinding and foreign-origin requests refused, %d same-origin loopback requests served",
		s.get("tokenless.refused"), s.get("tokenless.own_page"))
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
