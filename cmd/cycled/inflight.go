package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cycled/cycled/api"
)

// inflight tracks the server's connections and the requests being served, so that a
// shutdown can close at once the connections of clients still sending a request (which
// http.Server.Shutdown would otherwise wait for until the drain timeout), and say which
// requests it had to cut.
type inflight struct {
	mu    sync.Mutex
	reqs  map[*http.Request]time.Time // guarded by mu: request → when it started
	conns map[net.Conn]*connInfo      // guarded by mu
}

type connInfo struct {
	state    http.ConnState
	handlers int // requests of the connection being served
}

type connKey struct{}

// connContext is the server's ConnContext: it puts the connection in the request context,
// with the API's state for it (api.ConnContext).
func (f *inflight) connContext(ctx context.Context, c net.Conn) context.Context {
	return api.ConnContext(context.WithValue(ctx, connKey{}, c), c)
}

// connState is the server's ConnState hook.
func (f *inflight) connState(c net.Conn, s http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s == http.StateClosed || s == http.StateHijacked {
		delete(f.conns, c)
		return
	}
	if f.conns == nil {
		f.conns = make(map[net.Conn]*connInfo)
	}
	if ci := f.conns[c]; ci != nil {
		ci.state = s
	} else {
		f.conns[c] = &connInfo{state: s}
	}
}

// wrap returns h with its requests tracked.
func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(net.Conn)
		f.mu.Lock()
		if f.reqs == nil {
			f.reqs = make(map[*http.Request]time.Time)
		}
		f.reqs[r] = time.Now()
		if ci := f.conns[c]; ci != nil {
			ci.handlers++
		}
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.reqs, r)
			if ci := f.conns[c]; ci != nil {
				ci.handlers--
			}
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// closeReading closes the connections that have not delivered their first request yet:
// clients still sending one, or connected without a word. http.Server.Shutdown closes
// idle keep-alive connections itself (also one whose next request is half sent) but waits
// for new ones for 5 s. It returns how many it closed.
func (f *inflight) closeReading() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for c, ci := range f.conns {
		if ci.state == http.StateNew && ci.handlers == 0 {
			_ = c.Close()
			n++
		}
	}
	return n
}

// list describes the requests in flight ("GET /ticks/stream (1.2s)"), oldest first. Only
// the method and the path are given: a query string may carry a token.
func (f *inflight) list(now time.Time) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	type req struct {
		desc  string
		start time.Time
	}
	rs := make([]req, 0, len(f.reqs))
	for r, t := range f.reqs {
		rs = append(rs, req{fmt.Sprintf("%s %s (%s)", r.Method, r.URL.Path, now.Sub(t).Round(time.Millisecond)), t})
	}
	slices.SortFunc(rs, func(a, b req) int { return a.start.Compare(b.start) })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.desc
	}
	return out
}
