package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/ha"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/modules"
)

// group is the daemon's part in an active/standby group (config "ha"). A nil *group is a
// daemon that runs alone: every method then does nothing.
type group struct {
	node     *ha.Node
	follower *ha.Follower
	engine   *cycle.Engine
	exp      *exporter
	log      *zap.Logger
	done     chan struct{}
}

// openGroup returns the group of cfg.HA, nil without one. The node is not running yet:
// see start.
func openGroup(cfg *config.Config, exp *exporter, log *zap.Logger) (*group, error) {
	if !cfg.HA.Enabled() {
		return nil, nil
	}
	o, err := haOptions(cfg)
	if err != nil {
		return nil, err
	}
	g := &group{exp: exp, log: log.Named("ha")}
	o.Logger, o.BeforeActive, o.OnEvent = log.Named("ha"), g.takeOver, g.event
	node, err := ha.New(o)
	if err != nil {
		return nil, err
	}
	g.node = node
	g.follower = ha.NewFollower(node, g.followed)
	return g, nil
}

// haOptions returns the node options of cfg's ha section.
func haOptions(cfg *config.Config) (ha.Options, error) {
	h := cfg.HA
	tlsCfg, err := etcdTLS(h.Etcd.TLS)
	if err != nil {
		return ha.Options{}, fmt.Errorf("ha.etcd.tls: %w", err)
	}
	return ha.Options{Endpoints: h.Etcd.Endpoints, DialTimeout: h.Etcd.DialTimeout,
		Username: h.Etcd.Username, Password: h.Etcd.Password, TLS: tlsCfg, Election: h.Election,
		LeaseTTL: h.LeaseTTL, Margin: h.Margin(), Node: nodeName(h.Node, cfg.HTTP.Addr), Advertise: h.Advertise,
		IDWindow: uint64(h.IDWindow)}, nil
}

// etcdTLS returns the TLS configuration of f, nil when it names no file.
func etcdTLS(f config.TLSFiles) (*tls.Config, error) {
	if f == (config.TLSFiles{}) {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate found", f.CAFile)
		}
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// nodeName is ha.node, else the host name and the HTTP port.
func nodeName(name, addr string) string {
	if name != "" {
		return name
	}
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(addr)
	return host + ":" + port
}

// engineOptions gate the engine's ticks on the node and note its own summaries.
func (g *group) engineOptions() []cycle.Option {
	if g == nil {
		return nil
	}
	return []cycle.Option{cycle.WithGate(g.node), cycle.WithHooks(cycle.Hooks{OnTick: g.follower.Seen})}
}

// wire sets the API's view of the group.
func (g *group) wire(o *api.Options) {
	if g != nil {
		o.HA = haView{g.node}
	}
}

// start runs the node and the follower until ctx ends; advertise is the API's URL (unless
// ha.advertise sets one). It returns the scheduler's context: ctx, carrying the epoch
// for remote modules' requests.
func (g *group) start(ctx context.Context, engine *cycle.Engine, advertise string, reg prometheus.Registerer) context.Context {
	if g == nil {
		return ctx
	}
	g.engine = engine
	g.node.SetAdvertise(advertise)
	registerHAMetrics(reg, g.node)
	g.done = make(chan struct{})
	fdone := make(chan struct{})
	go func() { defer close(fdone); g.follower.Run(ctx) }()
	go func() { defer close(g.done); _ = g.node.Run(ctx); <-fdone }()
	return modules.WithEpoch(ctx, g.node.Epoch)
}

// stop waits for the node and the follower (their context has ended) and closes the
// etcd client.
func (g *group) stop() {
	if g == nil || g.done == nil {
		return
	}
	<-g.done
	_ = g.node.Close() // the process ends: nothing is left to do with an error
}

// followed serves a summary of the active daemon from this standby's own history and stream.
func (g *group) followed(s *faultsummary.Summary) {
	if g.engine == nil {
		return
	}
	g.engine.History().Append(s)
	g.engine.Events().Publish(faultsummary.Event{Type: faultsummary.EventTick, Summary: s})
}

// takeOver hands the state followed from the previous active daemon to the engine: its
// last emergency state, its modules' last values and its open breakers.
func (g *group) takeOver(uint64) {
	if g.engine == nil {
		return
	}
	var h cycle.Handover
	if s := g.follower.Latest(); s != nil {
		em := s.Emergency
		h.Emergency = &em
	}
	for _, e := range g.follower.Board() {
		if e.Source != blackboard.None && !e.Written.IsZero() {
			h.LastGood = append(h.LastGood, lastgood.Entry{Key: e.Key, Value: e.Value, Module: e.Module, TickID: e.TickID, Written: e.Written})
		}
	}
	h.OpenBreakers = g.follower.OpenBreakers()
	g.engine.TakeOver(h)
	fields := []zap.Field{zap.Int("last_good_values", len(h.LastGood)), zap.Int("open_breakers", len(h.OpenBreakers))}
	if h.Emergency != nil {
		fields = append(fields, zap.Bool("emergency", h.Emergency.Active), zap.Bool("latched", h.Emergency.Latched))
	}
	g.log.Info("taking over", fields...)
}

// event exports a role change.
func (g *group) event(ev ha.Event) {
	g.exp.event(ev.Kind, ev.Epoch, ev.FirstTick, ev.Node, ev)
}

// haView is the node as the API shows it.
type haView struct{ n *ha.Node }

func (v haView) Role() string    { return v.n.Status().Role }
func (v haView) Status() any     { return v.n.Status() }
func (v haView) StepDown() error { return v.n.StepDown() }

// registerHAMetrics registers the group's gauges.
func registerHAMetrics(reg prometheus.Registerer, n *ha.Node) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cycled_ha_active",
			Help: "1 while this daemon is the active one of its active/standby group, 0 while it stands by."},
			func() float64 {
				if n.Active() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cycled_ha_epoch",
			Help: "The epoch of the group's active daemon as this daemon last saw it (0: none known)."},
			func() float64 {
				if st := n.Status(); st.Active != nil {
					return float64(st.Active.Epoch)
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_ha_refused_ticks_total",
			Help: "Ticks this daemon did not start while it believed itself active: its lease was not renewed in time, or its id window was not extended."},
			func() float64 { return float64(n.Status().Refused) }))
}

// advertiseURL is the default URL of the API at addr: loopback stays loopback, an
// unspecified host becomes this host's name.
func advertiseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host, _ = os.Hostname()
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "http://" + host + ":" + port
}

// openGroupAndExport starts the export and opens the group, each nil when not
// configured; the export's events carry the group's epoch. ok is false (logged) on error.
func openGroupAndExport(cfg *config.Config, reg prometheus.Registerer, log *zap.Logger) (*exporter, *group, bool) {
	exp, err := openExporter(cfg, reg, log)
	if err != nil {
		log.Error("cannot start the export", zap.String("field", "export.nats"), zap.Error(err))
		return nil, nil, false
	}
	grp, err := openGroup(cfg, exp, log)
	if err != nil {
		log.Error("cannot join the active/standby group", zap.String("field", "ha"), zap.Error(err))
		exp.close(log)
		return nil, nil, false
	}
	if exp != nil && grp != nil {
		exp.epoch = grp.node.Epoch
	}
	return exp, grp, true
}
