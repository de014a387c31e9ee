package clustertest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// firstStart returns the earliest start of a tick of epoch in s, and the latest.
func (s streamed) span(epoch uint64) (first, last time.Time) {
	for _, x := range s.ticks {
		if x.Epoch != epoch {
			continue
		}
		if first.IsZero() || x.StartedAt.Before(first) {
			first = x.StartedAt
		}
		if x.StartedAt.After(last) {
			last = x.StartedAt
		}
	}
	return first, last
}

// advance waits until d has started n more ticks of epoch than it had.
func advance(t *testing.T, d *daemon, epoch uint64, n uint64) {
	t.Helper()
	start := ownTick(t, 10*time.Second, d, epoch).TickID
	waitFor(t, 20*time.Second, d.name+" ticking on", func() bool {
		s, err := d.latest()
		return err == nil && s.Epoch == epoch && s.TickID >= start+n
	})
}

// TestKillActive: kill -9 the active daemon: a standby starts ticking within lease_ttl +
// 2 periods (plus etcd's lease sweep), no tick id repeats, and the latched emergency of
// the first active is still latched on the next.
func TestKillActive(t *testing.T) {
	c := newCluster(t, 3)
	defer c.dumpLogs(t)
	a, epoch := active(t, 30*time.Second, c.daemons...)
	a.faults(t, "guard", `{"fail_rate": 1}`) // the safety module fails: a latched emergency
	waitFor(t, 10*time.Second, "a latched emergency", func() bool {
		s, err := a.latest()
		return err == nil && s.Epoch == epoch && s.Emergency.Latched
	})
	a.faults(t, "guard", `{"reset": true}`)
	for _, d := range c.daemons {
		d.faults(t, "plan", `{"fail_rate": 1}`) // plan fails on the active and on whoever takes over
	}
	waitFor(t, 10*time.Second, "plan's breaker open on the active", func() bool {
		s, err := a.latest()
		return err == nil && slices.Contains(s.OpenCircuits, "plan")
	})
	// The standbys hand over what they followed: let them follow the latched state and
	// read the active's values (every 500 ms) first.
	advance(t, a, epoch, 40)
	for _, d := range c.others(a) {
		waitFor(t, 5*time.Second, d.name+" following the latched emergency", func() bool {
			s, err := d.latest()
			return err == nil && s.Emergency.Latched
		})
	}
	killed := time.Now()
	a.signal(syscall.SIGKILL)
	<-a.done
	b, epoch2 := active(t, 10*time.Second, c.others(a)...)
	s := ownTick(t, 5*time.Second, b, epoch2)
	if !s.Emergency.Active || !s.Emergency.Latched {
		t.Errorf("tick %d of the new active: emergency %+v, want the latched one", s.TickID, s.Emergency)
	}
	// plan's breaker, open on the first active, is open on the new one: plan is not run
	// and serves the first active's last value, as old as it is (older than the failover).
	if !slices.Contains(s.OpenCircuits, "plan") {
		t.Errorf("tick %d of the new active: open circuits %v, want plan's handed over", s.TickID, s.OpenCircuits)
	}
	for _, m := range s.Modules {
		if m.Name == "plan" && (m.Served.Source != "last_good" || m.Served.AgeMs < float64(time.Since(killed).Milliseconds())-500) {
			t.Errorf("tick %d of the new active: plan served %+v; want the first active's value, last_good", s.TickID, m.Served)
		}
	}
	advance(t, b, epoch2, 10)
	c.stopAll(t)
	st := c.collect(t)
	st.check(t)
	first, _ := st.span(epoch2)
	if took := first.Sub(killed); took > leaseTTL+2*period+etcdSweep {
		t.Errorf("the new active's first tick came %s after the kill; want at most %s", took, leaseTTL+2*period+etcdSweep)
	} else {
		t.Logf("failover: first tick of epoch %d %s after the kill", epoch2, took)
	}
}

// TestFreezeActive: SIGSTOP the active past its lease, then SIGCONT: it starts no tick
// after the new active's first (the history checker, on every summary of the stream) and
// becomes a standby.
func TestFreezeActive(t *testing.T) {
	c := newCluster(t, 3)
	defer c.dumpLogs(t)
	a, epoch := active(t, 30*time.Second, c.daemons...)
	advance(t, a, epoch, 5)
	a.signal(syscall.SIGSTOP)
	b, epoch2 := active(t, 10*time.Second, c.others(a)...)
	advance(t, b, epoch2, 10)
	a.signal(syscall.SIGCONT)
	waitFor(t, 10*time.Second, "the resumed daemon standing by", func() bool {
		s, err := a.ha()
		return err == nil && s.Role == "standby"
	})
	advance(t, b, epoch2, 10)
	c.stopAll(t)
	st := c.collect(t)
	st.check(t)
	_, lastOld := st.span(epoch)
	firstNew, _ := st.span(epoch2)
	if !lastOld.Before(firstNew) {
		t.Errorf("the frozen active started a tick at %s, after the new active's first at %s", lastOld, firstNew)
	}
}

