// Package api is the HTTP API of the cycled daemon, on chi: the read routes (tick
// summaries, the SSE stream, modules, breakers, blackboard, emergency state, config,
// health, metrics) and the admin routes behind a bearer token (step ticks, runtime module
// registration, breaker and emergency resets, config reload, fault injection).
//
// # Never blocking the tick
//
// Handlers read the engine through its lock-free views (History().Latest(), snapshots)
// and build their answer before writing a byte; no engine lock is ever held while a client
// is written to. The encoding of the latest summary is cached, so many pollers cost one
// json.Marshal per tick. The SSE stream subscribes to Engine.Events() with a bounded buffer:
// a slow reader skips ahead (the hub drops its oldest events) and a reader that makes no
// progress for streamWriteTimeout is disconnected.
//
// # Errors
//
// Every error is JSON: {"error": {"code": "...", "message": "...", "field": "..."}}, with
// "problems" (every finding with its path) for a *tiers.ValidationError. Statuses: 400
// malformed input, 401 missing, wrong or unexpected credentials, 403 admin disabled,
// cross-origin browser request or foreign Host, 404, 405, 409 conflict with the engine's state, 413 body over
// Options.MaxBodyBytes, 415 a body that is not application/json, 422 invalid
// configuration or module, 429 a read request over Options.ReadLimiter's limit or an
// admin request after repeated authentication failures (with Retry-After), 500, 501 a route whose callback is not configured, 503 no tick yet /
// engine closed / watchdog. Callbacks may return an *HTTPError to choose the answer.
//
// # Pacing readers
//
// With Options.ReadLimiter set, the read routes are served at most at its rate across all
// clients: a request past the burst waits for its turn (so a client polling in a tight
// loop is slowed to its share, and cannot take the CPUs the tick needs), or is answered
// 429 if its turn is further away than the limit's MaxWait. Probes, /metrics, the SSE
// stream, admin routes, and long-polls answered with a tick newer than any their
// connection was given (with ConnContext as the server's ConnContext) are not paced. See
// ReadLimit.
//
// # Admin authentication
//
// With Options.AdminToken set, admin routes require "Authorization: Bearer <token>"
// (compared in constant time); a missing, malformed or wrong header is 401 with a
// WWW-Authenticate challenge, on every listener including loopback. With no token
// configured, admin routes are served only to connections that arrive on a loopback (or
// Unix socket) listener from a loopback peer, without authentication; on any other
// listener they answer 403 "admin_disabled". The listener is the one the server tells the
// request context with ListenerContext (set it in http.Server.BaseContext); a listener on
// a wildcard address (0.0.0.0, ::) is not loopback even for a connection to 127.0.0.1,
// and a request whose listener is unknown is refused. Note that a reverse proxy on the same host
// makes remote requests look local: configure a token in that case. Cross-origin browser
// requests to admin routes are refused with 403 (net/http.CrossOriginProtection). Without
// a token, a TCP admin request must also name a loopback address or "localhost" in its
// Host header and, when it has an Origin, come from that same origin (403 "foreign_host"
// or "cross_origin" otherwise), so that a web page on a name resolving to 127.0.0.1 (DNS
// rebinding) cannot drive a token-less loopback daemon; and one that presents an
// Authorization header is refused 401, there being no token to check it against.
//
// Refused admin requests are counted by reason (cycled_http_admin_refused_total on
// Options.Registry) and logged at Warn with the remote address and route, never a
// header's value, at most a burst of lines a second. An address that fails
// authentication more than AuthFailureBurst times in a row is answered 429 with
// Retry-After until it has earned attempts back, one per AuthFailureEvery.
//
// # Long requests and shutdown
//
// Long-polls (/ticks/latest?wait=) and streams (/ticks/stream) end when the request's
// context ends. Set http.Server.BaseContext to a context cancelled at shutdown so that
// they end promptly on Shutdown. The handlers extend the connection's write deadline for
// their own duration, so a server WriteTimeout does not cut them short.
package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/ui"
	"github.com/cycled/cycled/faultsummary"
)

