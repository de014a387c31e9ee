package api

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Bounds of the admin refusal guard.
const (
	// AuthFailureBurst is the number of failed admin authentications (401) one remote
	// address may make in a row before it is slowed down.
	AuthFailureBurst = 10
	// AuthFailureEvery is the pace at which a slowed-down address earns one more attempt:
	// beyond the burst, its admin requests are answered 429 (with Retry-After, the token
	// not even compared) until it has waited this long per attempt.
	AuthFailureEvery = 2 * time.Second
	// authFailureAddrs bounds the number of remote addresses tracked; when it is reached,
	// the addresses that have earned back their whole burst are forgotten first.
	authFailureAddrs = 4096
	// refusalLogBurst and refusalLogEvery rate-limit the refusal log lines across all
	// clients; the lines suppressed meanwhile are counted in the next one.
	refusalLogBurst = 20
	refusalLogEvery = time.Second
)

// Refusal reasons: the "reason" label of cycled_http_admin_refused_total.
const (
	refusedMissing       = "missing_token"     // token configured, none presented
	refusedInvalid       = "invalid_token"     // token configured, a wrong one presented
	refusedUnexpected    = "unexpected_token"  // no token configured, one presented
	refusedDisabled      = "admin_disabled"    // no token configured, not on loopback
	refusedCrossOrigin   = "cross_origin"      // a browser's cross-origin request
	refusedForeignHost   = "foreign_host"      // no token configured, Host not loopback
	refusedForeignOrigin = "foreign_origin"    // no token configured, Origin not the loopback origin
	refusedThrottled     = "too_many_failures" // slowed down after repeated failures
	refusedRateLimited   = "rate_limited"      // beyond http.admin_limit
)

// guard records admin refusals: a rate-limited log line, a counter by reason, and the
// per-address slow-down of repeated authentication failures. Its methods are safe for
// concurrent use.
type guard struct {
	log     *zap.Logger
	refused *prometheus.CounterVec // nil without a registry
	now     func() time.Time

	mu         sync.Mutex
	failures   map[string]*rate.Limiter // by remote IP; bounded by authFailureAddrs
	logLim     *rate.Limiter
	suppressed int // log lines not written since the last one
}

func newGuard(log *zap.Logger, reg *prometheus.Registry, now func() time.Time) *guard {
	if now == nil {
		now = time.Now
	}
	g := &guard{log: log, now: now, failures: map[string]*rate.Limiter{},
		logLim: rate.NewLimiter(rate.Every(refusalLogEvery), refusalLogBurst)}
	if reg != nil {
		g.refused = registerCounterVec(reg, prometheus.CounterOpts{Name: "cycled_http_admin_refused_total",
			Help: "Admin requests refused, by reason (missing_token, invalid_token, unexpected_token, admin_disabled, cross_origin, foreign_host, foreign_origin, too_many_failures, rate_limited)."},
			[]string{"reason"})
	}
	return g
}

// registerCounterVec registers a counter vector, or returns the one already registered
// under its name (a registry shared by several servers in one process).
func registerCounterVec(reg *prometheus.Registry, opts prometheus.CounterOpts, labels []string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(opts, labels)
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return old
			}
		}
		return nil
	}
	return c
}

// remoteIP is the address failures are counted by: the peer's IP without its port.
func remoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// throttled reports whether r's address has used up its failed attempts, and when it
// may try again.
func (g *guard) throttled(r *http.Request) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	lim := g.failures[remoteIP(r)]
	if lim == nil {
		return false, 0
	}
	now := g.now()
	if lim.TokensAt(now) >= 1 {
		return false, 0
	}
	res := lim.ReserveN(now, 1) // how long until one attempt is earned back
	wait := res.DelayFrom(now)
	res.CancelAt(now)
	return true, wait
}

// failed counts a failed authentication of r's address.
func (g *guard) failed(r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ip, now := remoteIP(r), g.now()
	lim := g.failures[ip]
	if lim == nil {
		if len(g.failures) >= authFailureAddrs {
			g.evict(now)
		}
		lim = rate.NewLimiter(rate.Every(AuthFailureEvery), AuthFailureBurst)
		g.failures[ip] = lim
	}
	lim.AllowN(now, 1)
}

// evict makes room in the failure map: addresses that have earned back their whole burst
// go first; if none has, an arbitrary one does. Called with mu held.
func (g *guard) evict(now time.Time) {
	for ip, lim := range g.failures {
		if lim.TokensAt(now) >= AuthFailureBurst {
			delete(g.failures, ip)
		}
	}
	for ip := range g.failures {
		if len(g.failures) < authFailureAddrs {
			return
		}
		delete(g.failures, ip)
	}
}

// refuse answers an admin request with a refusal, counts it and logs it (rate-limited;
// the remote address, method, route and reason, never a header's value).
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, status int, reason string, e apiError) {
	if g.refused != nil {
		g.refused.WithLabelValues(reason).Inc()
	}
	g.mu.Lock()
	write := g.logLim.AllowN(g.now(), 1)
	suppressed := g.suppressed
	if write {
		g.suppressed = 0
	} else {
		g.suppressed++
	}
	g.mu.Unlock()
	if write {
		g.log.Warn("admin request refused", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", status), zap.String("reason", reason), zap.String("remote", r.RemoteAddr),
			zap.Int("suppressed_since_last", suppressed))
	}
	writeError(w, status, e)
}

// foreignHost reports why a token-less admin request must be refused as a possible DNS
// rebinding: its Host is not a loopback address or "localhost" (with or without a port),
// or its Origin, when present, is not that same loopback origin. Empty when it passes.
func foreignHost(r *http.Request) string {
	host, port := splitHost(r.Host)
	if !loopbackName(host) {
		return refusedForeignHost
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || (u.Path != "" && u.Path != "/") {
		return refusedForeignOrigin
	}
	oh, op := splitHost(u.Host)
	if op == "" {
		op = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port == "" {
		port = "80"
	}
	if !strings.EqualFold(oh, host) || op != port {
		return refusedForeignOrigin
	}
	return ""
}

// splitHost splits a Host header value or URL host into a host name (brackets of an IPv6
// literal removed) and a port ("" if none).
func splitHost(hp string) (host, port string) {
	if h, p, err := net.SplitHostPort(hp); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), ""
}

// loopbackName reports whether host is "localhost" or a loopback IP address literal.
func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// retryAfter is a Retry-After value in whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}
