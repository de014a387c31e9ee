package modules

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// Limits of the http kind.
const (
	// DefaultMaxBody is the largest answer read from a remote module when HTTPSettings.MaxBody
	// is zero (1 MiB).
	DefaultMaxBody = 1 << 20
	// MaxMaxBody is the largest max_body accepted (64 MiB): an answer is held in memory.
	MaxMaxBody = 64 << 20
	// maxErrorMessage caps the remote text (error message, body excerpt) kept in an error.
	maxErrorMessage = 256
	// maxDrain caps the bytes of an unused answer read to keep its connection alive.
	maxDrain = 64 << 10
	// errorBodyWait bounds the reading of a non-2xx answer's body, which serves only the
	// message (the status decides the outcome): a remote that sends it slowly, or never
	// ends it, must not hold an attempt that may still be retried.
	errorBodyWait = 50 * time.Millisecond
)

// The request headers of the http kind.
const (
	// HeaderDeadline carries the attempt's deadline (RFC 3339 with nanoseconds, UTC).
	HeaderDeadline = "X-Cycled-Deadline"
	// HeaderBudget carries the time left until the deadline when the request is sent, in
	// milliseconds (a decimal number with up to three fractional digits).
	HeaderBudget = "X-Cycled-Budget-Ms"
	// HeaderIdempotencyKey is "<tick>-<module>", the same on every attempt of a tick.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderRun identifies the process (RunID): tick ids restart at 1 when the daemon
	// restarts, so a remote that deduplicates attempts keys on this and the idempotency key.
	HeaderRun = "X-Cycled-Run"
)

// RunID is a random identifier of this process, sent in HeaderRun.
var RunID = sync.OnceValue(func() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
})

// ErrRedirectRefused is wrapped by the error of a request whose redirect the client
// refused: to another scheme or host, one that would turn the POST into a GET (301, 302,
// 303), or more than three in a row. It classifies as downstream.
var ErrRedirectRefused = errors.New("redirect refused")

// HTTPSettings configures a remote module (kind http).
type HTTPSettings struct {
	// URL receives one POST per attempt: an absolute http:// or https:// URL without
	// credentials.
	URL string
	// MaxBody caps the answer read, in bytes; a longer answer is a downstream fault. Zero
	// means DefaultMaxBody.
	MaxBody int64
	// Timeout caps each attempt, so that a slow answer leaves time for a retry in the tier
	// budget. Zero: an attempt may take the time left in the tier budget.
	Timeout time.Duration
	// Headers are sent with every request, e.g. {"Authorization": "Bearer …"} to
	// authenticate to the remote. Their values are secrets: Redact and String hide them,
	// and the API never shows them. The protocol's own headers and those net/http manages
	// cannot be set.
	Headers map[string]string
}

// withDefaults returns s with MaxBody set.
func (s HTTPSettings) withDefaults() HTTPSettings {
	if s.MaxBody == 0 {
		s.MaxBody = DefaultMaxBody
	}
	s.Headers = maps.Clone(s.Headers) // the module's own: a caller's later change is not seen
	return s
}

// Validate returns the problems of s, with paths relative to the settings ("url").
func (s HTTPSettings) Validate() tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if _, err := parseModuleURL(s.URL); err != nil {
		add("url", "%s", err.Error())
	}
	switch {
	case s.MaxBody < 0:
		add("max_body", "must be >= 0 (0 means %s)", "1MiB")
	case s.MaxBody > MaxMaxBody:
		add("max_body", "must be at most 64MiB (an answer is held in memory)")
	}
	if s.Timeout < 0 {
		add("timeout", "must be >= 0")
	}
	checkHeaders(s.Headers, add)
	return ps
}

// withoutUserinfo returns raw, a URL that may not parse, with what could be credentials
// (between "//" and the first "@" before the path) replaced by "***", for messages that
// GET /config and the log show.
func withoutUserinfo(raw string) string {
	i := strings.Index(raw, "//")
	if i < 0 {
		return raw
	}
	auth := raw[i+2:]
	if j := strings.IndexAny(auth, "/?#"); j >= 0 {
		auth = auth[:j]
	}
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return raw
	}
	return raw[:i+2] + "***" + raw[i+2+at:]
}

