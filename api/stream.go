package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/faultsummary"
)

// getStream serves GET /ticks/stream, a Server-Sent Events stream:
//
//	event: tick       id: <boot>-<tick id>   data: the summary (as GET /ticks/{id})
//	event: breaker    data: {"breaker","from","to","reason","at","tick_id"}
//	event: emergency  data: {"entered","tick_id","reason","latched","at"}
//	event: shed       data: {"tick_id","shed","level","modules","reason"}
//	: ping            every PingInterval
//	: skipped N events (slow reader)
//
// The stream carries what happens after the client connects; a client that resumes with
// Last-Event-ID (header, or the last_event_id query parameter) first receives the ticks
// after that id still in the history (at most maxReplay). The subscription buffers
// StreamBuffer events; a reader that falls behind loses its oldest events (announced by
// the "skipped" comment) and never slows the tick. A client that accepts no data for
// streamWriteTimeout (less at most deadlineStep) is disconnected. The stream ends when the client leaves, the request
// context ends (even with a write blocked on a client that stopped reading), or the
// engine's hub closes the subscription.
func (s *server) getStream(w http.ResponseWriter, r *http.Request) {
	c := &sseConn{w: w, rc: http.NewResponseController(w)}
	sub := s.e.Events().Subscribe(StreamBuffer)
	defer sub.Close()
	defer c.unblockOnDone(r.Context())()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	c.buf.WriteString("retry: 2000\n: connected\n\n")
	if !c.send() || !s.replay(c, r) {
		return
	}
	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			c.buf.WriteString(": ping\n\n")
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			c.skipped(sub.Dropped())
			wrote, alive := s.writeStreamEvent(c, ev)
			if !alive {
				return
			}
			if !wrote {
				continue
			}
		}
		if !c.send() {
			return
		}
	}
}

// sseConn is one SSE client's connection: the pending bytes, and what it was sent.
type sseConn struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     bytes.Buffer // written to the client by send
	shared  [][]byte     // tick events shared with the other subscribers, written by send after buf
	closing atomic.Bool  // the request's context ended: no more writes
	moved   time.Time    // when send last moved the write deadline
	last    uint64       // the last tick id sent
	dropped uint64       // the subscription's drops already announced
}

// unblockOnDone arranges for a write blocked on a client that stopped reading to fail
// when ctx ends, and returns the function to defer to undo it.
//
// A client that stopped reading leaves the handler blocked in a write, where it does not
// see its context end (the client left, or the daemon shuts down and cancels the server's
// base context). When the context ends, the write deadline is moved to now, so the
// blocked write fails at once; send checks closing after setting its own deadline, so
// that a write started meanwhile does not get the deadline back.
func (c *sseConn) unblockOnDone(ctx context.Context) func() {
	unblocked := make(chan struct{})
	stopUnblock := context.AfterFunc(ctx, func() {
		defer close(unblocked)
		c.closing.Store(true)
		_ = c.rc.SetWriteDeadline(time.Now())
	})
	return func() {
		if !stopUnblock() {
			// The context ended and moved the write deadline to now. The handler is past
			// any write: give net/http streamEndGrace to end the body cleanly, so that a
			// client reads the end of the stream rather than a cut-off transfer.
			<-unblocked
			_ = c.rc.SetWriteDeadline(time.Now().Add(streamEndGrace))
		}
	}
}

// deadlineStep is how long send keeps a write deadline before moving it again: moving it
// re-arms a timer of the runtime's, a cost per event and subscriber that a client reading
// at 100 Hz would otherwise pay on every tick. A client that stops reading is dropped
// after at least streamWriteTimeout−deadlineStep, at most streamWriteTimeout.
const deadlineStep = streamWriteTimeout / 10

// send writes and flushes the pending bytes; false when the client is gone.
func (c *sseConn) send() bool {
	if now := time.Now(); now.Sub(c.moved) >= deadlineStep {
		_ = c.rc.SetWriteDeadline(now.Add(streamWriteTimeout))
		c.moved = now
	}
	if c.closing.Load() {
		return false
	}
	if c.buf.Len() > 0 {
		if _, err := c.w.Write(c.buf.Bytes()); err != nil {
			return false
		}
		c.buf.Reset()
	}
	for i, b := range c.shared {
		if _, err := c.w.Write(b); err != nil {
			return false
		}
		c.shared[i] = nil // the event's bytes belong to the encoding cache, not to this client
	}
	c.shared = c.shared[:0]
	return c.rc.Flush() == nil
}