// TestEtcdUnreachable: the active loses etcd (its proxy is cut): it stops ticking before
// its lease ends, says why, and once etcd is back exactly one daemon is active.
func TestEtcdUnreachable(t *testing.T) {
	c := newCluster(t, 3)
	defer c.dumpLogs(t)
	a, epoch := active(t, 30*time.Second, c.daemons...)
	advance(t, a, epoch, 5)
	cut := time.Now()
	a.proxy.Cut()
	var why haStatus
	waitFor(t, 10*time.Second, "the cut-off active stepping down", func() bool {
		var err error
		why, err = a.ha()
		return err == nil && why.Role == "standby"
	})
	if !strings.Contains(why.Reason, "lease") {
		t.Errorf("step-down reason %q; want it to say the lease was not renewed", why.Reason)
	}
	b, epoch2 := active(t, 10*time.Second, c.others(a)...)
	advance(t, b, epoch2, 5)
	a.proxy.Restore()
	waitFor(t, 10*time.Second, "the restored daemon back in the election", func() bool {
		s, err := a.ha()
		return err == nil && s.Error == ""
	})
	_, epoch3 := active(t, 10*time.Second, c.daemons...)
	if epoch3 != epoch2 {
		t.Errorf("epoch %d after etcd came back; want %d to go on", epoch3, epoch2)
	}
	advance(t, b, epoch2, 5)
	c.stopAll(t)
	st := c.collect(t)
	st.check(t)
	if _, last := st.span(epoch); !last.Before(cut.Add(leaseTTL)) {
		t.Errorf("the cut-off active started a tick at %s, after its lease could end (%s)", last, cut.Add(leaseTTL))
	}
}

// TestNATSRestart: restart the NATS server during a run: the stream misses no summary
// beyond the drops the daemons reported, and delivers none twice.
func TestNATSRestart(t *testing.T) {
	c := newCluster(t, 3)
	defer c.dumpLogs(t)
	a, epoch := active(t, 30*time.Second, c.daemons...)
	advance(t, a, epoch, 20)
	c.nats.stop()
	advance(t, a, epoch, 25)
	c.nats.start()
	advance(t, a, epoch, 50)
	c.stopAll(t)
	st := c.collect(t)
	st.check(t)
	var dropped uint64
	for _, d := range c.daemons {
		dropped += exportDrops(t, d)
	}
	missing := missingTicks(st)
	if missing > dropped {
		t.Errorf("%d summaries missing from the stream; the daemons reported %d dropped", missing, dropped)
	}
	t.Logf("%d summaries in the stream, %d missing, %d reported dropped", len(st.ticks), missing, dropped)
	checkConsumers(t, c)
}

// checkConsumers runs the consumer examples, Go and Python, on the stream: each prints the
// first summaries with the events between them, the same lines.
func checkConsumers(t *testing.T, c *cluster) {
	t.Helper()
	goOut, err := exec.Command(consumerBin, "-url", c.nats.URL(), "-stream", "FLEET", "-subject", c.subject, "-n", "5").Output()
	if err != nil {
		t.Fatalf("Go consumer: %v", err)
	}
	py := exec.Command("python3", filepath.Join("..", "..", "..", "examples", "nats-consumer", "consumer.py"),
		"--url", c.nats.URL(), "--stream", "FLEET", "--subject", c.subject, "-n", "5")
	pyOut, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("Python consumer: %v: %s", err, pyOut)
	}
	if n := strings.Count(string(goOut), "\nepoch "); !strings.HasPrefix(string(goOut), "event ha_active") || n != 5 {
		t.Errorf("Go consumer printed:\n%s\nwant the ha_active event, then 5 summaries", goOut)
	}
	if string(goOut) != string(pyOut) {
		t.Errorf("the consumers differ:\nGo:\n%s\nPython:\n%s", goOut, pyOut)
	}
}

// missingTicks counts the ids missing inside each epoch's range in the stream (ids of an
// epoch are consecutive).
func missingTicks(s streamed) uint64 {
	lo, hi, n := map[uint64]uint64{}, map[uint64]uint64{}, map[uint64]uint64{}
	for _, x := range s.ticks {
		if l, ok := lo[x.Epoch]; !ok || x.TickID < l {
			lo[x.Epoch] = x.TickID
		}
		hi[x.Epoch] = max(hi[x.Epoch], x.TickID)
		n[x.Epoch]++
	}
	var missing uint64
	for e := range n {
		missing += hi[e] - lo[e] + 1 - n[e]
	}
	return missing
}

// exportDrops reads the drops a stopped daemon's export reported when it closed.
func exportDrops(t *testing.T, d *daemon) uint64 {
	t.Helper()
	f, err := os.Open(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Dropped uint64 `json:"dropped"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "export closed" {
			return line.Dropped
		}
	}
	t.Errorf("%s: no \"export closed\" line in its log", d.name)
	return 0
}
