package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cycled/cycled/daemon/ha/histcheck"
)

// The group's timing in these tests.
const (
	leaseTTL = 2 * time.Second
	period   = 20 * time.Millisecond
	// etcdSweep is how often etcd revokes expired leases (its lessor's loop): a dead
	// active's lease goes up to this long after its TTL.
	etcdSweep = 500 * time.Millisecond
)

// bin is the cycled binary under test, consumerBin the Go consumer example, both built
// once by TestMain from the repository.
var bin, consumerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cycled-clustertest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, consumerBin = filepath.Join(dir, "cycled"), filepath.Join(dir, "nats-consumer")
	for out, pkg := range map[string]string{bin: "./cmd/cycled", consumerBin: "./examples/nats-consumer"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = filepath.Join("..", "..", "..")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is an etcd, a NATS server and a group of daemons.
type cluster struct {
	t       testing.TB
	etcd    string
	nats    *natsServer
	daemons []*daemon
	subject string
}

// daemon is one cycled process of the group, reaching etcd through its own proxy.
type daemon struct {
	name  string
	cmd   *exec.Cmd
	url   string
	proxy *proxy
	log   string
	cfg   string // its configuration file
	done  chan struct{}
}

func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, etcd: startEtcd(t), nats: startNATS(t), subject: "fleet"}
	for i := range n {
		c.daemons = append(c.daemons, c.start(fmt.Sprintf("d%d", i+1)))
	}
	for _, d := range c.daemons {
		waitFor(t, 30*time.Second, d.name+" answering", func() bool { _, err := d.ha(); return err == nil })
	}
	return c
}

// startLone starts a daemon without ha at 100 Hz, exporting to the cluster's NATS if
// export (for the export's cost in start lag).
func (c *cluster) startLone(export bool) *daemon {
	c.t.Helper()
	exp := ""
	if export {
		exp = fmt.Sprintf("export: {nats: {url: %q, stream: LAG, subject: %s}}\n", c.nats.URL(), c.subject)
	}
	return c.launch("lone", func(port int, dir, _ string) string {
		return fmt.Sprintf("cycle: {period: 10ms}\nhttp: {addr: \"127.0.0.1:%d\"}\nstate_dir: %q\nlog: {level: warn, format: json}\n%s", port, dir, exp)
	})
}

// start starts daemon name of the group.
func (c *cluster) start(name string) *daemon {
	c.t.Helper()
	return c.launch(name, func(port int, dir, etcd string) string { return c.groupConfig(name, port, dir, etcd) })
}

// launch starts a daemon on a free port with the configuration cfg returns.
func (c *cluster) launch(name string, cfg func(port int, dir, etcd string) string) *daemon {
	c.t.Helper()
	dir := c.t.(interface{ TempDir() string }).TempDir()
	port := freePort(c.t)
	d := &daemon{name: name, url: "http://127.0.0.1:" + strconv.Itoa(port), proxy: newProxy(c.t.(*testing.T), c.etcd),
		log: filepath.Join(dir, "log"), done: make(chan struct{})}
	text := cfg(port, dir, d.proxy.Addr())
	path := filepath.Join(dir, "cycled.yaml")
	d.cfg = path
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
	logf, err := os.Create(d.log)
	if err != nil {
		c.t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "run", "--config", path)
	d.cmd.Env = append(os.Environ(), "CYCLED_CONFIG=")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { d.cmd.Wait(); logf.Close(); close(d.done) }() //nolint:errcheck // killed on purpose
	c.t.Cleanup(func() { d.signal(syscall.SIGCONT); d.signal(syscall.SIGKILL); <-d.done })
	return d
}

// signal sends sig to d's process, if it still runs.
func (d *daemon) signal(sig syscall.Signal) {
	select {
	case <-d.done:
	default:
		d.cmd.Process.Signal(sig) //nolint:errcheck // it may have just ended
	}
}

// stop ends d gracefully (SIGTERM): its export publishes what it buffered.
func (d *daemon) stop(t testing.TB) {
	d.signal(syscall.SIGCONT)
	d.signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		t.Errorf("%s did not stop", d.name)
		d.signal(syscall.SIGKILL)
		<-d.done
	}
}

// faults POSTs a fault injection to module on d (admin routes answer on loopback).
func (d *daemon) faults(t testing.TB, module, body string) {
	t.Helper()
	resp, err := client.Post(d.url+"/modules/"+module+"/faults", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: POST /modules/%s/faults: %s", d.name, module, resp.Status)
	}
}

