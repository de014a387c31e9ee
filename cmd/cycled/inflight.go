package main

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// inflight tracks the requests being served, so that a shutdown that has to cut some can
// say which ones.
type inflight struct {
	mu   sync.Mutex
	reqs map[*http.Request]time.Time // guarded by mu: request → when it started
}

// wrap returns h with its requests tracked.
func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.reqs == nil {
			f.reqs = make(map[*http.Request]time.Time)
		}
		f.reqs[r] = time.Now()
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.reqs, r)
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
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
