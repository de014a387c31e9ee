package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/metrics"
	"github.com/cycled/cycled/internal/rtsched"
	"github.com/cycled/cycled/tiers"
)

// Timeouts of the HTTP server. There is no server-wide WriteTimeout cutting long requests:
// long-polls (/ticks/latest?wait=, up to api.MaxWait) and the SSE stream extend their own
// write deadlines through http.ResponseController, so WriteTimeout only bounds ordinary
// answers.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second // whole request, body included (bodies are ≤ 1 MiB)
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// drainTimeout bounds the graceful HTTP shutdown. Long requests end at once (their
	// base context is cancelled), so this only waits for ordinary requests in flight, such
	// as a step-mode POST /ticks.
	drainTimeout = 900 * time.Millisecond
	// readingGrace is how long a shutdown waits for connections that serve no request
	// (a client still sending one) before closing them; long enough for a response whose
	// handler has just returned to be flushed.
	readingGrace = 50 * time.Millisecond
)

// serve is "cycled run". ctx ends on SIGINT or SIGTERM; stop restores the default signal
// behaviour (a second Ctrl-C kills at once); hup delivers SIGHUP (reload).
func serve(ctx context.Context, stop func(), hup <-chan os.Signal, fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) int {
	cfg, loadOpts, code, ok := loadRunConfig(fs, args, stderr)
	if !ok {
		return code
	}
	log, level := newLogger(cfg.Log, stderr)
	defer log.Sync() //nolint:errcheck // stderr cannot be synced on every platform
	logStart(log, cfg)
	if !applyRealtime(cfg, log) {
		return exitError
	}
	reg := prometheus.NewRegistry()
	events := newEventLog(log)
	defer events.Close()
	fl, err := openFlight(ctx, cfg, reg, log)
	if err != nil {
		log.Error("cannot start the flight recorder", zap.Error(err))
		return exitError
	}
	defer fl.close(log) // after the engine's Close below: its last summaries are recorded
	exp, grp, ok := openGroupAndExport(cfg, reg, log)
	if !ok {
		return exitError
	}
	defer exp.close(log) // after the engine's Close below: its last summaries are exported
	tr, ok := openTracing(ctx, cfg, reg, log)
	if !ok {
		return exitError
	}
	defer tr.close(log) // after the engine's Close below: its last ticks are traced
	engine, regs, ok := newEngine(cfg, log, reg, fl, events.Hooks(), grp.engineOptions(), exp.hooks(), tr.engineOptions())
	if !ok {
		return exitError
	}
	defer engine.Close()
	readLimiter := api.NewReadLimiter(readLimit(cfg.HTTP.ReadLimit))
	registerServeMetrics(reg, engine, readLimiter)
	tokens := api.NewTokens(adminTokens(cfg)...)
	reloader := newReloader(cfg, regs, engine, loadOpts, log, level, fl, readLimiter, tokens)
	store := restoreRuntime(cfg, engine, reloader, log)
	apiOpts := apiOptions(cfg, engine, reg, reloader, store, log, readLimiter)
	apiOpts.AdminTokens = tokens
	fl.wire(&apiOpts)
	grp.wire(&apiOpts)
	baseCtx, cancelBase := context.WithCancel(tr.context(context.Background())) // step mode's ticks run under it
	defer cancelBase()
	var active inflight
	srv, serveErr, ok := startHTTP(baseCtx, cancelBase, cfg, api.New(apiOpts), &active, log, stdout)
	if !ok {
		return exitError
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runDone, watchDone := runInBackground(grp.start(tr.context(runCtx), engine, advertiseURL(srv.Addr), reg), engine, reloader)

	code = waitForEnd(ctx, hup, reloader, log, serveErr, runDone, watchDone)
	stop() // a second SIGINT or SIGTERM now terminates at once

	// Stop ticking at a tick boundary: Run returns after the running tick.
	stopRun()
	<-runDone
	grp.stop() // resigned: a standby takes over
	drainHTTP(srv, &active, log)
	engine.Close()
	log.Info("stopped", zap.Int("exit_code", code))
	return code
}

// newEngine returns the engine of cfg with the metrics' hooks and the recorder's (its
// decision rules watched), the event log's, and those of the group and the export; ok is
// false (logged) when it cannot start.
func newEngine(cfg *config.Config, log *zap.Logger, reg *prometheus.Registry, fl *flight, events cycle.Hooks,
	more ...[]cycle.Option) (*cycle.Engine, []cycle.Registration, bool) {
	mc := metrics.New(reg)
	ecfg, regs, _ := cfg.Engine() // Load validated everything
	opts := append(fl.engineOptions(), cycle.WithHooks(mc.Hooks()), cycle.WithHooks(events))
	// The recorder's gate comes last: it must see the id that the group's gate gave.
	engine, err := cycle.New(ecfg, regs, slices.Concat(append(append([][]cycle.Option{opts}, more...), fl.gate())...)...)
	if err != nil {
		log.Error("cannot start the engine", zap.Error(err))
		return nil, nil, false
	}
	mc.Attach(engine)
	fl.watch(engine)
	return engine, regs, true
}

// loadRunConfig loads the configuration of "cycled run" from its parsed flags fs; when ok
// is false, the error is printed and code is the exit code.
func loadRunConfig(fs *pflag.FlagSet, args []string, stderr io.Writer) (cfg *config.Config, loadOpts []config.LoadOption, code int, ok bool) {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "cycled run: unexpected argument %q (use --config FILE)\n", args[0])
		return nil, nil, exitUsage, false
	}
	loadOpts = []config.LoadOption{config.WithFlags(fs)}
	cfg, err := config.Load(loadOpts...)
	if err != nil {
		var ve *tiers.ValidationError
		if errors.As(err, &ve) {
			fmt.Fprintln(stderr, "cycled: invalid configuration:")
			for _, p := range ve.Problems {
				fmt.Fprintln(stderr, "  "+p.String())
			}
		} else {
			fmt.Fprintln(stderr, "cycled:", err)
		}
		return nil, nil, exitError, false
	}
	return cfg, loadOpts, exitOK, true
}

