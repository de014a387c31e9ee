package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Bounds of the graceful 413 (see tooLarge).
const (
	// MaxDrainBytes is the most of an oversized request body the server reads and
	// discards after answering 413, so that a client that sends its whole body before
	// reading the answer can read it. A longer body is cut (the client may then see a
	// connection reset instead of the 413).
	MaxDrainBytes = 64 << 20
	// DrainTimeout bounds the time spent discarding an oversized body.
	DrainTimeout = 30 * time.Second
	// DrainIdle is how long the discarding waits for more of the body: a client that
	// stops sending for this long is cut off.
	DrainIdle = 2 * time.Second
	// maxDrains bounds the connections being drained at once; beyond it, the 413 is
	// answered the ordinary way (net/http closes the connection after the answer).
	maxDrains = 8
)

// tooLarge answers a request whose declared body exceeds the limit with 413, without
// reading the body first and without asking for it (no 100 Continue is sent). The server
// would otherwise close the connection with the body unread, which makes the kernel reset
// it: a client that writes its whole body before reading the answer (Python's urllib,
// http.client with Expect: 100-continue) then sees a reset instead of the 413. So, on
// HTTP/1, the connection is taken over: the answer is written with Connection: close, the
// sending side is shut (the client sees the answer end), and the declared body is read and
// discarded while it keeps coming (at most MaxDrainBytes, for at most DrainTimeout, no
// pause longer than DrainIdle) before the close.
func (s *server) tooLarge(w http.ResponseWriter, r *http.Request) {
	e := apiError{Code: "body_too_large", Message: "request body exceeds " + strconv.FormatInt(s.maxBody, 10) + " bytes"}
	if r.ProtoMajor != 1 || !s.drainSlot() {
		writeError(w, http.StatusRequestEntityTooLarge, e)
		return
	}
	defer func() { <-s.drains }()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, e)
		return
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(DrainIdle))
	if _, err := conn.Write(rawError(http.StatusRequestEntityTooLarge, e)); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	discard(conn, brw.Reader, min(r.ContentLength, MaxDrainBytes))
}

// discard reads and drops n bytes from rd, the reader of conn, while they keep coming:
// it stops at the first pause of DrainIdle, after DrainTimeout in all, or at an error.
func discard(conn net.Conn, rd io.Reader, n int64) {
	end := time.Now().Add(DrainTimeout)
	buf := make([]byte, 32<<10)
	for n > 0 {
		now := time.Now()
		if !now.Before(end) {
			return
		}
		dl := now.Add(DrainIdle)
		if dl.After(end) {
			dl = end
		}
		_ = conn.SetReadDeadline(dl)
		k, err := rd.Read(buf[:min(n, int64(len(buf)))])
		n -= int64(k)
		if err != nil {
			return
		}
	}
}

// drainSlot takes one of the maxDrains slots; false when all are taken.
func (s *server) drainSlot() bool {
	select {
	case s.drains <- struct{}{}:
		return true
	default:
		return false
	}
}

// rawError is a complete HTTP/1.1 error answer that closes the connection.
func rawError(status int, e apiError) []byte {
	body, _ := json.Marshal(errorBody{Error: e})
	body = append(body, '\n')
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	fmt.Fprintf(&b, "Content-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n")
	fmt.Fprintf(&b, "Date: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", time.Now().UTC().Format(http.TimeFormat), len(body))
	b.Write(body)
	return b.Bytes()
}