// Defaults and caps of the API.
const (
	// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is zero.
	DefaultMaxBodyBytes = 1 << 20
	// MaxWait caps the wait of a long-poll on /ticks/latest.
	MaxWait = 30 * time.Second
	// DefaultListLimit is the number of summaries GET /ticks returns without a limit.
	DefaultListLimit = 50
	// PingInterval is the period of the ": ping" comment on the SSE stream.
	PingInterval = 2 * time.Second
	// StreamBuffer is the number of events buffered per SSE subscriber before it skips ahead.
	StreamBuffer = 64
	// MinWatchdog is the smallest default watchdog timeout: the default is
	// max(3 × period, MinWatchdog).
	MinWatchdog = time.Second

	streamWriteTimeout = 10 * time.Second       // a stream client that accepts nothing for this long is dropped
	streamEndGrace     = 100 * time.Millisecond // to write the end of a stream whose context ended
	maxReplay          = 256                    // ticks replayed to a stream client resuming with Last-Event-ID
)

// Options configures the API. Engine is required; every other field is optional.
type Options struct {
	// Engine is the engine served. Required.
	Engine *cycle.Engine
	// Registry is served on GET /metrics. Nil: /metrics answers 501.
	Registry *prometheus.Registry
	// AdminToken is the bearer token of the admin routes. Empty: admin routes are served
	// only on loopback listeners, as told by ListenerContext (see the package
	// documentation).
	AdminToken string
	// AdminTokens, if set, is the set of admin tokens in force and replaces AdminToken: the
	// daemon's named tokens (http.admin_tokens) and its unnamed one, which it replaces on
	// every reload. An empty set serves admin routes only on loopback listeners, as an
	// empty AdminToken does.
	AdminTokens *Tokens
	// Logger receives admin audit lines (Info), server errors and panics (Error). Nil
	// means zap.NewNop().
	Logger *zap.Logger
	// Reload reloads the configuration (POST /config/reload). A *tiers.ValidationError
	// answers 422 with every problem, an error wrapping config.ErrSyntax (not YAML) or
	// config.ErrRead (the file cannot be read) 422 "invalid"; the running configuration
	// must stay in force. Nil: the route answers 501.
	// allowSafetyRemoval is the request's allow_safety_removal=true: the reload may remove
	// safety modules (cycle.ErrSafetyRemoval, answered 409 "safety_removal" otherwise).
	Reload func(ctx context.Context, allowSafetyRemoval bool) error
	// ConfigView returns the configuration shown by GET /config, secrets redacted. Nil:
	// the route answers 501.
	ConfigView func() any
	// DecodeModule turns the body of POST /modules (valid JSON, at most MaxBodyBytes) into
	// a registration. Decoding errors answer 400 (use DecodeStrict to reject unknown
	// fields), a *tiers.ValidationError 422. Nil: the route answers 501.
	DecodeModule func(body []byte) (cycle.Registration, error)
	// Faults applies a fault-injection change to the named module (POST
	// /modules/{name}/faults); the body is passed as received (valid JSON or empty). Its
	// result is answered with 200 (nil: a short acknowledgement). An error wrapping
	// modules.ErrNotInjectable or errors.ErrUnsupported (a module that is not built in)
	// answers 409, a
	// *tiers.ValidationError 422, any other error 400. Nil: the route answers 501.
	Faults func(name string, body []byte) (any, error)
	// Registered, if set, is called after POST /modules registered a module, with the
	// registration and the request body, to persist runtime registrations. If it returns
	// an error, the module is deregistered again and the request answers 500
	// "not_persisted": a registration that a restart would lose is not accepted.
	Registered func(reg cycle.Registration, body []byte) error
	// Deregistered, if set, is called after DELETE /modules/{name} removed a module.
	Deregistered func(name string)
	// ForgetSaved, if set, is called by DELETE /modules/{name} for a name the engine does
	// not know, to remove a saved runtime registration of that name that was never
	// restored (a restart whose configuration no longer takes it): found reports whether
	// there was one (204), else the request answers 404. An error answers 500.
	ForgetSaved func(name string) (found bool, err error)
	// WatchdogTimeout is how long /healthz tolerates no completed tick on a periodic
	// scheduler. Zero means max(3 × period, MinWatchdog), computed at each request.
	WatchdogTimeout time.Duration
	// MaxBodyBytes limits request bodies. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Version is reported by /healthz.
	Version string
	// ReadLimiter paces the read routes (see ReadLimit). Nil: no limit.
	ReadLimiter *ReadLimiter
	// Recorder extends the history past the in-memory window (GET /ticks/{id}, GET
	// /ticks) and serves GET /events. With a recorder, tick ids never repeat, so a
	// long-poll with after= above the latest id waits for that tick. Nil: no recorder.
	Recorder Records
	// Cache keeps encoded summaries by tick id (see Cache). Nil: only the latest
	// summary's encoding is kept.
	Cache *Cache
	// AdminLimit, if set, returns the pacing of the admin routes per client address (see
	// AdminLimit); it is read at every admin request, so a reload changes it.
	AdminLimit func() AdminLimit
	// MaxRuntimeModules, if set, returns how many modules may be registered at runtime at
	// once: POST /modules beyond it answers 409 "module_limit". Read at every registration.
	MaxRuntimeModules func() int
	// TickIDs, if set, reports why ticks are stopped for want of tick ids that may be
	// published (the recorder's reservation cannot be written): /healthz answers 503
	// "ids_exhausted" with its message while it returns an error.
	TickIDs func() error
	// Audit, if set, receives every admin request once answered.
	Audit func(AdminAction)
	// HA is the daemon's part in an active/standby group (see HA). Nil: it runs alone.
	HA HA

	pingInterval time.Duration    // tests: overrides PingInterval
	now          func() time.Time // tests: the admin guard's clock (nil: time.Now)
}

