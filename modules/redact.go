package modules

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Redacted is what a secret is replaced with wherever it would be shown.
const Redacted = "***"

// MaxHeaderValue is the longest value of a header of HTTPSettings.Headers.
const MaxHeaderValue = 8 << 10

// RedactURL returns raw with what may be secret replaced by Redacted: the value of every
// query parameter (the names stay, so "?api_key=***&v=***" still says what is sent; a
// parameter without "=" is replaced whole), the user information, and a fragment. A URL that does not parse keeps only what comes
// before its query. Every URL of a remote module shown by the API, a log line or an error
// message goes through it.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			raw = raw[:i] + "?" + Redacted
		}
		return withoutUserinfo(raw)
	}
	hadUser := u.User != nil
	u.User = nil
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, kv := range parts {
			if name, _, ok := strings.Cut(kv, "="); ok {
				parts[i] = name + "=" + Redacted
			} else {
				parts[i] = Redacted // a bare word may be the secret itself
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = Redacted, ""
	}
	out := u.String()
	if hadUser { // url.User would escape the asterisks
		out = strings.Replace(out, "//", "//"+Redacted+"@", 1)
	}
	return out
}

// redactURLError replaces the URL of a *url.Error in err (net/http puts the request's URL,
// query included, in the message of every failed round trip) by its redacted form.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}

// reservedHeaders are the request headers HTTPSettings.Headers may not set: the protocol's
// own (see HTTP) and those that net/http manages.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Host",
	"Expect", "Upgrade", "Te", "Trailer", "Keep-Alive", HeaderIdempotencyKey}

// checkHeaders adds the problems of the request headers h, paths "headers.<name>".
func checkHeaders(h map[string]string, add func(path, format string, args ...any)) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		p, v := "headers."+name, h[name]
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			add(p, "invalid header name")
		case slices.Contains(reservedHeaders, canon) || strings.HasPrefix(canon, "X-Cycled-") || strings.HasPrefix(canon, "Proxy-"):
			add(p, "header %s is set by the daemon and cannot be configured", canon)
		case len(v) > MaxHeaderValue:
			add(p, "value longer than %d bytes", MaxHeaderValue)
		case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
			add(p, "value contains a control character")
		}
	}
}

// validHeaderName reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Equal reports whether s and o are the same settings (headers compared by value).
func (s HTTPSettings) Equal(o HTTPSettings) bool {
	return s.URL == o.URL && s.MaxBody == o.MaxBody && s.Timeout == o.Timeout && maps.Equal(s.Headers, o.Headers)
}

// Redact returns s with its URL redacted (RedactURL) and every header value replaced by
// Redacted, for showing.
func (s HTTPSettings) Redact() HTTPSettings {
	s.URL = RedactURL(s.URL)
	if s.Headers != nil {
		h := make(map[string]string, len(s.Headers))
		for k := range s.Headers {
			h[k] = Redacted
		}
		s.Headers = h
	}
	return s
}

// String describes s with its secrets redacted, so that a log line or an error message
// that prints settings never shows them.
func (s HTTPSettings) String() string {
	r := s.Redact()
	return fmt.Sprintf("{url: %s, max_body: %d, timeout: %s, headers: %v}", r.URL, r.MaxBody, r.Timeout, r.Headers)
}
