package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.uber.org/zap"
)

// admin guards the admin routes (see the package documentation for the rules) and writes
// one audit line per admin request, at Info, with its outcome. Refusals are counted,
// logged (rate-limited) and, for failed authentications, slowed down per address.
func (s *server) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.authorize(w, r)
		if !ok {
			return
		}
		// POST /ticks is not paced: in step mode it is the tick itself, as often as the
		// caller's own period; the limit is for the changes that cost a rebuild.
		if s.opts.AdminLimit != nil && !(r.Method == http.MethodPost && r.URL.Path == "/ticks") {
			if ok, wait := s.adminLim.allow(r, s.opts.AdminLimit(), s.guard.now()); !ok {
				w.Header().Set("Retry-After", retryAfter(wait))
				s.guard.refuse(w, r, http.StatusTooManyRequests, refusedRateLimited, apiError{Code: "rate_limited",
					Message: "too many admin requests from this address (http.admin_limit); retry later"})
				return
			}
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		a := s.adminAction(r, ww.Status(), who)
		fields := []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", a.Status), zap.String("remote", a.Remote)}
		if a.Name != "" {
			fields = append(fields, zap.String("token_name", a.Name))
		}
		if a.Token != "" {
			fields = append(fields, zap.String("token", a.Token))
		}
		if a.AllowSafetyRemoval {
			fields = append(fields, zap.Bool("allow_safety_removal", true))
		}
		s.log.Info("admin request", fields...)
		if s.opts.Audit != nil {
			s.opts.Audit(a)
		}
	})
}

// authorize applies the admin rules to r and returns the token it presented (the zero
// entry without a token); when it refuses r, it has answered it.
func (s *server) authorize(w http.ResponseWriter, r *http.Request) (tokenEntry, bool) {
	if err := s.cop.Check(r); err != nil {
		s.guard.refuse(w, r, http.StatusForbidden, refusedCrossOrigin, apiError{Code: "cross_origin",
			Message: "cross-origin browser requests to admin routes are refused"})
		return tokenEntry{}, false
	}
	if s.opts.AdminTokens.Len() == 0 {
		return tokenEntry{}, s.authorizeLocal(w, r)
	}
	if limited, wait := s.guard.throttled(r); limited {
		w.Header().Set("Retry-After", retryAfter(wait))
		s.guard.refuse(w, r, http.StatusTooManyRequests, refusedThrottled, apiError{Code: "too_many_failures",
			Message: "too many failed admin authentications from this address; retry later"})
		return tokenEntry{}, false
	}
	who, ok, reason := s.checkToken(r)
	if ok {
		return who, true
	}
	s.guard.failed(r)
	msg, why := "admin routes require Authorization: Bearer <admin token>", refusedMissing
	if reason == "invalid_token" {
		msg, why = "the admin token is wrong", refusedInvalid
	}
	s.unauthorized(w, r, why, msg)
	return tokenEntry{}, false
}

// authorizeLocal applies the rules of a daemon with no admin token: a loopback listener
// and peer, a loopback Host and Origin (no DNS rebinding), and no credentials presented.
func (s *server) authorizeLocal(w http.ResponseWriter, r *http.Request) bool {
	if !fromLoopback(r) {
		s.guard.refuse(w, r, http.StatusForbidden, refusedDisabled, apiError{Code: "admin_disabled",
			Message: "admin routes are disabled: no admin token is configured and the request did not arrive on a loopback listener"})
		return false
	}
	if la, _ := r.Context().Value(listenerKey{}).(net.Addr); !isUnix(la) {
		switch foreignHost(r) {
		case refusedForeignHost:
			s.guard.refuse(w, r, http.StatusForbidden, refusedForeignHost, apiError{Code: "foreign_host",
				Message: "without an admin token, admin requests must name a loopback address or localhost in their Host header"})
			return false
		case refusedForeignOrigin:
			s.guard.refuse(w, r, http.StatusForbidden, refusedForeignOrigin, apiError{Code: "cross_origin",
				Message: "without an admin token, an admin request's Origin must be the daemon's own loopback origin"})
			return false
		}
	}
	if r.Header.Get("Authorization") != "" {
		// A credential the daemon cannot check is refused rather than ignored, so that a
		// client with a wrong idea of the configuration learns it at once.
		s.unauthorized(w, r, refusedUnexpected, "no admin token is configured: send admin requests without an Authorization header")
		return false
	}
	return true
}