// haStatus is GET /ha.
type haStatus struct {
	Role   string `json:"role"`
	Node   string `json:"node"`
	Epoch  uint64 `json:"epoch"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

var client = &http.Client{Timeout: 2 * time.Second}

// getJSON GETs d's path into v.
func (d *daemon) getJSON(path string, v any) error {
	resp, err := client.Get(d.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// ha returns d's view of the group; an error when it does not answer.
func (d *daemon) ha() (haStatus, error) {
	var s haStatus
	err := d.getJSON("/ha", &s)
	return s, err
}

// summary is the part of a summary these tests read.
type summary struct {
	TickID     uint64    `json:"tick_id"`
	Epoch      uint64    `json:"epoch"`
	StartLagMs float64   `json:"start_lag_ms"`
	StartedAt  time.Time `json:"started_at"`
	Emergency  struct {
		Active  bool `json:"active"`
		Latched bool `json:"latched"`
	} `json:"emergency"`
	OpenCircuits []string `json:"open_circuits"`
	Modules      []struct {
		Name   string `json:"name"`
		Served struct {
			Source string  `json:"source"`
			AgeMs  float64 `json:"age_ms"`
		} `json:"served"`
	} `json:"modules"`
}

// latest returns d's latest summary.
func (d *daemon) latest() (summary, error) {
	var s summary
	err := d.getJSON("/ticks/latest", &s)
	return s, err
}

// waitFor polls cond every 10ms until it holds, or fails the test after within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tk.C
	}
}

// active waits until exactly one of ds says it is active and returns it with its epoch.
func active(t testing.TB, within time.Duration, ds ...*daemon) (*daemon, uint64) {
	t.Helper()
	var found *daemon
	var epoch uint64
	waitFor(t, within, "one active daemon", func() bool {
		found, epoch = nil, 0
		n := 0
		for _, d := range ds {
			if s, err := d.ha(); err == nil && s.Role == "active" {
				found, epoch = d, s.Epoch
				n++
			}
		}
		return n == 1
	})
	return found, epoch
}

// ownTick waits until d has started a tick of epoch and returns the first one it sees.
func ownTick(t testing.TB, within time.Duration, d *daemon, epoch uint64) summary {
	t.Helper()
	var s summary
	waitFor(t, within, d.name+"'s first tick of epoch "+strconv.FormatUint(epoch, 10), func() bool {
		var err error
		s, err = d.latest()
		return err == nil && s.Epoch == epoch
	})
	return s
}

// streamed is what the export stream holds.
type streamed struct {
	ticks   []summary
	changes []histcheck.Change
	ids     map[string]int // Nats-Msg-Id → deliveries
}

// collect reads the whole stream with an ordered consumer.
func (c *cluster) collect(t testing.TB) streamed {
	t.Helper()
	nc, err := nats.Connect(c.nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "FLEET")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := streamed{ids: map[string]int{}}
	for got := uint64(0); got < info.State.Msgs; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			got++
			out.add(t, m)
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return out
}

// add records one message of the stream.
func (s *streamed) add(t testing.TB, m jetstream.Msg) {
	s.ids[m.Headers().Get(jetstream.MsgIDHeader)]++
	switch {
	case strings.HasSuffix(m.Subject(), ".ticks"):
		var sum summary
		if err := json.Unmarshal(m.Data(), &sum); err != nil {
			t.Fatal(err)
		}
		s.ticks = append(s.ticks, sum)
	case m.Headers().Get("Cycled-Kind") == "ha_active":
		var ev struct {
			Node  string    `json:"node"`
			Epoch uint64    `json:"epoch"`
			At    time.Time `json:"at"`
		}
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		s.changes = append(s.changes, histcheck.Change{Node: ev.Node, Epoch: ev.Epoch, At: ev.At})
	}
}

// check runs the history checker on what the stream holds, and checks that no message
// was delivered twice.
func (s streamed) check(t testing.TB) {
	t.Helper()
	h := histcheck.History{Changes: s.changes}
	for _, x := range s.ticks {
		h.Ticks = append(h.Ticks, histcheck.Tick{Epoch: x.Epoch, ID: x.TickID, StartedAt: x.StartedAt})
	}
	for _, v := range histcheck.Check(h) {
		t.Errorf("history: %s", v)
	}
	for id, n := range s.ids {
		if n > 1 {
			t.Errorf("message %s delivered %d times", id, n)
		}
	}
	if len(s.ticks) == 0 {
		t.Error("the stream holds no summary")
	}
}

// stopAll stops every daemon still running, gracefully.
func (c *cluster) stopAll(t testing.TB) {
	for _, d := range c.daemons {
		d.stop(t)
	}
}

// others returns the daemons but d.
func (c *cluster) others(d *daemon) []*daemon {
	var out []*daemon
	for _, x := range c.daemons {
		if x != d {
			out = append(out, x)
		}
	}
	return out
}

// dumpLogs prints the daemons' logs when the test failed.
func (c *cluster) dumpLogs(t testing.TB) {
	if !t.Failed() {
		return
	}
	for _, d := range c.daemons {
		b, _ := os.ReadFile(d.log)
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		t.Logf("--- %s ---\n%s", d.name, b)
	}
}

// groupConfig is the configuration of daemon name of the group, on port, in dir,
// reaching etcd at etcd.
func (c *cluster) groupConfig(name string, port int, dir, etcd string) string {
	return fmt.Sprintf(`cycle: {period: %s}
http: {addr: "127.0.0.1:%d"}
state_dir: %q
log: {level: info, format: json}
emergency: {latch: true, skip_tiers: []}
ha:
  etcd: {endpoints: ["http://%s"], dial_timeout: 1s}
  election: /clustertest
  node: %s
  lease_ttl: %s
  id_window: 200
export: {nats: {url: %q, stream: FLEET, subject: %s}}
tiers:
  - {name: safety, budget: 20ms, max_attempts: 1, breaker: {failure_threshold: 100}}
  - {name: work, budget: 20ms}
modules:
  - {name: guard, tier: safety, kind: builtin, builtin: {value: clear}}
  - {name: plan, tier: work, kind: builtin, ttl: 10s, builtin: {value: go}}
`, period, port, dir, etcd, name, leaseTTL, c.nats.URL(), c.subject)
}
