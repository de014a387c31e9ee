package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// client talks to the daemon.
type client struct {
	base  string
	token string
	hc    *http.Client // ordinary requests: bounded
	long  *http.Client // streams and long-polls: bounded by their context
}

func newClient(base, token string) *client {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}
	return &client{
		base:  base,
		token: token,
		hc:    &http.Client{Transport: tr, Timeout: 10 * time.Second},
		long:  &http.Client{Transport: tr},
	}
}

// response is a finished request.
type response struct {
	status int
	body   []byte
	header http.Header
}

// do sends a request (with the admin token when admin is set) and reads the whole answer.
func (c *client) do(ctx context.Context, method, path string, body []byte, admin bool, hdr ...string) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	hc := c.hc
	if strings.Contains(path, "wait=") {
		hc = c.long
	}
	resp, err := hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return response{status: resp.StatusCode, body: b, header: resp.Header}, nil
}

// latestID returns the id of the latest tick, read from the ETag of GET /ticks/latest
// (HEAD is served like GET, without the body).
func (c *client) latestID(ctx context.Context) (uint64, error) {
	r, err := c.do(ctx, http.MethodHead, "/ticks/latest", nil, false)
	if err != nil {
		return 0, err
	}
	if r.status != http.StatusOK {
		return 0, fmt.Errorf("HEAD /ticks/latest: %d", r.status)
	}
	id, ok := etagID(r.header.Get("ETag"))
	if !ok {
		return 0, fmt.Errorf("HEAD /ticks/latest: ETag %q has no tick id", r.header.Get("ETag"))
	}
	return id, nil
}

// etagID returns the tick id of an ETag or SSE id ("<boot>-<tick>").
func etagID(tag string) (uint64, bool) {
	tag = strings.Trim(strings.TrimPrefix(tag, "W/"), `"`)
	i := strings.LastIndexByte(tag, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(tag[i+1:], 10, 64)
	return n, err == nil
}
