package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	invariant "github.com/cycled/cycled/faultsummary/check"
)

// The operator test plays operator against the real binary: a seeded random sequence of
// what an operator does in a day — reloads (valid, invalid, empty, extreme), file edits,
// removals of a safety module with and without the flag, registrations and deletions,
// resets, fault injections, restarts and kill -9, a state_dir that fills up and frees —
// checked against a model of what the daemon must do. Every summary of every run goes
// through the invariant checker; ticks keep coming within what the period promises or
// /healthz is 503; the safety modules are never lost without the flag; tick ids strictly
// increase across restarts; every answer is JSON with the status the model expects; and
// "cycled replay --check" over the recorded run finds no difference.
//
// It runs for $OPERATOR (a duration; unset: skipped), seeded by $OPERATOR_SEED (default:
// the time). make operator-test runs it; a failure prints the seed. The checker's
// wall-clock tolerance is $OPERATOR_TOLERANCE (default 500 ms: the test shares a small
// machine with its own daemon restarts and builds; the soak checks timing closely).

// opPeriods are the periods the valid configurations switch between. The scheduler waits
// an hour on the last unless a reload wakes it.
var opPeriods = []string{"10ms", "20ms", "40ms", "1h"}

// opLong is the index of the hour-long period in opPeriods.
const opLong = 3

// opVariant is one valid configuration file: its period and whether the second safety
// module is in it. Its marker module (a knowledge module of its own name) tells the
// checker which configuration a summary ran under.
type opVariant struct {
	period int // index in opPeriods
	guard2 bool
}

func (v opVariant) marker() string { return fmt.Sprintf("v%d_%t", v.period, v.guard2) }

// yaml returns the configuration file of v with state_dir state.
func (v opVariant) yaml(state string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cycle: {period: %s}\n", opPeriods[v.period])
	b.WriteString(`tiers:
  - name: safety
    budget: 30ms
    breaker: {failure_threshold: 3, cooldown: 300ms}
  - name: knowledge
    budget: 30ms
    breaker: {failure_threshold: 2, cooldown: 200ms}
emergency: {recover_after: 2}
startup: {timeout: 2s}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
`)
	if v.guard2 {
		b.WriteString("  - name: guard2\n    tier: safety\n    builtin: {value: 2}\n")
	}
	fmt.Fprintf(&b, "  - name: recall\n    tier: knowledge\n    builtin: {value: 1, fail_rate: 0.05}\n  - name: %s\n    tier: knowledge\n    builtin: {value: 3}\n", v.marker())
	fmt.Fprintf(&b, "http: {addr: 127.0.0.1:0, max_runtime_modules: 3, admin_limit: {rate: 200, burst: 200}}\n")
	fmt.Fprintf(&b, "recorder: {enabled: true, flush: 50ms}\nstate_dir: %s\nlog: {format: json}\n", state)
	return b.String()
}

// opRun is one daemon process of the operator test and what was read of it.
type opRun struct {
	d     *daemon
	first uint64 // its first tick id (from its log)
	chk   *invariant.Checker
	fp    string // the module names of the configuration the checker follows
	next  uint64 // the next tick id to fetch
	last  uint64 // the newest tick id checked

	stop chan struct{}
	done chan struct{}
}

// opReset is an operator reset made while the latest tick was in [lo, hi].
type opReset struct {
	breaker string // "" for an emergency reset
	lo, hi  uint64
}

// operator is the test's state: the model of the daemon and the runs.
type operator struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand
	dir    string
	path   string // the configuration file
	state  string // state_dir
	tmpfs  bool   // state_dir can be filled
	full   string // the filler file while state_dir is full ("": not full)
	tol    time.Duration
	cur    opVariant         // the configuration in force
	rt     map[string]string // runtime modules registered: name → body
	bodies map[string]string // every runtime body ever registered, for the checker
	nextRT int

	mu         sync.Mutex // guards the fields below (the liveness watcher writes them)
	failures   []string
	run        *opRun
	maxSeen    uint64    // the newest tick id seen in every run so far
	removedAt  []uint64  // the latest tick ids seen when a safety removal was allowed
	resets     []opReset // every reset, for the checker
	long       bool      // the period in force may be an hour: no liveness promise to check
	checked    int
	runs       int
	counts     map[string]int
	cfgCache   map[string]invariant.Config
	lastHealth time.Time
}

