package clustertest

import (
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.etcd.io/etcd/server/v3/embed"
)

// freePort returns a loopback port free at the time of the call.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startEtcd starts a one-member etcd on loopback and returns its client address.
func startEtcd(t testing.TB) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "panic"   // its shutdown logs errors of its own closed listeners
	cfg.UnsafeNoFsync = true // a test's data need not survive a power cut; fsync on a busy disk would slow renewals
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not start")
	}
	return client.Host
}

// natsServer is an embedded NATS server with JetStream; restart keeps its port and store.
type natsServer struct {
	t    testing.TB
	port int
	dir  string
	s    *server.Server
}

func startNATS(t testing.TB) *natsServer {
	t.Helper()
	n := &natsServer{t: t, port: freePort(t), dir: t.TempDir()}
	n.start()
	t.Cleanup(func() {
		if n.s != nil {
			n.s.Shutdown()
			n.s.WaitForShutdown()
		}
	})
	return n
}

// URL is the server's client URL.
func (n *natsServer) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsServer) start() {
	n.t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.dir,
		NoLog: true, NoSigs: true})
	if err != nil {
		n.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats did not start")
	}
	n.s = s
}

// stop shuts the server down; start brings it back on the same port and store.
func (n *natsServer) stop() {
	n.s.Shutdown()
	n.s.WaitForShutdown()
	n.s = nil
}