// server holds the handlers' state.
type server struct {
	opts    Options
	e       *cycle.Engine
	log     *zap.Logger
	mux     *chi.Mux
	metrics http.Handler
	cop     *http.CrossOriginProtection
	guard   *guard        // admin refusals: log, metric, slow-down
	drains  chan struct{} // slots of the connections draining an oversized body

	boot     string    // distinguishes ETags and stream ids of this process from another's
	started  time.Time // engine clock at New: the watchdog's origin before the first tick
	adminLim adminLimiter
	ping     time.Duration
	maxBody  int64

	// regMu serialises runtime registrations and deregistrations with their Registered
	// and Deregistered callbacks, so that what the callbacks persist follows the engine's
	// order (a DELETE racing a POST of the same module cannot resurrect it on restart).
	regMu sync.Mutex

	encMu sync.Mutex               // serialises encoding on a cache miss
	enc   atomic.Pointer[encoding] // the latest summary's JSON
}

// encoding is a summary with its JSON.
type encoding struct {
	s      *faultsummary.Summary
	body   []byte
	wire   []byte // body and its newline
	event  []byte // the stream's tick event, whose data line is wire: body and wire are slices of it
	gzOnce sync.Once
	gz     []byte // the gzip of wire, made on first need
}

// New returns the API's handler. It panics if opts.Engine is nil.
func New(opts Options) http.Handler {
	s := newServer(opts)
	r := chi.NewRouter()
	s.mux = r
	r.Use(s.recoverer, s.limitBody, middleware.GetHead)
	r.NotFound(s.paced(http.HandlerFunc(s.notFound)).ServeHTTP)
	r.MethodNotAllowed(s.paced(http.HandlerFunc(s.methodNotAllowed)).ServeHTTP)

	// Not paced (see ReadLimit): probes, the stream, and /ticks/latest, which paces
	// itself unless it answers a long-poll with a tick new to its connection.
	r.Get("/ticks/latest", s.getLatest)
	r.Get("/ticks/stream", s.getStream)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/metrics", s.getMetrics)
	r.Group(func(r chi.Router) {
		r.Use(s.paced)
		r.Get("/ticks", s.listTicks)
		r.Get("/ticks/{id}", s.getTick)
		r.Get("/modules", s.listModules)
		r.Get("/modules/{name}", s.getModule)
		r.Get("/breakers", s.listBreakers)
		r.Get("/bulkheads", s.listBulkheads)
		r.Get("/blackboard", s.getBlackboard)
		r.Get("/blackboard/*", s.getBlackboardKey)
		r.Get("/emergency", s.getEmergency)
		r.Get("/config", s.getConfig)
		dashboard := ui.Handler() // the dashboard (package ui): its page and its assets
		r.Get("/", dashboard.ServeHTTP)
		r.Get("/ui/*", dashboard.ServeHTTP)
		r.Get("/openapi.json", s.getOpenAPI)
		r.Get("/events", s.listEvents)
		r.Get("/ha", s.getHA)
	})

	r.Group(func(r chi.Router) {
		r.Use(s.admin, s.requireJSON)
		r.Post("/ticks", s.postTick)
		r.Post("/modules", s.postModule)
		r.Delete("/modules/{name}", s.deleteModule)
		r.Post("/modules/{name}/faults", s.postFaults)
		r.Post("/breakers/{name}/reset", s.resetBreaker)
		r.Post("/emergency/reset", s.resetEmergency)
		r.Post("/config/reload", s.reload)
		r.Post("/ha/step-down", s.stepDown)
	})
	return r
}

