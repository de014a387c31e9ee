package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/faultsummary"
)

// sseEvent is one parsed item of the stream: an event, or a comment line.
type sseEvent struct {
	Event, ID, Data string
	Comment         string
}

// openStream connects to /ticks/stream and parses it in a goroutine. The returned func
// closes the connection and waits for the reader to end.
func (r *rig) openStream(hdr ...string) (<-chan sseEvent, func()) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.srv.URL+"/ticks/stream", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := r.srv.Client().Do(req)
	if err != nil {
		r.t.Fatalf("GET /ticks/stream: %v", err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		res.Body.Close()
		r.t.Fatalf("GET /ticks/stream: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		br := bufio.NewReader(res.Body)
		var ev sseEvent
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev.Event != "" || ev.Data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ch <- sseEvent{Comment: strings.TrimSpace(line[1:])}
			default:
				k, v, _ := strings.Cut(line, ": ")
				switch k {
				case "event":
					ev.Event = v
				case "id":
					ev.ID = v
				case "data":
					ev.Data = v
				}
			}
		}
	}()
	return ch, func() {
		res.Body.Close()
		<-done
	}
}

// next returns the next event whose name is one of names (comments are skipped unless
// names contains ":"), failing after 10 s.
func next(t *testing.T, ch <-chan sseEvent, names ...string) sseEvent {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended while waiting for %v", names)
			}
			for _, n := range names {
				if ev.Event == n || (n == ":" && ev.Comment != "") {
					return ev
				}
			}
		case <-timeout.C:
			t.Fatalf("no %v event within 10s", names)
		}
	}
}

func (r *rig) engineTick() *faultsummary.Summary {
	r.t.Helper()
	s, err := r.e.Tick(context.Background())
	if err != nil {
		r.t.Fatalf("Tick: %v", err)
	}
	return s
}

func TestStreamDeliversTicksBreakersAndEmergencies(t *testing.T) {
	r := newRig(t, rigOptions{})
	ch, closeStream := r.openStream()
	if c := next(t, ch, ":"); c.Comment != "connected" {
		t.Fatalf("first comment %q", c.Comment)
	}
	for i := 1; i <= 3; i++ {
		r.engineTick()
		ev := next(t, ch, "tick", "breaker", "emergency")
		var s faultsummary.Summary
		if err := json.Unmarshal([]byte(ev.Data), &s); err != nil {
			t.Fatalf("tick data: %v: %s", err, ev.Data)
		}
		if ev.Event != "tick" || s.TickID != uint64(i) || !strings.HasSuffix(ev.ID, fmt.Sprintf("-%d", i)) {
			t.Fatalf("event %d: %s id %q tick %d", i, ev.Event, ev.ID, s.TickID)
		}
	}

	r.failFlaky.Store(true)
	r.engineTick()
	r.engineTick() // flaky's breaker opens
	ev := next(t, ch, "breaker")
	var be faultsummary.BreakerEvent
	if err := json.Unmarshal([]byte(ev.Data), &be); err != nil {
		t.Fatal(err)
	}
	if be.Breaker != "flaky" || be.From != "closed" || be.To != "open" || be.TickID != 5 {
		t.Errorf("breaker event %+v", be)
	}

	r.failSafety.Store(true)
	r.engineTick()
	ev = next(t, ch, "emergency")
	var ee faultsummary.EmergencyEvent
	if err := json.Unmarshal([]byte(ev.Data), &ee); err != nil {
		t.Fatal(err)
	}
	if !ee.Entered || ee.TickID != 6 {
		t.Errorf("emergency event %+v", ee)
	}
	if c := next(t, ch, ":"); c.Comment != "ping" {
		// Comments are only pings from here on.
		t.Errorf("comment %q, want ping", c.Comment)
	}

	closeStream()
	waitFor(t, "the stream handler to unsubscribe", func() bool { return r.e.Events().Subscribers() == 0 })
}

