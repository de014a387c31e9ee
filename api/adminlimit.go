package api

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// AdminLimit paces the admin routes per client address: a burst of Burst requests, then
// Rate a second. Beyond it an admin request is answered 429 "rate_limited" with
// Retry-After, before its handler runs: a storm of reloads or registrations from one
// client must not take the CPU the tick needs. POST /ticks (a step-mode tick) is not
// paced. Rate 0 (or less): no limit.
type AdminLimit struct {
	Rate  float64
	Burst int
}

// adminClients bounds the client addresses an adminLimiter tracks; when it is reached,
// the addresses that have earned back their whole burst are forgotten first.
const adminClients = 4096

// adminLimiter holds one token bucket per client address under the current AdminLimit.
type adminLimiter struct {
	mu      sync.Mutex
	limit   AdminLimit
	clients map[string]*rate.Limiter
}

// allow reports whether r's client may be served now under limit l; if not, how long
// until it may.
func (a *adminLimiter) allow(r *http.Request, l AdminLimit, now time.Time) (bool, time.Duration) {
	if l.Rate <= 0 {
		return true, 0
	}
	l.Burst = max(l.Burst, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if l != a.limit || a.clients == nil {
		a.limit, a.clients = l, map[string]*rate.Limiter{} // a reload changed it: every client starts afresh
	}
	ip := remoteIP(r)
	lim := a.clients[ip]
	if lim == nil {
		if len(a.clients) >= adminClients {
			a.evict(now)
		}
		lim = rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
		a.clients[ip] = lim
	}
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// evict makes room: clients with a full bucket go first; if none has, an arbitrary one
// does. Called with mu held.
func (a *adminLimiter) evict(now time.Time) {
	for ip, lim := range a.clients {
		if lim.TokensAt(now) >= float64(a.limit.Burst) {
			delete(a.clients, ip)
		}
	}
	for ip := range a.clients {
		if len(a.clients) < adminClients {
			return
		}
		delete(a.clients, ip)
	}
}
