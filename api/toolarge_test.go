package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawPost writes a POST of size body bytes with the given extra header lines, body
// included when withBody, before reading anything, and returns the answer read after.
func rawPost(t *testing.T, addr, path string, size int, withBody bool, extra ...string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, addr, size)
	for _, l := range extra {
		hdr.WriteString(l + "\r\n")
	}
	hdr.WriteString("\r\n")
	if _, err := io.WriteString(c, hdr.String()); err != nil {
		t.Fatalf("writing the header: %v", err)
	}
	if withBody {
		// The whole body first, as urllib does: this blocks until the server reads it.
		if _, err := c.Write(bytes.Repeat([]byte{'x'}, size)); err != nil {
			t.Fatalf("writing the body: %v (the server reset the connection)", err)
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return res, b
}

// TestOversizedBodyAnswered: a client that declares a body over the limit gets the JSON
// 413, whether it writes its whole body before reading (the answer must not be lost to a
// connection reset) or asks with Expect: 100-continue (no 100 Continue is sent, the 413
// comes at once); the server keeps serving.
func TestOversizedBodyAnswered(t *testing.T) {
	r := newRig(t, rigOptions{})
	addr := strings.TrimPrefix(r.srv.URL, "http://")
	for _, tc := range []struct {
		name     string
		size     int
		withBody bool
		extra    []string
	}{
		{name: "whole body first, 8 MiB", size: 8 << 20, withBody: true},
		{name: "whole body first, 16 MiB", size: 16 << 20, withBody: true},
		{name: "whole body first with Expect", size: 8 << 20, withBody: true, extra: []string{"Expect: 100-continue"}},
		{name: "Expect, waiting for 100 Continue", size: 8 << 20, extra: []string{"Expect: 100-continue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, b := rawPost(t, addr, "/modules", tc.size, tc.withBody, tc.extra...)
			var e errorBody
			if res.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &e) != nil || e.Error.Code != "body_too_large" {
				t.Fatalf("answer %d %s, want the JSON 413", res.StatusCode, b)
			}
			if !res.Close {
				t.Errorf("the 413 does not close the connection")
			}
		})
	}
	r.expect(http.StatusOK, http.MethodGet, "/healthz", nil)
}