func TestOperatorModel(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("OPERATOR"))
	if err != nil || dur <= 0 {
		t.Skip("set OPERATOR to a duration (make operator-test) to play operator against the binary")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OPERATOR_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("OPERATOR_SEED: %v", err)
		}
	}
	t.Logf("operator test: seed %d (OPERATOR_SEED=%d replays it), %v", seed, seed, dur)
	o := &operator{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), dir: t.TempDir(),
		rt: map[string]string{}, bodies: map[string]string{}, counts: map[string]int{}, cfgCache: map[string]invariant.Config{},
		tol: 500 * time.Millisecond}
	if v := os.Getenv("OPERATOR_TOLERANCE"); v != "" {
		if o.tol, err = time.ParseDuration(v); err != nil {
			t.Fatalf("OPERATOR_TOLERANCE: %v", err)
		}
	}
	o.path = filepath.Join(o.dir, "cfg.yaml")
	o.state, o.tmpfs = o.stateDir()
	o.cur = opVariant{period: 0, guard2: true}
	writeConfig(t, o.path, o.cur.yaml(o.state))
	o.startRun()
	defer func() {
		if t.Failed() {
			t.Logf("operator test failed: seed %d (OPERATOR_SEED=%d go test -run TestOperatorModel ./cmd/cycled)", seed, seed)
		}
	}()
	end := time.Now().Add(dur)
	for time.Now().Before(end) && len(o.violations()) == 0 {
		o.step()
		time.Sleep(time.Duration(50+o.rng.IntN(250)) * time.Millisecond)
	}
	if o.full != "" {
		o.free()
	}
	o.stopRun(false)
	o.replayCheck()
	for _, f := range o.violations() {
		t.Error(f)
	}
	t.Logf("operator test: %d runs, %d summaries checked, actions %v", o.runs, o.checked, o.counts)
	if o.checked == 0 {
		t.Error("no summary was checked")
	}
}

// stateDir returns state_dir: a small tmpfs where one can be mounted (so that it can fill
// up), else a directory of the test's.
func (o *operator) stateDir() (string, bool) {
	dir := filepath.Join(o.dir, "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		o.t.Fatal(err)
	}
	if err := mountTmpfs(dir, "16m"); err != nil {
		o.t.Logf("state_dir is not a tmpfs (%v): the full-disk actions are left out", err)
		return dir, false
	}
	o.t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir, true
}

// mountTmpfs mounts a tmpfs of the given size on dir.
func mountTmpfs(dir, size string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size)
}

func (o *operator) failf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures = append(o.failures, fmt.Sprintf(format, args...))
}

func (o *operator) violations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.failures)
}

// step makes one random operator action.
func (o *operator) step() {
	n := o.rng.IntN(100)
	switch {
	case n < 14:
		o.reloadValid(true)
	case n < 20:
		o.reloadValid(false) // a file edit that the watcher applies
	case n < 32:
		o.reloadInvalid()
	case n < 38:
		o.removeSafety()
	case n < 52:
		o.register()
	case n < 60:
		o.deregister()
	case n < 68:
		o.reset()
	case n < 78:
		o.injectFault()
	case n < 84:
		o.restart(o.rng.IntN(2) == 0)
	case n < 92:
		o.fill()
	default:
		o.fetch() // read and check what came meanwhile
	}
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	hdr    http.Header
	body   []byte
}

// call sends a request to the running daemon and checks that the answer is JSON (but for
// 204) with one of the statuses want; a 429 with Retry-After is always acceptable.
func (o *operator) call(method, path, body string, want ...int) (answer, bool) {
	req, err := http.NewRequest(method, o.run.d.base+path, strings.NewReader(body))
	if err != nil {
		o.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.failf("%s %s: %v", method, path, err)
		return answer{}, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, hdr: resp.Header, body: b}
	if a.status != http.StatusNoContent && (!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !json.Valid(b)) {
		o.failf("%s %s: %d answered %q, not JSON: %.200s", method, path, a.status, resp.Header.Get("Content-Type"), b)
		return a, false
	}
	if a.status == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
		return a, false
	}
	if !slices.Contains(want, a.status) {
		o.failf("%s %s: %d, want %v: %.300s", method, path, a.status, want, b)
		return a, false
	}
	return a, true
}