// newServer returns the server of opts with its defaults applied. It panics if
// opts.Engine is nil.
func newServer(opts Options) *server {
	if opts.Engine == nil {
		panic("api: Options.Engine is nil")
	}
	s := &server{
		opts:    opts,
		e:       opts.Engine,
		log:     opts.Logger,
		boot:    strconv.FormatInt(time.Now().UnixNano(), 36),
		started: opts.Engine.Clock().Now(),
		ping:    opts.pingInterval,
		maxBody: opts.MaxBodyBytes,
		cop:     http.NewCrossOriginProtection(),
		drains:  make(chan struct{}, maxDrains),
	}
	if s.opts.AdminTokens == nil {
		s.opts.AdminTokens = NewTokens(AdminToken{Token: opts.AdminToken})
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.guard = newGuard(s.log, opts.Registry, opts.now)
	if s.ping <= 0 {
		s.ping = PingInterval
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if opts.Registry != nil {
		s.metrics = promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	}
	return s
}

// recoverer turns a panic in a handler into a logged JSON 500. http.ErrAbortHandler is
// re-panicked, as net/http expects.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in HTTP handler", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.Any("panic", p), zap.Stack("stack"))
			writeError(w, http.StatusInternalServerError, apiError{Code: "internal", Message: "internal server error"})
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody refuses a declared body over the limit at once (see tooLarge) and caps every
// body read.
func (s *server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.maxBody {
			s.tooLarge(w, r)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: "no route " + r.Method + " " + r.URL.Path})
}

// methodNotAllowed answers 405 with the Allow header (chi does not pass the allowed
// methods to a custom handler, so they are looked up again).
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if s.mux.Match(chi.NewRouteContext(), m, path) || (m == http.MethodHead && s.mux.Match(chi.NewRouteContext(), http.MethodGet, path)) {
			allowed = append(allowed, m)
		}
	}
	for _, m := range allowed {
		w.Header().Add("Allow", m)
	}
	writeError(w, http.StatusMethodNotAllowed, apiError{Code: "method_not_allowed",
		Message: "method " + r.Method + " not allowed on " + r.URL.Path})
}

// Records is what the API reads of the flight recorder: recorded summaries by id, a search
// of them, and the recorded events. The recorder's SQLite reader implements it.
type Records interface {
	// Tick returns the recorded JSON of tick id, or an error wrapping recorder.ErrNotFound.
	Tick(ctx context.Context, id uint64) ([]byte, error)
	// Ticks returns the recorded ticks q selects.
	Ticks(ctx context.Context, q recorder.Query) ([]recorder.Tick, error)
	// Events returns the recorded events q selects.
	Events(ctx context.Context, q recorder.EventQuery) ([]recorder.Event, error)
}