// parseModuleURL checks that raw is an absolute http or https URL with a host and without
// credentials (which GET /config would show).
func parseModuleURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("required: the module's endpoint, e.g. http://127.0.0.1:9000/tick")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("invalid URL %q: %v", RedactURL(raw), err)
	}
	switch {
	case u.Scheme == "":
		return nil, fmt.Errorf("%q is not an absolute URL: want http://host[:port]/path or https://…", RedactURL(raw))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q is not supported: want http or https", u.Scheme)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%q has no host: want %s://host[:port]/path", RedactURL(raw), u.Scheme)
	case u.User != nil:
		return nil, errors.New("credentials in the URL are not supported (GET /config would show them)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("invalid port %q", p)
		}
	}
	return u, nil
}

// WithClient sets the HTTP client of an HTTP module. Default: one client shared by every
// HTTP module of the process (SharedClient). A client given here keeps its own
// CheckRedirect and proxy settings.
func WithClient(c *http.Client) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.client = c
		}
	})
}

// SharedClient returns the client that HTTP modules use by default, made once by NewClient:
// sharing it shares one pool of keep-alive connections.
var SharedClient = sync.OnceValue(NewClient)

// NewClient returns an HTTP client tuned for remote modules: keep-alive connections (up to
// 64 idle per host, closed after 90 s idle), bounded dial and TLS handshake times, no
// client-wide timeout (each request carries its attempt's deadline), no proxy (the daemon
// makes no outbound call except to the configured URLs, whatever HTTP_PROXY says), and
// redirects followed only to the same scheme and host, as a POST (307, 308), at most three
// (others fail with ErrRedirectRefused).
func NewClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  0,
		MaxResponseHeaderBytes: 64 << 10,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &http.Client{Transport: t, CheckRedirect: checkRedirect}
}

// checkRedirect refuses a redirect to another scheme or host, one that turned the POST
// into a GET, and a fourth redirect.
func checkRedirect(req *http.Request, via []*http.Request) error {
	orig := via[0].URL
	switch {
	case len(via) > 3:
		return fmt.Errorf("%w: more than 3 redirects", ErrRedirectRefused)
	case req.URL.Scheme != orig.Scheme || !strings.EqualFold(req.URL.Host, orig.Host):
		return fmt.Errorf("%w: to another host (%s://%s)", ErrRedirectRefused, req.URL.Scheme, req.URL.Host)
	case req.Method != http.MethodPost:
		return fmt.Errorf("%w: it would turn the POST into a %s (use 307 or 308)", ErrRedirectRefused, req.Method)
	}
	return nil
}

// HTTP is the remote module kind: every attempt POSTs the tick's inputs to a URL and
// classifies the answer. It is safe for concurrent use and holds no per-tick state.
//
// # Request
//
// POST <url> with Content-Type: application/json and the body
//
//	{"tick_id": 42, "module": "planner", "tier": 1, "attempt": 1,
//	 "deadline": "2025-01-02T15:04:05.123456789Z",
//	 "inputs": {"lidar.result": {"key": "lidar.result", "value": …, "module": "lidar",
//	            "tick_id": 42, "source": "live", "stale": false, "expired": false,
//	            "age_ms": 0, "derived_from_stale": false, …}}}
//
// tier is the tier's index (0 is safety). inputs holds exactly the keys the module reads,
// each as the blackboard serves it to the module (provenance and quality flags); a key
// with nothing to serve has "value": null and "source": "none". Headers:
// X-Cycled-Deadline (the deadline of the body), X-Cycled-Budget-Ms (the time left when
// the request was sent), Idempotency-Key: "<tick>-<module>", identical on every attempt
// of a tick, and X-Cycled-Run (RunID: tick ids restart at 1 when the daemon restarts, so
// the pair is what identifies a tick across restarts). The request carries the attempt's
// context: the tier deadline (or Timeout, if sooner) cancels it.
//
// # Answer
//
//   - 2xx with a JSON object holding "value": success; the value is decoded with
//     json.Decoder.UseNumber, so numbers are json.Number and survive the round trip
//     exactly (an id above 2^53 stays exact). "value": null is a successful null.
//   - 2xx with {"error": {"kind": "transient", "message": "…"}}: a failure of that kind
//     (fault.ParseKind; "permanent" is contract). An unknown or missing kind, and the kinds
//     a remote cannot report ("none", "canceled"), are downstream.
//   - 408, 429 and 5xx: transient. Any other status (4xx, 3xx that was not followed, …):
//     downstream.
//   - A 2xx body that is not one JSON object, holds both or neither of "value" and
//     "error", or is longer than MaxBody: downstream. At most MaxBody+1 bytes are read.
//   - Connection refused or reset, a dropped connection, a DNS failure, a timeout:
//     transient; the tier deadline is transient and a cancelled tick is canceled
//     (fault.ClassifyIn). A refused redirect and a TLS certificate that does not verify
//     are downstream. Inputs that cannot be encoded as JSON are a validation fault.
//
// Unknown fields of the answer are ignored.
type HTTP struct {
	settings HTTPSettings
	endpoint string
	client   *http.Client
	clock    clock.Clock
	replay   bool // see WithReplay
}

