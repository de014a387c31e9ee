package clustertest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHACommands: "cycled ha status" shows the active daemon and the standbys as etcd
// holds them; "cycled ha step-down" makes the active stand by at once and a standby take
// over without waiting for a lease to expire.
func TestHACommands(t *testing.T) {
	c := newCluster(t, 3)
	defer c.dumpLogs(t)
	a, epoch := active(t, 30*time.Second, c.daemons...)
	advance(t, a, epoch, 3)
	out, err := exec.Command(bin, "ha", "status", "--config", a.cfg, "--json").Output()
	if err != nil {
		t.Fatalf("cycled ha status: %v", err)
	}
	var view struct {
		Active struct {
			Node  string
			Epoch uint64
		} `json:"active"`
		Candidates []struct{ Node string } `json:"candidates"`
		Reserved   uint64                  `json:"reserved_ids"`
	}
	if err := json.Unmarshal(out, &view); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if view.Active.Node != a.name || view.Active.Epoch != epoch || len(view.Candidates) != 3 || view.Reserved == 0 {
		t.Errorf("cycled ha status: %s; want %s active under epoch %d, 3 candidates", out, a.name, epoch)
	}
	asked := time.Now()
	out, err = exec.Command(bin, "ha", "step-down", "--config", a.cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stepped down") {
		t.Fatalf("cycled ha step-down: %v: %s", err, out)
	}
	b, epoch2 := active(t, 5*time.Second, c.others(a)...)
	ownTick(t, 5*time.Second, b, epoch2)
	if took := time.Since(asked); took >= leaseTTL {
		t.Errorf("a standby took over %s after the step-down; want less than the lease TTL", took)
	}
	if s, err := a.ha(); err != nil || s.Role != "standby" || !strings.Contains(s.Reason, "operator") {
		t.Errorf("the stepped-down daemon: %+v %v", s, err)
	}
	c.stopAll(t)
	c.collect(t).check(t)
}