// latest returns the newest tick id of the running daemon (0: none yet).
func (o *operator) latest() uint64 { return o.nextTick(0, 0) }

// nextTick long-polls for a tick after the one given for at most wait (0: answers at once)
// and returns the latest tick id then (0: none yet). The model waits on it rather than on
// a timer: configurations come into force, and ids run out, at tick boundaries.
func (o *operator) nextTick(after uint64, wait time.Duration) uint64 {
	var s struct {
		TickID uint64 `json:"tick_id"`
	}
	path := "/ticks/latest"
	if wait > 0 {
		path = fmt.Sprintf("/ticks/latest?wait=%s&after=%d", wait, after)
	}
	a, ok := o.call("GET", path, "", http.StatusOK, http.StatusNotFound, http.StatusServiceUnavailable)
	if ok && a.status == http.StatusOK {
		_ = json.Unmarshal(a.body, &s)
	}
	return s.TickID
}

// reloadValid writes another valid configuration; asked: POST /config/reload (200),
// else the file watcher applies it. Either way it is in force within 2 s.
func (o *operator) reloadValid(ask bool) {
	v := opVariant{period: o.rng.IntN(len(opPeriods)), guard2: o.cur.guard2 || o.rng.IntN(2) == 0}
	writeConfig(o.t, o.path, v.yaml(o.state))
	o.counts["reload.valid"]++
	if v.period == opLong {
		o.setLong(true) // from now on ticks may stop for an hour
	}
	if ask {
		if _, ok := o.call("POST", "/config/reload", "", http.StatusOK); !ok {
			return
		}
	}
	o.cur = v
	o.waitInForce(v)
	o.setLong(v.period == opLong)
}

// setLong says whether the period in force may be an hour.
func (o *operator) setLong(long bool) {
	o.mu.Lock()
	o.long = long
	o.mu.Unlock()
}

// waitInForce waits until the daemon runs v, the configuration reloaded: GET /modules
// lists the modules in force (a pending one says so), whatever the period.
func (o *operator) waitInForce(v opVariant) {
	deadline := time.Now().Add(3 * time.Second)
	var last []string
	for seen := uint64(0); time.Now().Before(deadline); seen = o.nextTick(seen, 50*time.Millisecond) {
		var ms struct {
			Modules []struct {
				Name    string `json:"name"`
				Pending bool   `json:"pending"`
			} `json:"modules"`
		}
		a, ok := o.call("GET", "/modules", "", http.StatusOK)
		if !ok {
			return
		}
		_ = json.Unmarshal(a.body, &ms)
		marker, guard2, other := false, false, false
		last = last[:0]
		for _, m := range ms.Modules {
			last = append(last, fmt.Sprintf("%s(pending %v)", m.Name, m.Pending))
			switch {
			case m.Pending:
			case m.Name == v.marker():
				marker = true
			case m.Name == "guard2":
				guard2 = true
			case strings.HasPrefix(m.Name, "v") && strings.Contains(m.Name, "_"):
				other = true // another variant's marker: not yet replaced
			}
		}
		if marker && !other && guard2 == v.guard2 {
			return
		}
	}
	var cfg struct {
		LastReload any `json:"last_reload"`
	}
	if a, ok := o.call("GET", "/config", "", http.StatusOK); ok {
		_ = json.Unmarshal(a.body, &cfg)
	}
	o.failf("configuration %s not in force 3 s after it was reloaded (the scheduler was not woken?): modules %v, last reload %v",
		v.marker(), last, cfg.LastReload)
}