// logStart logs the start and the configuration's warnings.
func logStart(log *zap.Logger, cfg *config.Config) {
	log.Info("starting", zap.String("version", versionString()), zap.String("config", cfg.Source()),
		zap.Duration("period", cfg.Cycle.Period), zap.Int("tiers", len(cfg.Tiers)), zap.Int("modules", len(cfg.Modules)))
	for _, w := range cfg.Validate().Warnings() {
		log.Warn("configuration warning", zap.String("field", w.Path), zap.String("message", w.Message))
	}
}

// applyRealtime moves the process to real-time scheduling when cycle.realtime_priority
// asks for it; false (logged) when that fails. It must run before the engine and the
// HTTP server start their goroutines: threads started later inherit the policy from the
// thread that starts them.
func applyRealtime(cfg *config.Config, log *zap.Logger) bool {
	p := cfg.Cycle.RealtimePriority
	if p <= 0 {
		return true
	}
	n, err := rtsched.Apply(p)
	if err != nil {
		log.Error("cannot run at real-time priority", zap.String("field", "cycle.realtime_priority"), zap.Error(err))
		return false
	}
	log.Info("real-time scheduling", zap.String("policy", "SCHED_FIFO"), zap.Int("priority", p), zap.Int("threads", n))
	return true
}

// registerServeMetrics registers the daemon's own metrics: build information, the
// period in force, and the read pacing's counters.
func registerServeMetrics(reg *prometheus.Registry, engine *cycle.Engine, readLimiter *api.ReadLimiter) {
	reg.MustRegister(buildInfoCollector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cycled_cycle_period_seconds",
			Help: "The tick period in force (cycle.period); 0 in step mode. Alert rules compare start lag and tick age with it."},
			func() float64 { return engine.Config().Period.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_http_reads_delayed_total",
			Help: "Read requests that waited for their turn under http.read_limit."},
			func() float64 { return float64(readLimiter.Stats().Delayed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_http_reads_refused_total",
			Help: "Read requests answered 429 under http.read_limit."},
			func() float64 { return float64(readLimiter.Stats().Refused) }))
}