// WithReplay lets the transport send an HTTP module's request again when a reused
// keep-alive connection broke after the request was written but before an answer came
// (net/http replays a request that carries an Idempotency-Key header): only for a module
// that is idempotent, since the remote may have acted on the first copy. Without it (the
// default) each attempt is at most one request the remote may have seen, and a connection
// that breaks so fails the attempt as transient, for the engine's retry budget to decide.
// A request never written is sent again either way.
func WithReplay(ok bool) Option { return optionFunc(func(o *options) { o.replay = ok }) }

// NewHTTP returns a remote module with settings s. Invalid settings are reported as a
// *tiers.ValidationError whose paths are relative to the settings ("url"). Options:
// WithClient, WithClock (the clock of the deadline and budget headers and of Timeout).
func NewHTTP(s HTTPSettings, opts ...Option) (*HTTP, error) {
	o := options{clock: clock.Real()}
	for _, op := range opts {
		op.apply(&o)
	}
	if err := s.Validate().Err(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	u, _ := parseModuleURL(s.URL)
	c := o.client
	if c == nil {
		c = SharedClient()
	}
	return &HTTP{settings: s, endpoint: u.String(), client: c, clock: o.clock, replay: o.replay}, nil
}

// Replays reports whether the transport may send a request again (WithReplay).
func (h *HTTP) Replays() bool { return h.replay }

// Settings returns the settings, with defaults applied.
func (h *HTTP) Settings() HTTPSettings {
	s := h.settings
	s.Headers = maps.Clone(s.Headers)
	return s
}

// URL returns the endpoint, as configured (it may hold secrets in its query: show
// RedactURL of it).
func (h *HTTP) URL() string { return h.endpoint }

// tickRequest is the body of a POST.
type tickRequest struct {
	TickID   uint64                      `json:"tick_id"`
	Module   string                      `json:"module"`
	Tier     int                         `json:"tier"`
	Attempt  int                         `json:"attempt"`
	Deadline string                      `json:"deadline,omitempty"`
	Inputs   map[string]blackboard.Entry `json:"inputs"`
}

// Run performs one attempt: it POSTs the inputs and classifies the answer (see HTTP).
// in may be nil (tick 0, attempt 1, no inputs).
func (h *HTTP) Run(ctx context.Context, in *tiers.Input) (any, error) {
	req, tierDeadline := newTickRequest(in)
	now := h.clock.Now()
	if h.settings.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = h.clock.WithDeadline(ctx, now.Add(h.settings.Timeout))
		defer cancel()
	}
	deadline, ok := ctx.Deadline()
	if !ok || (!tierDeadline.IsZero() && tierDeadline.Before(deadline)) {
		deadline = tierDeadline
	}
	if !deadline.IsZero() {
		req.Deadline = deadline.UTC().Format(time.RFC3339Nano)
	}
	hr, err := h.newRequest(ctx, req, max(deadline.Sub(now), 0))
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(hr)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return h.readAnswer(ctx, resp)
}