// reloadInvalid writes a configuration that must be refused (422) and asks for a reload;
// the running configuration stays. The valid file is put back.
func (o *operator) reloadInvalid() {
	good := o.cur.yaml(o.state)
	bad := map[string]string{
		"empty":     "",
		"comments":  "# nothing but a comment\n",
		"syntax":    "cycle: {period: 10ms\n",
		"unknown":   strings.Replace(good, "emergency:", "emergncy:", 1),
		"extreme":   strings.Replace(good, "period: "+opPeriods[o.cur.period], "period: 876000h", 1),
		"duplicate": good + "cycle: {period: 5ms}\n",
		"ttl":       strings.Replace(good, "builtin: {value: 1, fail_rate: 0.05}", "ttl: 9000h\n    builtin: {value: 1}", 1),
		"truncated": good[:strings.Index(good, "modules:")],
	}
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range bad {
			if !yield(k) {
				return
			}
		}
	})
	kind := kinds[o.rng.IntN(len(kinds))]
	writeConfig(o.t, o.path, bad[kind])
	o.counts["reload.invalid."+kind]++
	want := http.StatusUnprocessableEntity
	if kind == "truncated" {
		want = http.StatusConflict // no module at all: the safety modules would be lost
	}
	o.call("POST", "/config/reload", "", want)
	time.Sleep(250 * time.Millisecond) // the watcher's own reload, refused as well
	writeConfig(o.t, o.path, good)
	o.call("POST", "/config/reload", "", http.StatusOK)
}

// removeSafety reloads a file without guard2: refused (409) without the flag, and,
// now and then, allowed with it.
func (o *operator) removeSafety() {
	if !o.cur.guard2 {
		o.reloadValid(true) // may bring guard2 back
		return
	}
	v := opVariant{period: o.cur.period}
	writeConfig(o.t, o.path, v.yaml(o.state))
	o.counts["safety.refused"]++
	a, ok := o.call("POST", "/config/reload", "", http.StatusConflict)
	if ok && !bytes.Contains(a.body, []byte("safety_removal")) {
		o.failf("a reload without guard2: 409 without code safety_removal: %s", a.body)
	}
	if o.rng.IntN(3) > 0 {
		writeConfig(o.t, o.path, o.cur.yaml(o.state))
		o.call("POST", "/config/reload", "", http.StatusOK)
		return
	}
	lo := o.latest()
	if _, ok := o.call("POST", "/config/reload?allow_safety_removal=true", "", http.StatusOK); ok {
		o.counts["safety.allowed"]++
		o.mu.Lock()
		o.removedAt = append(o.removedAt, lo)
		o.mu.Unlock()
		o.cur = v
		o.waitInForce(v)
	}
}

// register registers a runtime module (201), or is refused at the cap (409) or on a full
// disk (500 not_persisted).
func (o *operator) register() {
	name := fmt.Sprintf("rt%d", o.nextRT)
	o.nextRT++
	body := fmt.Sprintf(`{"name": %q, "tier": "knowledge", "builtin": {"value": %d, "fail_rate": 0.1}}`, name, o.nextRT)
	o.mu.Lock()
	o.bodies[name] = body
	o.mu.Unlock()
	switch {
	case o.full != "":
		o.counts["register.full"]++
		o.call("POST", "/modules", body, http.StatusInternalServerError, http.StatusCreated)
		// Created only if the save happened to fit: the model follows the daemon.
		if a, _ := o.call("GET", "/modules/"+name, "", http.StatusOK, http.StatusNotFound); a.status == http.StatusOK {
			o.rt[name] = body
		}
	case len(o.rt) >= 3:
		o.counts["register.capped"]++
		if a, ok := o.call("POST", "/modules", body, http.StatusConflict); ok && !bytes.Contains(a.body, []byte("module_limit")) {
			o.failf("a registration beyond the cap: 409 without module_limit: %s", a.body)
		}
	default:
		o.counts["register"]++
		if _, ok := o.call("POST", "/modules", body, http.StatusCreated); ok {
			o.rt[name] = body
		}
	}
}

// deregister deletes a runtime module (204), or an unknown one (404).
func (o *operator) deregister() {
	if o.full != "" {
		return // the removal would not be saved: the model cannot say what a restart brings back
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range o.rt {
			if !yield(k) {
				return
			}
		}
	})
	if len(names) == 0 {
		o.counts["deregister.unknown"]++
		o.call("DELETE", "/modules/nosuch", "", http.StatusNotFound)
		return
	}
	name := names[o.rng.IntN(len(names))]
	o.counts["deregister"]++
	if _, ok := o.call("DELETE", "/modules/"+name, "", http.StatusNoContent); ok {
		delete(o.rt, name)
	}
}

