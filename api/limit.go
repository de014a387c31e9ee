package api

import (
	"context"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of a ReadLimit's zero fields.
const (
	// DefaultReadWait is the longest a paced request waits for its turn when
	// ReadLimit.MaxWait is zero.
	DefaultReadWait = time.Second
)

// ReadLimit paces the read routes: at most Rate requests a second are served, across all
// clients, after a burst of Burst. A request beyond that waits for its turn (the client's
// next request then comes later: a client polling in a tight loop is slowed down to its
// share); one that would wait longer than MaxWait is answered 429 with Retry-After.
//
// Why a daemon limits its own readers: on a small machine, clients polling in a tight loop
// take the CPUs the tick needs, and Go has no goroutine priorities to keep the scheduler
// ahead of the handlers. Served summaries change once a tick, so pacing pollers loses
// them nothing a long-poll (?wait=) or the SSE stream would not give them cheaper.
//
// Not paced: /healthz, /readyz and /metrics (probes must not queue behind pollers), the
// SSE stream (one request a subscriber), the admin routes, and a long-poll (?wait=)
// answered with a tick newer than any answered on its connection — at most one a tick a
// connection, so a client that follows every tick is never paced, even one that falls a
// tick behind. The connection is known when the server's ConnContext calls ConnContext;
// without it, only a long-poll that waited for the newer tick it is answered is spared.
type ReadLimit struct {
	// Rate is the sustained number of paced requests served a second. Zero (or not a
	// positive number): no limit.
	Rate float64
	// Burst is the number of paced requests served at once above the rate, after a quiet
	// spell. Zero: Rate/50, at least 1 and at most 1<<20.
	Burst int
	// MaxWait is the longest a request waits for its turn. Zero: DefaultReadWait.
	MaxWait time.Duration
}

// withDefaults returns l with its zero fields filled.
func (l ReadLimit) withDefaults() ReadLimit {
	if l.Burst <= 0 {
		l.Burst = int(max(1, min(l.Rate/50, 1<<20)))
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultReadWait
	}
	return l
}

// ReadLimiter paces the read routes of the servers it is given to (Options.ReadLimiter).
// Its limit can be changed while they serve, e.g. on a configuration reload. Its methods
// are safe for concurrent use.
type ReadLimiter struct {
	delayed atomic.Uint64 // requests that waited for their turn
	refused atomic.Uint64 // requests answered 429

	mu  sync.Mutex                   // serialises Set
	cur atomic.Pointer[limiterState] // read by every paced request without a lock
}

// limiterState is a ReadLimiter's limit in force; Set replaces it whole.
type limiterState struct {
	limit   ReadLimit     // as set, without defaults
	lim     *rate.Limiter // nil: no limit
	maxWait time.Duration
}

// NewReadLimiter returns a ReadLimiter that enforces l.
func NewReadLimiter(l ReadLimit) *ReadLimiter {
	rl := &ReadLimiter{}
	rl.Set(l)
	return rl
}

// Set replaces the limit. Requests waiting for their turn keep the turn they were given.
func (rl *ReadLimiter) Set(l ReadLimit) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	st := &limiterState{limit: l}
	if l.Rate > 0 { // not zero, negative or NaN
		d := l.withDefaults()
		st.maxWait = d.MaxWait
		if old := rl.cur.Load(); old != nil && old.lim != nil {
			now := time.Now()
			old.lim.SetLimitAt(now, rate.Limit(d.Rate))
			old.lim.SetBurstAt(now, d.Burst)
			st.lim = old.lim // the turns already given stay given
		} else {
			st.lim = rate.NewLimiter(rate.Limit(d.Rate), d.Burst)
		}
	}
	rl.cur.Store(st)
}

// Limit returns the limit as last set.
func (rl *ReadLimiter) Limit() ReadLimit { return rl.cur.Load().limit }

// ReadLimitStats counts what a ReadLimiter did since it was made.
type ReadLimitStats struct {
	// Delayed is the number of requests that waited for their turn (including those
	// whose client left meanwhile).
	Delayed uint64
	// Refused is the number of requests answered 429.
	Refused uint64
}

// Stats returns the limiter's counts, e.g. for metrics.
func (rl *ReadLimiter) Stats() ReadLimitStats {
	return ReadLimitStats{Delayed: rl.delayed.Load(), Refused: rl.refused.Load()}
}

// reserve takes a turn at now: ok with the reservation to wait for (nil: serve at once),
// or ok false with the wait the turn would have taken (the turn is given back).
func (rl *ReadLimiter) reserve(now time.Time) (wait time.Duration, res *rate.Reservation, ok bool) {
	st := rl.cur.Load()
	lim, maxWait := st.lim, st.maxWait
	if lim == nil || lim.AllowN(now, 1) { // AllowN allocates nothing; ReserveN does
		return 0, nil, true
	}
	res = lim.ReserveN(now, 1)
	if !res.OK() {
		return 0, nil, false // cannot happen with Burst >= 1
	}
	wait = res.DelayFrom(now)
	if wait > maxWait {
		res.CancelAt(now)
		return wait, nil, false
	}
	return wait, res, true
}

// admit waits for the request's turn and reports whether to serve it. When it returns
// false it has answered (429) or the client has left.
func (rl *ReadLimiter) admit(w http.ResponseWriter, r *http.Request) bool {
	wait, res, ok := rl.reserve(time.Now())
	if !ok {
		rl.refused.Add(1)
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, apiError{Code: "rate_limited",
			Message: "too many read requests: retry later, or long-poll with ?wait= or subscribe to /ticks/stream"})
		return false
	}
	if wait <= 0 {
		return true
	}
	rl.delayed.Add(1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		res.CancelAt(time.Now()) // the turn goes to the next client
		return false
	}
}

// paced is the middleware of the paced routes.
func (s *server) paced(next http.Handler) http.Handler {
	if s.opts.ReadLimiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.ReadLimiter.admit(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// connState is what the API keeps per connection.
type connState struct {
	lastLongPoll atomic.Uint64 // the newest tick answered to a long-poll on the connection
}

type connStateKey struct{}

// ConnContext returns ctx with the state the API keeps for the connection c: the newest
// tick answered to a long-poll on it, so that a client following every tick is not paced
// (see ReadLimit). Use it as http.Server.ConnContext, or call it from yours.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connStateKey{}, &connState{})
}

// newForConn reports whether tick id is newer than every tick answered to a long-poll on
// r's connection, and records it; without the connection's state (no ConnContext), it
// reports waited.
func newForConn(r *http.Request, id uint64, waited bool) bool {
	cs, ok := r.Context().Value(connStateKey{}).(*connState)
	if !ok {
		return waited
	}
	for {
		last := cs.lastLongPoll.Load()
		if id <= last {
			return false
		}
		if cs.lastLongPoll.CompareAndSwap(last, id) {
			return true
		}
	}
}