// newTickRequest returns the body of the POST for in (nil: tick 0, attempt 1, no inputs),
// without its deadline, and the tier's deadline.
func newTickRequest(in *tiers.Input) (tickRequest, time.Time) {
	req := tickRequest{Attempt: 1, Inputs: map[string]blackboard.Entry{}}
	if in == nil {
		return req, time.Time{}
	}
	req.TickID, req.Module, req.Tier = in.TickID(), in.Module(), in.Tier()
	if a := in.Attempt(); a > 0 {
		req.Attempt = a
	}
	for _, k := range in.Reads() {
		e, ok := in.Get(k)
		if !ok {
			e = blackboard.Entry{Key: k}
		}
		req.Inputs[k] = e
	}
	return req, in.Deadline()
}

// newRequest builds the POST of req with its headers; left is the time left before the
// deadline, sent when req has one.
func (h *HTTP) newRequest(ctx context.Context, req tickRequest, left time.Duration) (*http.Request, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fault.Validation(fmt.Errorf("encode the inputs: %w", err))
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fault.Permanent(fmt.Errorf("build the request: %w", err))
	}
	for k, v := range h.settings.Headers {
		hr.Header.Set(k, v) // first: the protocol's headers below are not configurable
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", "cycled")
	key := strconv.FormatUint(req.TickID, 10) + "-" + req.Module
	if h.replay {
		// The canonical key also makes the transport retry the POST on a keep-alive
		// connection that broke before the answer (net/http treats it as replayable).
		hr.Header.Set(HeaderIdempotencyKey, key)
	} else {
		// The same header on the wire (names are case-insensitive), under a key net/http
		// does not take for an idempotency key: no replay of a request the remote may
		// have acted on (see WithReplay).
		hr.Header[strings.ToLower(HeaderIdempotencyKey)] = []string{key}
	}
	hr.Header.Set(HeaderRun, RunID())
	if e := epochHeader(ctx); e != "" {
		hr.Header.Set(HeaderEpoch, e)
	}
	if tp, ts := traceHeaders(ctx, req.TickID, req.Module); tp != "" {
		hr.Header.Set(HeaderTraceparent, tp)
		if ts != "" {
			hr.Header.Set(HeaderTracestate, ts)
		}
	}
	if req.Deadline != "" {
		hr.Header.Set(HeaderDeadline, req.Deadline)
		hr.Header.Set(HeaderBudget, strconv.FormatFloat(float64(left.Microseconds())/1000, 'f', -1, 64))
	}
	return hr, nil
}

// readAnswer reads and classifies the answer resp, never more than MaxBody+1 bytes, and
// closes its body.
func (h *HTTP) readAnswer(ctx context.Context, resp *http.Response) (any, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Armed until the drain below is done: closing the body ends a read that waits.
		t := h.clock.AfterFunc(errorBodyWait, func() { resp.Body.Close() })
		defer t.Stop()
	}
	lr := &io.LimitedReader{R: resp.Body, N: h.settings.MaxBody + 1}
	defer func() {
		// Keep the connection alive when the rest of the answer is short; never read past
		// MaxBody+1 bytes in all.
		if lr.N > 0 {
			io.Copy(io.Discard, io.LimitReader(lr, maxDrain)) //nolint:errcheck // best effort
		}
		resp.Body.Close()
	}()
	if resp.ContentLength > h.settings.MaxBody && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		lr.N = 0 // do not read it: the connection is closed instead
		return nil, fault.Downstream(fmt.Errorf("answer of %d bytes is larger than max_body (%d bytes)", resp.ContentLength, h.settings.MaxBody))
	}
	v, err := decodeResponse(resp.StatusCode, lr, h.settings.MaxBody)
	if be := (*errBodyRead)(nil); errors.As(err, &be) {
		// Reading the body failed: the deadline, a cancellation or a dropped connection.
		return nil, transportError(ctx, err)
	}
	return v, err
}

// transportError classifies an error of the round trip (or of reading the answer), its
// URL redacted: the message reaches summaries, the API and the log.
func transportError(ctx context.Context, err error) error {
	err = redactURLError(err)
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	switch {
	case ctx.Err() != nil:
		// The tier deadline or Timeout (transient), or a cancelled tick (canceled): left
		// to fault.ClassifyIn, through the context's error.
		if !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return err
	case errors.Is(err, ErrRedirectRefused):
		return fault.Downstream(err)
	case errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie):
		return fault.Downstream(err)
	}
	return fault.Transient(err)
}