// reset resets a breaker or emergency mode, noting the ticks around it for the checker.
func (o *operator) reset() {
	target, path := "", "/emergency/reset"
	if o.rng.IntN(3) > 0 {
		names := []string{"guard", "recall", o.cur.marker()}
		target = names[o.rng.IntN(len(names))]
		path = "/breakers/" + target + "/reset"
	}
	lo := o.latest()
	o.counts["reset"]++
	_, ok := o.call("POST", path, "", http.StatusOK, http.StatusNotFound)
	hi := o.latest()
	if hi < lo {
		hi = lo + 1000
	}
	if ok {
		o.mu.Lock()
		o.resets = append(o.resets, opReset{breaker: target, lo: lo, hi: hi})
		o.mu.Unlock()
	}
}

// injectFault injects faults into a module (a safety one now and then) or clears them.
func (o *operator) injectFault() {
	names := []string{"recall", "recall", "guard"}
	name := names[o.rng.IntN(len(names))]
	body := `{"reset": true}`
	if o.rng.IntN(2) == 0 {
		body = fmt.Sprintf(`{"fail_rate": %.2f}`, o.rng.Float64()*0.6)
	}
	o.counts["faults"]++
	o.call("POST", "/modules/"+name+"/faults", body, http.StatusOK)
}

// fill fills state_dir for a while: ticks go on while ids are reserved, then stop with
// /healthz 503 (ids_exhausted); then the space is freed, or the daemon is killed first.
func (o *operator) fill() {
	if !o.tmpfs || o.full != "" {
		o.fetch()
		return
	}
	o.counts["disk.full"]++
	o.full = fillDisk(o.t, o.state)
	hold := time.Duration(500+o.rng.IntN(3000)) * time.Millisecond
	first := o.counts["disk.full"] == 1
	if first { // once at 10 ms past the 1024 ids reserved ahead, until ticks stop (30 s at most)
		hold = 30 * time.Second
		v := opVariant{period: 0, guard2: o.cur.guard2}
		writeConfig(o.t, o.path, v.yaml(o.state))
		if _, ok := o.call("POST", "/config/reload", "", http.StatusOK); ok {
			o.cur = v
			o.waitInForce(v)
			o.setLong(false)
		}
	}
	deadline := time.Now().Add(hold)
	// Looked at every 50 ticks, or every 100 ms once ticks stop (the ids ran out).
	for seen := uint64(0); time.Now().Before(deadline); seen = o.nextTick(seen+49, 100*time.Millisecond) {
		o.fetch()
		if a, _ := o.call("GET", "/healthz", "", http.StatusOK, http.StatusServiceUnavailable); bytes.Contains(a.body, []byte("ids_exhausted")) {
			o.counts["disk.ids_exhausted"]++
			if first {
				first, deadline = false, time.Now().Add(time.Second)
			}
		}
	}
	if strings.Contains(o.run.d.stderr(), "no tick id is reserved") {
		o.counts["disk.ids_exhausted.logged"]++
	}
	if o.rng.IntN(2) == 0 {
		o.counts["disk.full.kill"]++
		o.stopRun(true)
		o.free()
		o.startRun()
		return
	}
	o.free()
}

// free removes the filler of state_dir.
func (o *operator) free() {
	if err := os.Remove(o.full); err != nil {
		o.t.Fatal(err)
	}
	o.full = ""
}

// restart stops the daemon (SIGTERM, exit 0; or kill -9) and starts it again: its first
// tick comes after every tick id published before.
func (o *operator) restart(kill bool) {
	if o.full != "" {
		return
	}
	if kill {
		o.counts["restart.kill"]++
	} else {
		o.counts["restart"]++
	}
	o.stopRun(kill)
	o.startRun()
}

