package config_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cycled/cycled/config"
)

func TestHADefaults(t *testing.T) {
	c := mustLoad(t, "cycle: {period: 100ms}\n")
	if c.HA.Enabled() || c.Export.NATS.URL != "" {
		t.Fatalf("ha or export on by default: %+v %+v", c.HA, c.Export)
	}
	c = mustLoad(t, "ha: {etcd: {endpoints: [\"http://127.0.0.1:2379\"]}}\nexport: {nats: {url: \"nats://127.0.0.1:4222\"}}\n")
	if !c.HA.Enabled() || c.HA.LeaseTTL != 2*time.Second || c.HA.Margin() != 500*time.Millisecond ||
		c.HA.Election != "cycled" || c.HA.IDWindow != 1000 {
		t.Errorf("ha defaults %+v", c.HA)
	}
	if n := c.Export.NATS; n.Stream != "CYCLED" || n.Subject != "cycled" || n.Buffer != 4096 {
		t.Errorf("export.nats defaults %+v", n)
	}
}

func TestHARejections(t *testing.T) {
	const ep = "ha: {etcd: {endpoints: [\"127.0.0.1:2379\"]}"
	for _, tc := range []struct {
		yaml string
		path string
	}{
		{"ha: {etcd: {endpoints: [\"nohost\"]}}", "ha.etcd.endpoints[0]"},
		{"ha: {etcd: {endpoints: [\"ftp://a:1\"]}}", "ha.etcd.endpoints[0]"},
		{ep + ", lease_ttl: 1500ms}", "ha.lease_ttl"},
		{ep + ", lease_ttl: 0s}", "ha.lease_ttl"},
		{ep + ", safety_margin: 2s}", "ha.safety_margin"},
		{ep + ", id_window: 0}", "ha.id_window"},
		{ep + ", election: \"\"}", "ha.election"},
		{ep + ", advertise: \"10.0.0.1\"}", "ha.advertise"},
		{"ha: {etcd: {endpoints: [\"127.0.0.1:2379\"], username: u}}", "ha.etcd.username"},
		{"ha: {etcd: {endpoints: [\"127.0.0.1:2379\"], tls: {cert_file: c.pem}}}", "ha.etcd.tls.cert_file"},
		{ep + "}\ncycle: {period: 0s}", "ha"},
		{"ha: {lease_tll: 2s}", "ha.lease_tll"},
		{"export: {nats: {url: \"nats://127.0.0.1:4222\", stream: \"a.b\"}}", "export.nats.stream"},
		{"export: {nats: {url: \"nats://127.0.0.1:4222\", subject: \"a.*\"}}", "export.nats.subject"},
		{"export: {nats: {url: \"nats://127.0.0.1:4222\", buffer: 0}}", "export.nats.buffer"},
		{"export: {nats: {url: \":\"}}", "export.nats.url"},
	} {
		wantProblemAt(t, tc.yaml, tc.path)
	}
}

func TestHAPasswordRedacted(t *testing.T) {
	c := mustLoad(t, "ha: {etcd: {endpoints: [\"127.0.0.1:2379\"], username: u, password: hunter2}}\n")
	v := c.Redacted().(map[string]any)
	etcd := v["ha"].(map[string]any)["etcd"].(map[string]any)
	if etcd["password"] != "***" || etcd["username"] != "u" {
		t.Errorf("ha.etcd shown as %v", etcd)
	}
}

func TestHAFromEnvironment(t *testing.T) {
	t.Setenv("CYCLED_HA_ETCD_ENDPOINTS", "127.0.0.1:2379,127.0.0.1:2380")
	t.Setenv("CYCLED_HA_LEASE_TTL", "3s")
	c, err := config.Load(config.WithData([]byte("cycle: {period: 10ms}\n"), "env.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.HA.Etcd.Endpoints, []string{"127.0.0.1:2379", "127.0.0.1:2380"}) || c.HA.LeaseTTL != 3*time.Second {
		t.Errorf("ha from the environment: %+v", c.HA)
	}
}