// skipped announces the events the subscription dropped since the last announcement,
// given its count of drops d.
func (c *sseConn) skipped(d uint64) {
	if d != c.dropped {
		c.buf.WriteString(": skipped " + strconv.FormatUint(d-c.dropped, 10) + " events (slow reader)\n\n")
		c.dropped = d
	}
}

// replay sends a resuming client (Last-Event-ID header, or the last_event_id query
// parameter) the ticks after its id still in the history; false when the stream must end.
func (s *server) replay(c *sseConn, r *http.Request) bool {
	resume := r.Header.Get("Last-Event-ID")
	if resume == "" {
		resume = r.URL.Query().Get("last_event_id")
	}
	id, ok := s.parseEventID(resume)
	if !ok {
		return true
	}
	c.last = id
	replay := s.e.History().List(maxReplay, 0)
	slices.Reverse(replay)
	for _, sum := range replay {
		if sum.TickID <= c.last {
			continue
		}
		if !s.writeTickEvent(&c.buf, sum) || !c.send() {
			return false
		}
		c.last = sum.TickID
	}
	return true
}

// writeStreamEvent appends the engine's event ev to the client's pending bytes: wrote
// reports whether it appended anything (a tick already sent, or an unknown kind, is not),
// ok false that the stream must end.
func (s *server) writeStreamEvent(c *sseConn, ev faultsummary.Event) (wrote, ok bool) {
	switch ev.Type {
	case faultsummary.EventTick:
		if ev.Summary == nil || ev.Summary.TickID <= c.last {
			return false, true
		}
		b, err := s.tickEvent(ev.Summary)
		if err != nil {
			s.log.Error("stream: " + err.Error())
			return false, false
		}
		if c.buf.Len() > 0 { // comments first, in the order they came
			c.shared = append(c.shared, c.buf.Bytes())
			c.buf = bytes.Buffer{}
		}
		c.shared = append(c.shared, b)
		c.last = ev.Summary.TickID
	case faultsummary.EventBreaker:
		writeEvent(&c.buf, string(ev.Type), ev.Breaker)
	case faultsummary.EventEmergency:
		writeEvent(&c.buf, string(ev.Type), ev.Emergency)
	case faultsummary.EventShed:
		writeEvent(&c.buf, string(ev.Type), ev.Shed)
	default:
		return false, true
	}
	return true, true
}

// writeTickEvent appends a tick event to buf; false if the summary cannot be encoded.
func (s *server) writeTickEvent(buf *bytes.Buffer, sum *faultsummary.Summary) bool {
	b, err := s.tickEvent(sum)
	if err != nil {
		s.log.Error("stream: " + err.Error())
		return false
	}
	buf.Write(b)
	return true
}

// tickEvent returns the stream's tick event of sum: for the latest summary, the bytes of
// its cached encoding, which every subscriber writes as they are (read-only); for an older
// one, bytes of its own.
func (s *server) tickEvent(sum *faultsummary.Summary) ([]byte, error) {
	b, err := s.encode(sum)
	if err != nil {
		return nil, err
	}
	if c := s.enc.Load(); c != nil && c.s == sum {
		return c.event, nil
	}
	return appendTickEvent(nil, s.eventID(sum.TickID), b), nil
}

// appendTickEvent appends to dst the tick event whose id is id and whose data is the
// summary's JSON body (compact, hence one line).
func appendTickEvent(dst []byte, id string, body []byte) []byte {
	dst = append(dst, "event: tick\nid: "...)
	dst = append(dst, id...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, body...)
	return append(dst, "\n\n"...)
}

// newEncoding returns the cached encoding of sum, whose JSON is body: one buffer holds the
// stream's tick event, and the answer of a read (body and its newline) is a slice of it.
func (s *server) newEncoding(sum *faultsummary.Summary, body []byte) *encoding {
	id := s.eventID(sum.TickID)
	ev := appendTickEvent(make([]byte, 0, len(tickEventFrame)+len(id)+len(body)), id, body)
	at := len(ev) - len(body) - 2 // where body starts: before its closing "\n\n"
	return &encoding{s: sum, body: ev[at : at+len(body) : at+len(body)],
		wire: ev[at : at+len(body)+1 : at+len(body)+1], event: ev}
}

// tickEventFrame is what a tick event adds to its id and data.
const tickEventFrame = "event: tick\nid: \ndata: \n\n"

// writeEvent appends an event whose data is v's JSON (compact, hence on one line).
func writeEvent(buf *bytes.Buffer, name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
}