// startRun starts a daemon on the configuration file and its watcher.
func (o *operator) startRun() {
	d := start(o.t, nil, "--config", o.path)
	r := &opRun{d: d, stop: make(chan struct{}), done: make(chan struct{})}
	r.first = firstTick(o.t, d)
	r.next = r.first
	o.mu.Lock()
	if r.first <= o.maxSeen {
		o.failures = append(o.failures, fmt.Sprintf("run %d starts at tick %d: ids up to %d were published before", o.runs+1, r.first, o.maxSeen))
	}
	o.run = r
	o.runs++
	o.lastHealth = time.Now()
	o.mu.Unlock()
	go o.watch(r)
}

// stopRun fetches what is left, stops the watcher, and ends the daemon: SIGTERM (exit 0)
// or kill -9.
func (o *operator) stopRun(kill bool) {
	r := o.run
	o.fetch()
	close(r.stop)
	<-r.done
	if kill {
		if err := r.d.cmd.Process.Kill(); err != nil {
			o.t.Fatal(err)
		}
		<-r.d.exited
	} else if code, _ := r.d.stop(); code != 0 {
		o.failf("exit %d after SIGTERM:\n%s", code, r.d.stderr())
	}
	o.mu.Lock()
	o.maxSeen = max(o.maxSeen, r.last) // the newest id the checks and the watcher saw
	o.mu.Unlock()
}

// watch checks liveness while r runs: when no tick came for longer than the watchdog
// promises (the shortest period's, at least a second) plus a margin for a loaded machine,
// /healthz must answer 503.
func (o *operator) watch(r *opRun) {
	defer close(r.done)
	const margin = 1500 * time.Millisecond
	var lastID uint64
	lastAdvance := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(150 * time.Millisecond):
		}
		id, st := o.probe(r)
		if id > lastID {
			lastID, lastAdvance = id, time.Now()
			o.mu.Lock()
			r.last = max(r.last, id)
			o.mu.Unlock()
			continue
		}
		o.mu.Lock()
		long := o.long
		o.mu.Unlock()
		if long {
			lastAdvance = time.Now()
			continue
		}
		if time.Since(lastAdvance) > time.Second+margin && st == http.StatusOK {
			if id2, _ := o.probe(r); id2 == id { // no tick came meanwhile: the answer was wrong
				o.failf("no tick for %v after tick %d, and /healthz answers 200", time.Since(lastAdvance).Round(time.Millisecond), id)
				lastAdvance = time.Now()
			}
		}
	}
}

// probe returns the newest tick id and the status of /healthz (0 if unreachable).
func (o *operator) probe(r *opRun) (uint64, int) {
	var h struct {
		LastTickID uint64 `json:"last_tick_id"`
	}
	resp, err := http.Get(r.d.base + "/healthz")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &h); err != nil {
		o.failf("/healthz is not JSON: %.200s", b)
	}
	return h.LastTickID, resp.StatusCode
}