// newReloader returns the configuration's reloader; a successful reload also sets the log
// level, the read pacing and the admin tokens (token files are read again at every load,
// so a rotated file takes effect), and every reload is logged and recorded.
func newReloader(cfg *config.Config, regs []cycle.Registration, engine *cycle.Engine, loadOpts []config.LoadOption,
	log *zap.Logger, level zap.AtomicLevel, fl *flight, readLimiter *api.ReadLimiter, tokens *api.Tokens) *config.Reloader {
	var reloader *config.Reloader
	reloader = config.NewReloader(cfg, regs, engine, config.WithLoadOptions(loadOpts...),
		config.OnReload(func(res config.ReloadResult) {
			logReload(log, res)
			fl.reloaded(res)
			if !res.OK {
				return
			}
			cur := reloader.Current()
			if l, err := zapcore.ParseLevel(cur.Log.Level); err == nil {
				level.SetLevel(l) // the level follows reloads; the format needs a restart
			}
			readLimiter.Set(readLimit(cur.HTTP.ReadLimit))
			tokens.Set(adminTokens(cur))
		}))
	return reloader
}

// adminTokens returns the admin tokens of cfg: the unnamed http.admin_token and the named
// http.admin_tokens.
func adminTokens(cfg *config.Config) []api.AdminToken {
	ts := []api.AdminToken{{Token: cfg.HTTP.AdminToken}}
	for _, t := range cfg.HTTP.AdminTokens {
		ts = append(ts, api.AdminToken{Name: t.Name, Token: t.Token})
	}
	return ts
}

// restoreRuntime opens the store of runtime registrations in state_dir and registers the
// saved modules again; an unreadable store is logged, and the daemon runs without them.
func restoreRuntime(cfg *config.Config, engine *cycle.Engine, reloader *config.Reloader, log *zap.Logger) *runtimeStore {
	store, err := openStore(cfg.StateDir)
	if err != nil {
		log.Error("runtime registrations not restored", zap.Error(err))
	}
	if len(store.removedTemps) > 0 {
		log.Info("removed temporary files of an interrupted save", zap.String("state_dir", cfg.StateDir), zap.Strings("files", store.removedTemps))
	}
	restore(engine, reloader, store, log)
	return store
}

// apiOptions wires the API to the engine, the reloader and the store of runtime
// registrations.
func apiOptions(cfg *config.Config, engine *cycle.Engine, reg *prometheus.Registry, reloader *config.Reloader,
	store *runtimeStore, log *zap.Logger, readLimiter *api.ReadLimiter) api.Options {
	return api.Options{
		Engine:     engine,
		Registry:   reg,
		AdminToken: cfg.HTTP.AdminToken,
		Logger:     log.Named("api"),
		Reload: func(ctx context.Context, allow bool) error {
			return reloader.ReloadAllowing(ctx, "api", allow)
		},
		ConfigView:   reloader.View,
		DecodeModule: func(body []byte) (cycle.Registration, error) { return decodeModule(reloader, body) },
		Faults:       func(name string, body []byte) (any, error) { return injectFaults(engine, name, body) },
		Registered: func(r cycle.Registration, body []byte) error {
			return store.Put(r.Spec.Name, body) // an error fails the request (logged by the API)
		},
		Deregistered: func(name string) {
			if err := store.Delete(name); err != nil {
				log.Error("runtime deregistration not persisted", zap.String("module", name), zap.Error(err))
			}
		},
		ForgetSaved: store.Forget, // a saved module that was not restored at startup
		AdminLimit: func() api.AdminLimit {
			l := reloader.Current().HTTP.AdminLimit
			return api.AdminLimit{Rate: l.Rate, Burst: l.Burst}
		},
		MaxRuntimeModules: func() int { return reloader.Current().HTTP.MaxRuntimeModules },
		Version:           versionString(),
		ReadLimiter:       readLimiter,
	}
}

