package natsexport

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/cycled/cycled/faultsummary"
)

// Timing of the publisher.
const (
	publishTimeout = 2 * time.Second        // one publish's wait for its acknowledgement
	retryWait      = 100 * time.Millisecond // pause after a failed publish
	dupWindow      = 2 * time.Minute        // the stream's duplicate window, when created here
)

// HeaderKind says what a message carries: "summary" or an event's kind.
const HeaderKind = "Cycled-Kind"

// Options configure an Exporter.
type Options struct {
	// URL is the NATS server's URL.
	URL string
	// Stream is the JetStream stream, created when absent with the subjects <Subject>.>.
	Stream string
	// Subject is the subjects' prefix.
	Subject string
	// Buffer is the most messages waiting for the publisher.
	Buffer int
	// Name names the connection (default "cycled").
	Name string
	// Logger receives connection changes and publish errors (nil: none).
	Logger *zap.Logger
}

// Stats are an exporter's counters.
type Stats struct {
	// Offered counts the messages offered; Published those JetStream acknowledged
	// (duplicates it dropped included); Dropped those dropped, the buffer being full or
	// the exporter closing; Pending those still buffered.
	Offered, Published, Dropped, Pending uint64
}

// message is one message waiting for the publisher: a summary is encoded by the
// publisher, off the tick's goroutine.
type message struct {
	subject, id, kind string
	summary           *faultsummary.Summary
	value             any
}

// Exporter publishes summaries and events to JetStream (see the package documentation).
type Exporter struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream
	log  *zap.Logger
	ch   chan message

	mu     sync.RWMutex
	closed bool // guarded by mu: Offer drops

	offered, published, dropped atomic.Uint64
	stop                        chan struct{} // closed by Close: give up waiting
	done                        chan struct{} // closed when the publisher has ended
}

// New connects to NATS (in the background if the server is not up yet: connection and
// reconnections are retried forever) and starts the publisher.
func New(o Options) (*Exporter, error) {
	if o.Buffer < 1 {
		return nil, errors.New("natsexport: the buffer must hold at least one message")
	}
	if o.Name == "" {
		o.Name = "cycled"
	}
	x := &Exporter{opts: o, log: o.Logger, ch: make(chan message, o.Buffer), stop: make(chan struct{}), done: make(chan struct{})}
	if x.log == nil {
		x.log = zap.NewNop()
	}
	nc, err := nats.Connect(o.URL, nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { x.log.Warn("nats disconnected", zap.Error(err)) }),
		nats.ReconnectHandler(func(c *nats.Conn) { x.log.Info("nats reconnected", zap.String("url", c.ConnectedUrl())) }))
	if err != nil {
		return nil, fmt.Errorf("natsexport: connect %s: %w", o.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natsexport: %w", err)
	}
	x.nc, x.js = nc, js
	go x.run()
	return x, nil
}

// SummaryID is the Nats-Msg-Id of a summary: "<epoch>:<tick>".
func SummaryID(epoch, tick uint64) string {
	return strconv.FormatUint(epoch, 10) + ":" + strconv.FormatUint(tick, 10)
}

// Summary offers a published summary (it must not change afterwards). It never blocks.
func (x *Exporter) Summary(s *faultsummary.Summary) {
	x.offer(message{subject: x.opts.Subject + ".ticks", id: SummaryID(s.Epoch, s.TickID), kind: "summary", summary: s})
}

// Event offers an event of kind (e.g. "emergency", "breaker", "ha_active") that happened
// at tick under epoch; key tells apart events of one kind in one tick (a breaker's name).
// v is encoded as JSON by the publisher. It never blocks.
func (x *Exporter) Event(kind string, epoch, tick uint64, key string, v any) {
	id := SummaryID(epoch, tick) + ":" + kind
	if key != "" {
		id += ":" + key
	}
	x.offer(message{subject: x.opts.Subject + ".events", id: id, kind: kind, value: v})
}

// offer puts m in the buffer, or counts it dropped.
func (x *Exporter) offer(m message) {
	x.offered.Add(1)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		x.dropped.Add(1)
		return
	}
	select {
	case x.ch <- m:
	default:
		x.dropped.Add(1)
	}
}

// Stats returns the exporter's counters.
func (x *Exporter) Stats() Stats {
	return Stats{Offered: x.offered.Load(), Published: x.published.Load(), Dropped: x.dropped.Load(), Pending: uint64(len(x.ch))}
}

// Close stops accepting messages, publishes those buffered for at most wait (the rest are
// counted dropped), and closes the connection.
func (x *Exporter) Close(wait time.Duration) {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return
	}
	x.closed = true
	close(x.ch)
	x.mu.Unlock()
	t := time.AfterFunc(wait, func() { close(x.stop) })
	<-x.done
	t.Stop()
	x.nc.Close()
}
