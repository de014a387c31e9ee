package config

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// HAConfig is an active/standby group of daemons (key "ha"): every daemon of a group runs
// the same configuration; the one elected through etcd ticks, the others stand by. With
// no etcd endpoints the daemon runs alone, exactly as without the section.
type HAConfig struct {
	// Etcd is the etcd cluster that holds the election.
	Etcd EtcdConfig `yaml:"etcd"`
	// Election is the name of the group's election, an etcd key prefix (default "cycled").
	Election string `yaml:"election"`
	// LeaseTTL is the leader lease, in whole seconds (default 2s): an active daemon that
	// dies is replaced after about this long.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// SafetyMargin is how long before its lease could expire an active daemon that could
	// not renew it stops starting ticks (default a quarter of lease_ttl).
	SafetyMargin time.Duration `yaml:"safety_margin"`
	// Node names this daemon in the group (default the host name and the HTTP port).
	Node string `yaml:"node"`
	// Advertise is the base URL at which the other daemons reach this one's API to follow
	// it while it is active (default http:// and the address the API listens on).
	Advertise string `yaml:"advertise"`
	// IDWindow is how many tick ids an active daemon reserves in etcd at a time (default
	// 1000): ids continue across a failover, skipping at most one window.
	IDWindow int `yaml:"id_window"`
}

// EtcdConfig is how a daemon reaches etcd (key "ha.etcd").
type EtcdConfig struct {
	// Endpoints are the etcd client URLs (http://127.0.0.1:2379). Empty: no group.
	Endpoints []string `yaml:"endpoints"`
	// DialTimeout bounds the connection to etcd (default 2s).
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// Username and Password authenticate to etcd (both or neither). The password is
	// never shown by GET /config.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS configures https:// endpoints.
	TLS TLSFiles `yaml:"tls"`
}

// TLSFiles are a TLS client's files: a CA to trust, and a client certificate and key
// (both or neither).
type TLSFiles struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether the daemon is part of a group.
func (h HAConfig) Enabled() bool { return len(h.Etcd.Endpoints) > 0 }

// ExportConfig is where summaries and events are exported (key "export").
type ExportConfig struct {
	// NATS publishes them to a NATS JetStream stream.
	NATS NATSExportConfig `yaml:"nats"`
}

// NATSExportConfig is export.nats: every summary and event published to JetStream,
// deduplicated by epoch and tick.
type NATSExportConfig struct {
	// URL of the NATS server (nats://127.0.0.1:4222). Empty: no export.
	URL string `yaml:"url"`
	// Stream is the JetStream stream, created when absent (default CYCLED).
	Stream string `yaml:"stream"`
	// Subject is the subjects' prefix: summaries go to <subject>.ticks, events to
	// <subject>.events (default "cycled").
	Subject string `yaml:"subject"`
	// Buffer is how many messages wait for the publisher at most (default 4096); a
	// message that finds it full is dropped and counted, never waited for.
	Buffer int `yaml:"buffer"`
}

// The defaults of the ha and export sections.
const (
	DefaultElection    = "cycled"
	DefaultLeaseTTL    = 2 * time.Second
	DefaultIDWindow    = 1000
	DefaultDialTimeout = 2 * time.Second
	DefaultNATSStream  = "CYCLED"
	DefaultNATSSubject = "cycled"
	DefaultNATSBuffer  = 4096
)

// haDefaults are the ha and export sections' defaults.
func haDefaults(c *Config) {
	c.HA = HAConfig{Election: DefaultElection, LeaseTTL: DefaultLeaseTTL, IDWindow: DefaultIDWindow,
		Etcd: EtcdConfig{DialTimeout: DefaultDialTimeout}}
	c.Export = ExportConfig{NATS: NATSExportConfig{Stream: DefaultNATSStream, Subject: DefaultNATSSubject, Buffer: DefaultNATSBuffer}}
}

// Margin returns the safety margin in force: safety_margin, else a quarter of lease_ttl.
func (h HAConfig) Margin() time.Duration {
	if h.SafetyMargin > 0 {
		return h.SafetyMargin
	}
	return h.LeaseTTL / 4
}

// check adds the problems of the ha section; period is cycle.period.
func (h HAConfig) check(period time.Duration, add func(path, format string, args ...any)) {
	if !h.Enabled() {
		return
	}
	for i, ep := range h.Etcd.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			add(fmt.Sprintf("ha.etcd.endpoints[%d]", i), "%v", err)
		}
	}
	if h.Etcd.DialTimeout <= 0 {
		add("ha.etcd.dial_timeout", "must be > 0")
	}
	if (h.Etcd.Username == "") != (h.Etcd.Password == "") {
		add("ha.etcd.username", "username and password go together")
	}
	if (h.Etcd.TLS.CertFile == "") != (h.Etcd.TLS.KeyFile == "") {
		add("ha.etcd.tls.cert_file", "cert_file and key_file go together")
	}
	if h.Election == "" || strings.ContainsAny(h.Election, " \t\n") {
		add("ha.election", "must be a non-empty name without spaces")
	}
	switch {
	case h.LeaseTTL < time.Second || h.LeaseTTL%time.Second != 0:
		add("ha.lease_ttl", "must be whole seconds, at least 1s (etcd leases count seconds)")
	case h.SafetyMargin < 0 || h.Margin() >= h.LeaseTTL:
		add("ha.safety_margin", "must be >= 0 and shorter than ha.lease_ttl")
	}
	if h.IDWindow < 1 {
		add("ha.id_window", "must be >= 1")
	}
	if h.Advertise != "" {
		if u, err := url.Parse(h.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("ha.advertise", "want a base URL such as http://10.0.0.5:8080")
		}
	}
	if period <= 0 {
		add("ha", "an active/standby group needs a periodic scheduler (cycle.period > 0)")
	}
}

// checkEndpoint checks an etcd endpoint: host:port, or an http(s) URL with a port.
func checkEndpoint(ep string) error {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("want http://host:port or https://host:port, got %q", ep)
		}
		hostport = u.Host
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return fmt.Errorf("want host:port, got %q", ep)
	}
	return nil
}

var streamName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// check adds the problems of the export section.
func (e ExportConfig) check(add func(path, format string, args ...any)) {
	n := e.NATS
	if n.URL == "" {
		return
	}
	if u, err := url.Parse(n.URL); err != nil || u.Host == "" {
		add("export.nats.url", "want a URL such as nats://127.0.0.1:4222")
	}
	if !streamName.MatchString(n.Stream) {
		add("export.nats.stream", "must be letters, digits, _ or -")
	}
	if n.Subject == "" || strings.ContainsAny(n.Subject, " *>") || strings.HasSuffix(n.Subject, ".") {
		add("export.nats.subject", "must be a subject without wildcards, such as cycled.fleet")
	}
	if n.Buffer < 1 {
		add("export.nats.buffer", "must be >= 1")
	}
}

// haRestart lists the ha and export keys that differ between old and cur: they apply at
// startup only.
func haRestart(old, cur *Config) []string {
	var out []string
	if !reflect.DeepEqual(old.HA, cur.HA) {
		out = append(out, "ha")
	}
	if old.Export != cur.Export {
		out = append(out, "export")
	}
	return out
}