// errBodyRead marks an error reading the answer (not a classification of its content).
type errBodyRead struct{ err error }

func (e *errBodyRead) Error() string { return "read the answer: " + e.err.Error() }
func (e *errBodyRead) Unwrap() error { return e.err }

// decodeResponse classifies an answer of status status whose body is r. It reads at most
// maxBody+1 bytes of r. An error reading r is returned unmarked (KindInternal for
// fault.Classify, unless it wraps a deadline) for the caller to classify; every other
// outcome is a value or an error marked with its kind.
func decodeResponse(status int, r io.Reader, maxBody int64) (any, error) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	r = io.LimitReader(r, maxBody+1)
	if status < 200 || status > 299 {
		excerpt, err := io.ReadAll(io.LimitReader(r, min(maxBody, maxErrorMessage)))
		if err != nil {
			excerpt = nil // the status decides; the excerpt is only for the message
		}
		msg := fmt.Sprintf("remote answered %d %s", status, http.StatusText(status))
		if s := sanitize(excerpt); s != "" {
			msg += ": " + s
		}
		if status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || (status >= 500 && status <= 599) {
			return nil, fault.Transient(errors.New(msg))
		}
		return nil, fault.Downstream(errors.New(msg))
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, &errBodyRead{err}
	}
	if int64(len(b)) > maxBody {
		return nil, fault.Downstream(fmt.Errorf("answer larger than max_body (%d bytes)", maxBody))
	}
	return parseAnswer(b)
}

// parseAnswer decodes a 2xx body.
func parseAnswer(b []byte) (any, error) {
	malformed := func(format string, args ...any) error {
		return fault.Downstream(fmt.Errorf("malformed answer: "+format+` (want {"value": …} or {"error": {"kind": "…", "message": "…"}})`, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, malformed("empty body")
		}
		return nil, malformed("not a JSON object: %v", err)
	}
	if top == nil {
		return nil, malformed("not a JSON object: null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("data after the JSON object")
	}
	rawValue, hasValue := top["value"]
	rawError, hasError := top["error"]
	if hasError && bytes.Equal(bytes.TrimSpace(rawError), []byte("null")) {
		hasError = false // {"value": 1, "error": null} is a success
	}
	switch {
	case hasValue && hasError:
		return nil, malformed("both \"value\" and \"error\"")
	case hasError:
		return nil, remoteError(rawError)
	case !hasValue:
		return nil, malformed("neither \"value\" nor \"error\"")
	}
	vd := json.NewDecoder(bytes.NewReader(rawValue))
	vd.UseNumber()
	var v any
	if err := vd.Decode(&v); err != nil {
		return nil, malformed("value: %v", err)
	}
	return v, nil
}

// remoteError turns the "error" member of an answer into an error marked with its kind.
func remoteError(raw json.RawMessage) error {
	var e struct {
		Kind    any `json:"kind"`
		Message any `json:"message"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return fault.Downstream(fmt.Errorf("malformed answer: \"error\" must be an object {\"kind\": \"…\", \"message\": \"…\"}: %v", err))
	}
	msg, _ := e.Message.(string)
	msg = sanitize([]byte(msg))
	if msg == "" {
		msg = "(no message)"
	}
	ks, isString := e.Kind.(string)
	k, err := fault.ParseKind(ks)
	switch {
	case !isString:
		return fault.Downstream(fmt.Errorf("remote error without a kind (taken as downstream): %s", msg))
	case err != nil:
		return fault.Downstream(fmt.Errorf("remote error of unknown kind %q (taken as downstream): %s", sanitize([]byte(ks)), msg))
	case k == fault.KindNone || k == fault.KindCanceled:
		return fault.Downstream(fmt.Errorf("remote error of kind %q, which a remote module cannot report (taken as downstream): %s", k, msg))
	}
	return fault.Wrap(k, fmt.Errorf("remote %s error: %s", k, msg))
}

// sanitize makes remote text fit for an error message: valid UTF-8, one line, no control
// characters, at most maxErrorMessage bytes.
func sanitize(b []byte) string {
	s := strings.ToValidUTF8(string(b), "�")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
