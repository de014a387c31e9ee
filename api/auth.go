package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
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
// one audit line per admin request, at Info, with its outcome.
func (s *server) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cop.Check(r); err != nil {
			writeError(w, http.StatusForbidden, apiError{Code: "cross_origin",
				Message: "cross-origin browser requests to admin routes are refused"})
			return
		}
		if s.opts.AdminToken == "" {
			if !fromLoopback(r) {
				writeError(w, http.StatusForbidden, apiError{Code: "admin_disabled",
					Message: "admin routes are disabled: no admin token is configured and the request did not arrive on a loopback listener"})
				return
			}
		} else if ok, reason := s.checkToken(r); !ok {
			challenge := `Bearer realm="cycled admin"`
			if reason == "invalid_token" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			msg := "admin routes require Authorization: Bearer <admin token>"
			if reason == "invalid_token" {
				msg = "the admin token is wrong"
			}
			writeError(w, http.StatusUnauthorized, apiError{Code: "unauthorized", Message: msg})
			return
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		s.log.Info("admin request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", ww.Status()), zap.String("remote", r.RemoteAddr))
		if s.opts.Audit != nil {
			s.opts.Audit(s.adminAction(r, ww.Status()))
		}
	})
}

// checkToken compares the bearer token with the configured one in constant time (of the
// token's SHA-256, so that its length does not leak either). reason is "missing" or
// "invalid_token" on failure.
func (s *server) checkToken(r *http.Request) (ok bool, reason string) {
	h := r.Header.Get("Authorization")
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return false, "missing"
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	want := sha256.Sum256([]byte(s.opts.AdminToken))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return false, "invalid_token"
	}
	return true, ""
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
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	// Remote is the client's address.
	Remote string `json:"remote"`
}

// adminAction describes an answered admin request.
func (s *server) adminAction(r *http.Request, status int) AdminAction {
	a := AdminAction{Route: r.Method + " " + r.URL.Path, Path: r.URL.Path, Status: status, Remote: r.RemoteAddr}
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		a.Route = r.Method + " " + rc.RoutePattern()
	}
	if s.opts.AdminToken != "" {
		a.Token = TokenFingerprint(s.opts.AdminToken)
	}
	return a
}

// TokenFingerprint identifies a token without revealing it: "sha256:" and the first 8
// bytes of its SHA-256, in hex.
func TokenFingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
