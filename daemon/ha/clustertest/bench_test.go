package clustertest

import (
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cycled/cycled/daemon/natsexport"
	"github.com/cycled/cycled/faultsummary"
)

// benchOnly skips a figure-producing test unless HA_BENCH is set (make bench-ha).
func benchOnly(t *testing.T) {
	if os.Getenv("HA_BENCH") == "" {
		t.Skip("a benchmark: make bench-ha (HA_BENCH=1)")
	}
}

// ticks returns d's history (the followed summaries of a standby included).
func (d *daemon) ticks(t testing.TB) []summary {
	t.Helper()
	var page struct {
		Ticks []summary `json:"ticks"`
	}
	if err := d.getJSON("/ticks?limit=1000", &page); err != nil {
		t.Fatal(err)
	}
	return page.Ticks
}

// TestBenchFailover kills the active daemon HA_KILLS times (default 20) and reports the
// failover time (kill to the new active's first tick) and the ticks lost (grid points
// between the old active's last tick and the new one's first).
func TestBenchFailover(t *testing.T) {
	benchOnly(t)
	kills, _ := strconv.Atoi(os.Getenv("HA_KILLS"))
	kills = max(kills, 1)
	c := newCluster(t, 3)
	defer c.dumpLogs(t)
	var took, lost []float64
	for i := range kills {
		a, epoch := active(t, 30*time.Second, c.daemons...)
		advance(t, a, epoch, 60) // standbys follow the active
		killed := time.Now()
		a.signal(syscall.SIGKILL)
		<-a.done
		b, epoch2 := active(t, 15*time.Second, c.others(a)...)
		advance(t, b, epoch2, 3)
		var lastOld, firstNew time.Time
		for _, s := range b.ticks(t) {
			if s.Epoch == epoch && s.StartedAt.After(lastOld) {
				lastOld = s.StartedAt
			}
			if s.Epoch == epoch2 && (firstNew.IsZero() || s.StartedAt.Before(firstNew)) {
				firstNew = s.StartedAt
			}
		}
		took = append(took, firstNew.Sub(killed).Seconds()*1000)
		lost = append(lost, float64(firstNew.Sub(lastOld)/period-1))
		t.Logf("kill %d: failover %.0f ms, %g ticks lost", i+1, took[i], lost[i])
		c.daemons[slices.Index(c.daemons, a)] = c.start(a.name + "r" + strconv.Itoa(i))
	}
	t.Logf("failover over %d kills (lease_ttl %s, period %s): median %.0f ms, max %.0f ms; ticks lost median %g, max %g",
		kills, leaseTTL, period, median(took), slices.Max(took), median(lost), slices.Max(lost))
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestBenchExportThroughput offers summaries to the exporter as fast as it takes them and
// reports how many a second JetStream acknowledged.
func TestBenchExportThroughput(t *testing.T) {
	benchOnly(t)
	n := startNATS(t)
	const total = 20000
	x, err := natsexport.New(natsexport.Options{URL: n.URL(), Stream: "BENCH", Subject: "bench", Buffer: total})
	if err != nil {
		t.Fatal(err)
	}
	s := &faultsummary.Summary{Schema: faultsummary.Schema, Epoch: 1, StartedAt: time.Now(),
		Tiers: []faultsummary.Tier{{Name: "safety"}, {Name: "work"}}}
	start := time.Now()
	for i := range total {
		c := *s
		c.TickID = uint64(i + 1)
		x.Summary(&c)
	}
	waitFor(t, 5*time.Minute, "every summary published", func() bool {
		st := x.Stats()
		return st.Published+st.Dropped == total
	})
	d := time.Since(start)
	x.Close(time.Second)
	t.Logf("export throughput: %d summaries in %s: %.0f/s (dropped %d)", total, d.Round(time.Millisecond),
		total/d.Seconds(), x.Stats().Dropped)
}

// TestBenchExportStartLag runs one daemon at 100 Hz without and with the export, in turns,
// and reports the start lag's p99 of each (the export's cost on the tick).
func TestBenchExportStartLag(t *testing.T) {
	benchOnly(t)
	n := startNATS(t)
	var without, with []float64
	for round := range 3 {
		for _, export := range []bool{false, true} {
			p99 := lagP99(t, n, export)
			if export {
				with = append(with, p99)
			} else {
				without = append(without, p99)
			}
			t.Logf("round %d export=%v: start lag p99 %.3f ms", round+1, export, p99)
		}
	}
	t.Logf("start lag p99 at 100 Hz, median of 3: without export %.3f ms, with %.3f ms (ratio %.2f)",
		median(without), median(with), median(with)/median(without))
}

// lagP99 runs a lone daemon at 100 Hz for 1000 ticks and returns its start lag's p99.
func lagP99(t *testing.T, n *natsServer, export bool) float64 {
	t.Helper()
	c := &cluster{t: t, nats: n, subject: "lag"}
	d := c.startLone(export)
	waitFor(t, 30*time.Second, "1000 ticks", func() bool {
		s, err := d.latest()
		return err == nil && s.TickID >= 1100
	})
	var lags []float64
	for _, s := range d.ticks(t) {
		lags = append(lags, s.StartLagMs)
	}
	d.stop(t)
	slices.Sort(lags)
	return lags[len(lags)*99/100]
}
