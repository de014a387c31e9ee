package ha

import (
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The roles of a daemon in its group.
const (
	// RoleActive: elected, and admitting ticks.
	RoleActive = "active"
	// RoleStandby: not elected; runs no module.
	RoleStandby = "standby"
)

// ErrNotActive is returned by StepDown on a daemon that is not active.
var ErrNotActive = errors.New("this daemon is not the active one")

// Options configure a Node.
type Options struct {
	// Endpoints are etcd's client URLs. Required.
	Endpoints []string
	// DialTimeout bounds the connection to etcd and every request of the election.
	DialTimeout time.Duration
	// Username and Password authenticate to etcd (empty: none).
	Username, Password string
	// TLS is the client's TLS configuration for https endpoints (nil: none).
	TLS *tls.Config
	// Election is the election's key prefix. Required.
	Election string
	// LeaseTTL is the leader lease, whole seconds.
	LeaseTTL time.Duration
	// Margin is how long before the lease could expire the node stops admitting ticks.
	Margin time.Duration
	// Node names this daemon; Advertise is the base URL of its API.
	Node, Advertise string
	// IDWindow is how many tick ids are reserved at a time.
	IDWindow uint64
	// Logger receives role changes and errors (nil: none).
	Logger *zap.Logger
	// BeforeActive, if set, is called when the node has won the election and reserved its
	// ids, before it admits its first tick: the daemon hands over the state it followed.
	BeforeActive func(epoch uint64)
	// OnEvent, if set, receives every role change.
	OnEvent func(Event)
}

// Event is a role change of a node: it became active under an epoch, or stepped down.
type Event struct {
	// Kind is "ha_active" or "ha_standby".
	Kind string `json:"kind"`
	Node string `json:"node"`
	// Epoch is the epoch begun (ha_active) or ended (ha_standby).
	Epoch uint64 `json:"epoch"`
	// FirstTick is the lowest id the new active may give (ha_active).
	FirstTick uint64    `json:"first_tick,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
}

// Leader is the active daemon as the election shows it.
type Leader struct {
	Node  string `json:"node"`
	URL   string `json:"url"`
	Epoch uint64 `json:"epoch"`
}

// Status is a node's view of its group.
type Status struct {
	Role string `json:"role"`
	Node string `json:"node"`
	// Epoch is this node's epoch while it is active.
	Epoch uint64 `json:"epoch,omitempty"`
	// Active is the active daemon, when known.
	Active *Leader `json:"active,omitempty"`
	// Since is when the node took its role.
	Since time.Time `json:"since"`
	// Reason says why the node last stepped down.
	Reason string `json:"reason,omitempty"`
	// Error is the last error of the election (etcd unreachable, …), cleared once active.
	Error string `json:"error,omitempty"`
	// IDs is the reserved tick-id window while active: [first, last].
	IDs [2]uint64 `json:"ids,omitzero"`
	// Refused counts ticks the gate refused while this node believed it was active.
	Refused uint64 `json:"refused_ticks"`
}

// Node is one daemon of a group: it campaigns, renews its lease, and gates the engine's
// ticks (Admit). Its methods are safe for concurrent use.
type Node struct {
	opts Options
	cli  *clientv3.Client
	log  *zap.Logger

	mu       sync.Mutex
	active   bool      // guarded by mu
	epoch    uint64    // guarded by mu
	deadline time.Time // guarded by mu: ticks start before it
	idFloor  uint64    // guarded by mu: the first id of this term
	idMax    uint64    // guarded by mu: the last id reserved
	since    time.Time // guarded by mu
	reason   string    // guarded by mu
	lastErr  string    // guarded by mu
	leader   *Leader   // guarded by mu

	refused  atomic.Uint64
	granted  atomic.Uint64 // the epoch of the last admitted tick
	stepReq  chan string   // a step-down asked for, with its reason
	extendCh chan struct{} // the id window wants extending
}

// New returns a node connected (lazily) to etcd.
func New(o Options) (*Node, error) {
	if len(o.Endpoints) == 0 || o.Election == "" || o.LeaseTTL < time.Second {
		return nil, errors.New("ha: endpoints, election and a lease TTL of at least 1s are required")
	}
	o.IDWindow = max(o.IDWindow, 1)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	cli, err := dial(o)
	if err != nil {
		return nil, err
	}
	return &Node{opts: o, cli: cli, log: o.Logger, since: time.Now(),
		stepReq: make(chan string, 1), extendCh: make(chan struct{}, 1)}, nil
}

// SetAdvertise sets the URL advertised to the group, if Options.Advertise was empty;
// call it before Run.
func (n *Node) SetAdvertise(url string) {
	if n.opts.Advertise == "" {
		n.opts.Advertise = url
	}
}

// Close closes the etcd client; call it after Run has returned.
func (n *Node) Close() error { return n.cli.Close() }

// Admit is the engine's gate (cycle.Gate): a tick starting at start may start only while
// this node is active and start is before its renewal deadline, and only with an id
// inside the reserved window.
func (n *Node) Admit(start time.Time, next uint64) (id, epoch uint64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.active {
		return 0, 0, false
	}
	if !start.Before(n.deadline) {
		n.refused.Add(1)
		n.askStepDown("lease not renewed before lease_ttl minus the safety margin")
		return 0, 0, false
	}
	id = max(next, n.idFloor)
	if id+n.opts.IDWindow/2 > n.idMax {
		select {
		case n.extendCh <- struct{}{}:
		default:
		}
	}
	if id > n.idMax {
		n.refused.Add(1)
		return 0, 0, false // the window's extension is late: wait for it
	}
	n.granted.Store(n.epoch)
	return id, n.epoch, true
}

// Epoch returns the epoch of the last tick admitted (0 before any): remote modules'
// requests carry it.
func (n *Node) Epoch() uint64 { return n.granted.Load() }

// StepDown asks an active node to step down: it stops admitting ticks at once and
// resigns, so that a standby takes over.
func (n *Node) StepDown() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.active {
		return ErrNotActive
	}
	n.active = false // no tick starts from now on
	n.askStepDown("step-down asked by an operator")
	return nil
}

// askStepDown passes a step-down reason to the term's loop; the caller holds mu.
func (n *Node) askStepDown(reason string) {
	select {
	case n.stepReq <- reason:
	default:
	}
}

// Status returns the node's view of its group.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{Role: RoleStandby, Node: n.opts.Node, Since: n.since, Reason: n.reason, Error: n.lastErr, Refused: n.refused.Load()}
	if n.leader != nil {
		l := *n.leader
		s.Active = &l
	}
	if n.active {
		s.Role, s.Epoch, s.IDs = RoleActive, n.epoch, [2]uint64{n.idFloor, n.idMax}
	}
	return s
}

// Active reports whether the node is active.
func (n *Node) Active() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.active
}

// setLeader records the election's leader as observed.
func (n *Node) setLeader(l *Leader) {
	n.mu.Lock()
	n.leader = l
	n.mu.Unlock()
}

// emit logs ev and passes it to OnEvent.
func (n *Node) emit(ev Event) {
	if ev.Kind == "ha_active" {
		n.log.Info("active", zap.Uint64("epoch", ev.Epoch), zap.Uint64("first_tick", ev.FirstTick))
	} else {
		n.log.Warn("standby", zap.Uint64("epoch", ev.Epoch), zap.String("reason", ev.Reason))
	}
	if n.opts.OnEvent != nil {
		n.opts.OnEvent(ev)
	}
}
