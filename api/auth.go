package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"strings"

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

// fromLoopback reports whether the request arrived on a loopback listener (or a Unix
// socket) from a loopback peer. Without a local address in the context it answers false.
func fromLoopback(r *http.Request) bool {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	switch a := la.(type) {
	case nil:
		return false
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		if !a.IP.IsLoopback() {
			return false
		}
	default:
		if !isLoopbackHostPort(la.String()) {
			return false
		}
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