func TestStreamResumesWithLastEventID(t *testing.T) {
	r := newRig(t, rigOptions{})
	for range 3 {
		r.engineTick()
	}
	res, _ := r.do(http.MethodGet, "/ticks/1", nil)
	id := strings.Trim(res.Header.Get("ETag"), `"`)

	ch, closeStream := r.openStream("Last-Event-ID", id)
	defer closeStream()
	for _, want := range []uint64{2, 3} {
		var s faultsummary.Summary
		if err := json.Unmarshal([]byte(next(t, ch, "tick").Data), &s); err != nil || s.TickID != want {
			t.Fatalf("replayed tick %d (%v), want %d", s.TickID, err, want)
		}
	}
	r.engineTick()
	var s faultsummary.Summary
	if err := json.Unmarshal([]byte(next(t, ch, "tick").Data), &s); err != nil || s.TickID != 4 {
		t.Fatalf("live tick %d (%v), want 4", s.TickID, err)
	}

	// An id from another process (or garbage) replays nothing.
	ch2, closeStream2 := r.openStream("Last-Event-ID", "otherboot-1")
	defer closeStream2()
	next(t, ch2, ":") // connected
	r.engineTick()
	if err := json.Unmarshal([]byte(next(t, ch2, "tick").Data), &s); err != nil || s.TickID != 5 {
		t.Fatalf("first tick after a foreign id: %d (%v), want 5", s.TickID, err)
	}
}

// A client that subscribes and never reads must not slow the tick down: the hub drops its
// oldest events and the handler blocks (at worst) on its own socket.
func TestStreamNeverReadingClientDoesNotBlockTicks(t *testing.T) {
	r := newRig(t, rigOptions{})
	conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(1024)
	}
	if _, err := fmt.Fprintf(conn, "GET /ticks/stream HTTP/1.1\r\nHost: cycled\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to subscribe", func() bool { return r.e.Events().Subscribers() == 1 })

	const ticks = 1000
	start := time.Now()
	var slowest time.Duration
	for range ticks {
		t0 := time.Now()
		r.engineTick()
		slowest = max(slowest, time.Since(t0))
	}
	if slowest > time.Second {
		t.Errorf("slowest of %d ticks took %s with a never-reading subscriber", ticks, slowest)
	}
	t.Logf("%d ticks in %s (slowest %s) with a never-reading stream subscriber", ticks, time.Since(start), slowest)

	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream handler to end", func() bool { return r.e.Events().Subscribers() == 0 })
}

// A stream whose client stopped reading leaves its handler blocked in a write; when the
// request's context ends (cmd/cycled cancels the server's base context at shutdown), the
// handler must return at once rather than when its write times out (streamWriteTimeout,
// 10 s), or the daemon's shutdown waits out its drain timeout for it.
func TestStreamBlockedWriteEndsWithItsContext(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRig(t, rigOptions{base: base, sendBuffer: 4096})
	conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(1024)
	}
	if _, err := fmt.Fprintf(conn, "GET /ticks/stream HTTP/1.1\r\nHost: cycled\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to subscribe", func() bool { return r.e.Events().Subscribers() == 1 })
	for range 300 { // far more than the 4 KB send and 1 KB receive buffers hold
		r.engineTick()
	}
	start := time.Now()
	cancel()
	waitFor(t, "the stream handler to end", func() bool { return r.e.Events().Subscribers() == 0 })
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the handler ended %s after its context", d)
	}
}

// TestStreamEndsCleanlyWithItsContext: when the daemon shuts down (the server's base
// context ends) a stream that is not blocked in a write ends like any response, with the
// end of its chunked body, so that a client reads the end of the stream (io.EOF) rather
// than a cut-off transfer (curl: exit 18).
func TestStreamEndsCleanlyWithItsContext(t *testing.T) {
	for i := range 20 { // the unblocking deadline raced the handler's return 68 times in 100
		base, cancel := context.WithCancel(context.Background())
		r := newRig(t, rigOptions{base: base})
		res, err := r.srv.Client().Get(r.srv.URL + "/ticks/stream")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		for line := ""; line != ": connected\n"; {
			if line, err = br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		_, err = io.Copy(io.Discard, br)
		res.Body.Close()
		if err != nil {
			t.Fatalf("run %d: the stream ended with %v, want the end of its body", i, err)
		}
	}
}