// fetch reads every tick of the running daemon since the last fetch (GET /ticks pages
// newest first, below an id) and checks them in order.
func (o *operator) fetch() {
	r := o.run
	top := o.latest()
	var got []*faultsummary.Summary
	for before := top + 1; before > r.next; {
		limit := min(before-r.next, 1000)
		a, ok := o.call("GET", fmt.Sprintf("/ticks?limit=%d&before=%d", limit, before), "", http.StatusOK)
		if !ok {
			return
		}
		var page struct {
			Ticks []json.RawMessage `json:"ticks"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			o.failf("GET /ticks: %v", err)
			return
		}
		if len(page.Ticks) == 0 {
			break
		}
		for _, raw := range page.Ticks {
			s := new(faultsummary.Summary)
			if err := json.Unmarshal(raw, s); err != nil {
				o.failf("a summary does not decode: %v", err)
				return
			}
			got = append(got, s)
			before = min(before, s.TickID)
		}
	}
	slices.Reverse(got)
	for _, s := range got {
		o.checkSummary(r, s)
	}
}

// checkSummary puts s, the next summary of run r, through the invariant checker and the
// model's own rules.
func (o *operator) checkSummary(r *opRun, s *faultsummary.Summary) {
	if s.TickID < r.next {
		return
	}
	if s.TickID != r.next && r.chk != nil {
		o.failf("tick %d follows tick %d: %d ticks were not read (the history is shorter than the fetches' interval?)", s.TickID, r.next-1, s.TickID-r.next)
	}
	r.next = s.TickID + 1
	names := make([]string, 0, s.NumModules())
	hasGuard, hasGuard2 := false, false
	for _, m := range s.Modules() {
		names = append(names, m.Name)
		hasGuard = hasGuard || (m.Name == "guard" && m.TierIndex == 0)
		hasGuard2 = hasGuard2 || (m.Name == "guard2" && m.TierIndex == 0)
	}
	o.mu.Lock()
	allowed := slices.ContainsFunc(o.removedAt, func(lo uint64) bool { return s.TickID > lo })
	resets := slices.Clone(o.resets)
	o.mu.Unlock()
	if !hasGuard || (!hasGuard2 && !allowed) {
		o.failf("tick %d runs %v: a safety module was lost without allow_safety_removal", s.TickID, names)
	}
	if fp := strings.Join(names, ","); fp != r.fp || r.chk == nil {
		cfg, err := o.checkConfig(s, fp)
		if err != nil {
			o.failf("%v", err)
			return
		}
		if r.chk == nil {
			r.chk = invariant.New(cfg, invariant.WithTolerance(o.tol))
		} else {
			r.chk.Reconfigure(cfg)
		}
		r.fp = fp
	}
	for _, rs := range resets {
		if rs.lo < s.TickID && rs.hi+1 >= s.TickID-1 {
			for a := rs.lo; a <= rs.hi; a++ {
				if rs.breaker == "" {
					r.chk.ResetEmergency(a)
				} else {
					r.chk.ResetBreaker(rs.breaker, a)
				}
			}
		}
	}
	for _, v := range r.chk.Check(s) {
		o.failf("tick %d: invariant %s: %s", s.TickID, v.Rule, v.Detail)
	}
	o.mu.Lock()
	o.checked++
	r.last = max(r.last, s.TickID)
	o.mu.Unlock()
}

// checkConfig returns the checker's configuration for summary s: the variant its marker
// names with the runtime modules it runs.
func (o *operator) checkConfig(s *faultsummary.Summary, fp string) (invariant.Config, error) {
	if c, ok := o.cfgCache[fp]; ok {
		return c, nil
	}
	var v *opVariant
	for p := range opPeriods {
		for _, g2 := range []bool{false, true} {
			c := opVariant{period: p, guard2: g2}
			if slices.ContainsFunc(s.Modules(), func(m faultsummary.Module) bool { return m.Name == c.marker() }) {
				v = &c
			}
		}
	}
	if v == nil {
		return invariant.Config{}, fmt.Errorf("tick %d runs no known configuration: %s", s.TickID, fp)
	}
	c, err := config.Load(config.WithData([]byte(v.yaml(o.state)), "variant.yaml"), config.WithoutEnv())
	if err != nil {
		return invariant.Config{}, err
	}
	ecfg, regs, ps := c.Engine()
	if err := ps.Err(); err != nil {
		return invariant.Config{}, err
	}
	known := map[string]bool{}
	for _, r := range regs {
		known[r.Spec.Name] = true
	}
	for _, m := range s.Modules() {
		if known[m.Name] {
			continue
		}
		o.mu.Lock()
		body, ok := o.bodies[m.Name]
		o.mu.Unlock()
		if !ok {
			return invariant.Config{}, fmt.Errorf("tick %d runs module %q, neither configured nor registered", s.TickID, m.Name)
		}
		reg, err := config.DecodeModule([]byte(body))
		if err != nil {
			return invariant.Config{}, err
		}
		regs = append(regs, reg)
	}
	plan, ps := cycle.Validate(ecfg, regs)
	if err := ps.Err(); err != nil {
		return invariant.Config{}, fmt.Errorf("tick %d: %w", s.TickID, err)
	}
	cc := cycle.CheckConfig(ecfg, plan)
	o.cfgCache[fp] = cc
	return cc, nil
}

// replayCheck runs "cycled replay --check" over everything recorded.
func (o *operator) replayCheck() {
	out, err := runCLI(o.t, "replay", "--check", "--state", o.state)
	if err != nil {
		o.failf("cycled replay --check: %v\n%.3000s", err, out)
	}
}
