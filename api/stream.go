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
//	: ping            every PingInterval
//	: skipped N events (slow reader)
//
// The stream carries what happens after the client connects; a client that resumes with
// Last-Event-ID (header, or the last_event_id query parameter) first receives the ticks
// after that id still in the history (at most maxReplay). The subscription buffers
// StreamBuffer events; a reader that falls behind loses its oldest events (announced by
// the "skipped" comment) and never slows the tick. A client that accepts no data for
// streamWriteTimeout is disconnected. The stream ends when the client leaves, the request
// context ends (even with a write blocked on a client that stopped reading), or the
// engine's hub closes the subscription.
func (s *server) getStream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	sub := s.e.Events().Subscribe(StreamBuffer)
	defer sub.Close()

	// A client that stopped reading leaves this handler blocked in a write, where it does
	// not see its context end (the client left, or the daemon shuts down and cancels the
	// server's base context). When the context ends, the write deadline is moved to now,
	// so the blocked write fails at once; send checks closing after setting its own
	// deadline, so that a write started meanwhile does not get the deadline back.
	var closing atomic.Bool
	unblocked := make(chan struct{})
	stopUnblock := context.AfterFunc(r.Context(), func() {
		defer close(unblocked)
		closing.Store(true)
		_ = rc.SetWriteDeadline(time.Now())
	})
	defer func() {
		if !stopUnblock() {
			// The context ended and moved the write deadline to now. The handler is past
			// any write: give net/http streamEndGrace to end the body cleanly, so that a
			// client reads the end of the stream rather than a cut-off transfer.
			<-unblocked
			_ = rc.SetWriteDeadline(time.Now().Add(streamEndGrace))
		}
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	var buf bytes.Buffer
	send := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if closing.Load() {
			return false
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		buf.Reset()
		return rc.Flush() == nil
	}
	buf.WriteString("retry: 2000\n: connected\n\n")
	if !send() {
		return
	}

	var last uint64 // the last tick id sent
	resume := r.Header.Get("Last-Event-ID")
	if resume == "" {
		resume = r.URL.Query().Get("last_event_id")
	}
	if id, ok := s.parseEventID(resume); ok {
		last = id
		replay := s.e.History().List(maxReplay, 0)
		slices.Reverse(replay)
		for _, sum := range replay {
			if sum.TickID <= last {
				continue
			}
			if !s.writeTickEvent(&buf, sum) || !send() {
				return
			}
			last = sum.TickID
		}
	}

	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	var dropped uint64
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			buf.WriteString(": ping\n\n")
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			if d := sub.Dropped(); d != dropped {
				buf.WriteString(": skipped " + strconv.FormatUint(d-dropped, 10) + " events (slow reader)\n\n")
				dropped = d
			}
			switch ev.Type {
			case faultsummary.EventTick:
				if ev.Summary == nil || ev.Summary.TickID <= last {
					continue
				}
				if !s.writeTickEvent(&buf, ev.Summary) {
					return
				}
				last = ev.Summary.TickID
			case faultsummary.EventBreaker:
				writeEvent(&buf, "breaker", ev.Breaker)
			case faultsummary.EventEmergency:
				writeEvent(&buf, "emergency", ev.Emergency)
			default:
				continue
			}
		}
		if !send() {
			return
		}
	}
}

// writeTickEvent appends a tick event to buf; false if the summary cannot be encoded.
func (s *server) writeTickEvent(buf *bytes.Buffer, sum *faultsummary.Summary) bool {
	b, err := s.encode(sum)
	if err != nil {
		s.log.Error("stream: " + err.Error())
		return false
	}
	buf.WriteString("event: tick\nid: ")
	buf.WriteString(s.eventID(sum.TickID))
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	return true
}

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