// startHTTP listens on http.addr and serves handler there, its requests' base context
// baseCtx (cancelled at shutdown, which ends long-polls and streams at once); serveErr
// receives Serve's error. ok is false (logged) when the address cannot be listened on.
func startHTTP(baseCtx context.Context, cancelBase func(), cfg *config.Config, handler http.Handler, active *inflight,
	log *zap.Logger, stdout io.Writer) (srv *http.Server, serveErr chan error, ok bool) {
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		log.Error("cannot listen", zap.String("addr", cfg.HTTP.Addr), zap.Error(err))
		return nil, nil, false
	}
	if cfg.HTTP.AdminToken == "" && len(cfg.HTTP.AdminTokens) == 0 && !api.LoopbackAddr(ln.Addr()) {
		log.Warn("no admin token configured: admin routes answer 403 on this non-loopback listener; set http.admin_token (CYCLED_HTTP_ADMIN_TOKEN) or http.admin_tokens",
			zap.String("addr", ln.Addr().String()))
	}
	srv = &http.Server{
		Handler:           active.wrap(handler),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(l net.Listener) context.Context { return api.ListenerContext(baseCtx, l) },
		ConnContext:       active.connContext,
		ConnState:         active.connState,
	}
	if el, err := zap.NewStdLogAt(log.Named("http"), zap.WarnLevel); err == nil {
		srv.ErrorLog = el
	}
	srv.RegisterOnShutdown(cancelBase) // ends long-polls and streams at once
	serveErr = make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	srv.Addr = addr // as listened on (Serve uses ln); the group advertises it
	log.Info("listening", zap.String("addr", addr), zap.Bool("step_mode", cfg.Cycle.Period == 0))
	fmt.Fprintf(stdout, "listening on http://%s\n", addr)
	return srv, serveErr, true
}

// runInBackground runs the engine and the configuration's watch until ctx ends; each
// channel receives its function's result.
func runInBackground(ctx context.Context, engine *cycle.Engine, reloader *config.Reloader) (runDone, watchDone chan error) {
	runDone, watchDone = make(chan error, 1), make(chan error, 1)
	go func() { runDone <- engine.Run(ctx) }()
	go func() { watchDone <- reloader.Watch(ctx) }()
	return runDone, watchDone
}

// waitForEnd serves SIGHUP reloads until ctx ends or the HTTP server, the scheduler or
// the configuration's watch fails, and returns the exit code. A scheduler's error is put
// back on runDone for the shutdown to read.
func waitForEnd(ctx context.Context, hup <-chan os.Signal, reloader *config.Reloader, log *zap.Logger,
	serveErr <-chan error, runDone chan error, watchDone <-chan error) int {
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down: finishing the running tick")
			return exitOK
		case <-hup:
			_ = reloader.ReloadFrom(ctx, "signal") // logged by OnReload
		case err := <-serveErr:
			log.Error("HTTP server failed", zap.Error(err))
			return exitError
		case err := <-runDone:
			log.Error("scheduler stopped", zap.Error(err))
			runDone <- err // for the shutdown
			return exitError
		case err := <-watchDone:
			if err != nil {
				log.Warn("configuration file not watched; reload with SIGHUP or POST /config/reload", zap.Error(err))
			}
			watchDone = nil
		}
	}
}

// drainHTTP shuts the HTTP server down: long requests end at once (base context), others
// get drainTimeout, and clients still sending a request are not waited for.
func drainHTTP(srv *http.Server, active *inflight, log *zap.Logger) {
	dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	cut := time.AfterFunc(readingGrace, func() { active.closeReading() })
	defer cut.Stop()
	if err := srv.Shutdown(dctx); err != nil {
		if reqs := active.list(time.Now()); len(reqs) > 0 {
			log.Warn("HTTP requests still running at shutdown were cut", zap.Error(err), zap.Strings("requests", reqs))
		} else {
			// Connections with no handler running: a client still sending its request.
			log.Warn("HTTP connections still reading a request at shutdown were cut", zap.Error(err))
		}
		srv.Close()
	}
}

// readLimit is the API's pacing of read requests as configured.
func readLimit(c config.ReadLimitConfig) api.ReadLimit {
	return api.ReadLimit{Rate: c.Rate, Burst: c.Burst, MaxWait: c.MaxWait}
}