// unauthorized answers 401 with the Bearer challenge.
func (s *server) unauthorized(w http.ResponseWriter, r *http.Request, reason, msg string) {
	challenge := `Bearer realm="cycled admin"`
	if reason != refusedMissing {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	s.guard.refuse(w, r, http.StatusUnauthorized, reason, apiError{Code: "unauthorized", Message: msg})
}

func isUnix(a net.Addr) bool {
	_, ok := a.(*net.UnixAddr)
	return ok
}

// checkToken compares the bearer token with every token in force in constant time (of
// the token's SHA-256, so that its length does not leak either) and returns the one it
// matched. reason is "missing" or "invalid_token" on failure; neither says which tokens
// or names exist.
func (s *server) checkToken(r *http.Request) (who tokenEntry, ok bool, reason string) {
	h := r.Header.Get("Authorization")
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return tokenEntry{}, false, "missing"
	}
	who, ok = s.opts.AdminTokens.match(strings.TrimSpace(tok))
	if !ok {
		return tokenEntry{}, false, "invalid_token"
	}
	return who, true, ""
}

type listenerKey struct{}

// ListenerContext returns ctx carrying the address ln listens on. Use it in the server's
// BaseContext (http.Server.BaseContext receives the listener): with no admin token
// configured, admin routes are served only on a listener whose address is loopback (see
// LoopbackAddr), and a request whose context does not say which listener it arrived on is
// refused with 403, because the connection's own local address cannot tell a loopback
// listener from a wildcard one (0.0.0.0 accepts connections to 127.0.0.1 too).
func ListenerContext(ctx context.Context, ln net.Listener) context.Context {
	return context.WithValue(ctx, listenerKey{}, ln.Addr())
}

// LoopbackAddr reports whether a listener bound to a is reachable only from this host: a
// Unix socket, an IP address in 127.0.0.0/8 or ::1, or the host name "localhost". An
// unspecified address (0.0.0.0, ::) listens on every interface and is not loopback.
func LoopbackAddr(a net.Addr) bool {
	switch a := a.(type) {
	case nil:
		return false
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	default:
		return isLoopbackHostPort(a.String())
	}
}

// fromLoopback reports whether the request arrived on a loopback listener (or a Unix
// socket; see ListenerContext) from a loopback peer. Without the listener's address in
// the context it answers false.
func fromLoopback(r *http.Request) bool {
	la, _ := r.Context().Value(listenerKey{}).(net.Addr)
	if !LoopbackAddr(la) {
		return false
	}
	if _, unix := la.(*net.UnixAddr); unix {
		return true
	}
	// The peer, when it has an IP address, must be local too.
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() {
			return false
		}
	}
	return true
}

func isLoopbackHostPort(hp string) bool {
	host, _, err := net.SplitHostPort(hp)
	if err != nil {
		host = hp
	}
	return loopbackName(host)
}

// requireJSON answers 415 to an admin request whose body is not declared as JSON. A body
// without a Content-Type is accepted (as JSON); requests without a body are not checked.
func (s *server) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			if ct := r.Header.Get("Content-Type"); ct != "" {
				mt, _, err := mime.ParseMediaType(ct)
				if err != nil || !(mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
					writeError(w, http.StatusUnsupportedMediaType, apiError{Code: "unsupported_media_type",
						Message: "request body must be application/json, got " + ct})
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// AdminAction is one answered admin request, as Options.Audit receives it.
type AdminAction struct {
	// Route is the method and route pattern ("POST /breakers/{name}/reset").
	Route string `json:"route"`
	// Path is the request's path.
	Path string `json:"path"`
	// Status is the answer's status.
	Status int `json:"status"`
	// Token is the fingerprint of the admin token used ("sha256:" and the first 8 bytes
	// of its SHA-256 in hex), never the token; empty without a token (loopback).
	Token string `json:"token,omitempty"`
	// Name is the name of the admin token used (http.admin_tokens); empty for the unnamed
	// admin_token and without a token.
	Name string `json:"name,omitempty"`
	// Remote is the client's address.
	Remote string `json:"remote"`
	// AllowSafetyRemoval is set when the request allowed the removal of safety modules
	// (allow_safety_removal=true).
	AllowSafetyRemoval bool `json:"allow_safety_removal,omitempty"`
}

// adminAction describes an answered admin request.
func (s *server) adminAction(r *http.Request, status int, who tokenEntry) AdminAction {
	a := AdminAction{Route: r.Method + " " + r.URL.Path, Path: r.URL.Path, Status: status, Remote: r.RemoteAddr,
		Token: who.fp, Name: who.name, AllowSafetyRemoval: r.URL.Query().Get("allow_safety_removal") == "true"}
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		a.Route = r.Method + " " + rc.RoutePattern()
	}
	return a
}

// TokenFingerprint identifies a token without revealing it: "sha256:" and the first 8
// bytes of its SHA-256, in hex.
func TokenFingerprint(token string) string { return fingerprint(sha256.Sum256([]byte(token))) }

// fingerprint is TokenFingerprint of the token whose SHA-256 is sum.
func fingerprint(sum [sha256.Size]byte) string { return "sha256:" + hex.EncodeToString(sum[:8]) }
