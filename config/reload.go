package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

// Redacted returns the configuration as JSON-friendly values with the file's key names
// and durations as strings ("100ms"), for GET /config. The admin token is never shown:
// it reads "***" when one is set. Defaults show as their effective values: an absent
// emergency.skip_tiers lists every tier after the first, an explicit [] stays [].
func (c *Config) Redacted() any {
	cp := *c
	if cp.HTTP.AdminToken != "" {
		cp.HTTP.AdminToken = "***"
	}
	if len(cp.HTTP.AdminTokens) > 0 {
		ts := make([]AdminTokenConfig, len(cp.HTTP.AdminTokens))
		for i, t := range cp.HTTP.AdminTokens {
			ts[i] = AdminTokenConfig{Name: t.Name, TokenFile: t.TokenFile}
			if !t.fromFile {
				ts[i].Token = "***"
			}
		}
		cp.HTTP.AdminTokens = ts
	}
	if cp.HA.Etcd.Password != "" {
		cp.HA.Etcd.Password = "***"
	}
	if cp.Emergency.SkipTiers == nil {
		// Absent means every tier after the first: show those, as other defaults are shown
		// by their effective values, so that it differs from an explicit [] (none skipped).
		cp.Emergency.SkipTiers = []string{}
		for _, t := range cp.Tiers[min(1, len(cp.Tiers)):] {
			cp.Emergency.SkipTiers = append(cp.Emergency.SkipTiers, t.Name)
		}
	}
	return encodePlain(reflect.ValueOf(cp))
}

// EngineReloader is what a Reloader needs of the engine; *cycle.Engine implements it.
type EngineReloader interface {
	// Reload validates the configuration whole and applies it at the next tick boundary;
	// it refuses to remove safety modules unless opts allow it (cycle.ErrSafetyRemoval).
	Reload(cfg cycle.Config, mods []cycle.Registration, opts ...cycle.ChangeOption) error
}

// ReloadResult is the outcome of one reload attempt.
type ReloadResult struct {
	// At is when the attempt finished.
	At time.Time `json:"at"`
	// Trigger says what asked for it ("api", "signal", "file", …).
	Trigger string `json:"trigger,omitempty"`
	// OK reports whether the new configuration was accepted.
	OK bool `json:"ok"`
	// Error is the reason it was rejected.
	Error string `json:"error,omitempty"`
	// Problems are the validation problems that rejected it, each with its path.
	Problems tiers.Problems `json:"problems,omitempty"`
	// Warnings are the non-fatal findings of an accepted configuration.
	Warnings tiers.Problems `json:"warnings,omitempty"`
	// RestartRequired lists changed keys that apply only after a restart: cycle.history,
	// cycle.realtime_priority, http.addr, http.admin_token, log.format and state_dir. (The
	// daemon applies log.level at once.)
	RestartRequired []string `json:"restart_required,omitempty"`
	// AllowSafetyRemoval tells a reload asked to allow the removal of safety modules.
	AllowSafetyRemoval bool `json:"allow_safety_removal,omitempty"`
	// SafetyRemoved names the safety modules that the reload removed (it was allowed to).
	SafetyRemoved []string `json:"safety_removed,omitempty"`
	// Err is the error returned by Reload (nil when OK).
	Err error `json:"-"`
}

// ReloaderOption configures a Reloader.
type ReloaderOption interface{ apply(*Reloader) }

type reloaderOptionFunc func(*Reloader)

func (f reloaderOptionFunc) apply(r *Reloader) { f(r) }

// WithLoadOptions sets how a reload reads the configuration (the options the daemon
// started with, so that the same file, environment and flags apply).
func WithLoadOptions(opts ...LoadOption) ReloaderOption {
	return reloaderOptionFunc(func(r *Reloader) { r.loadOpts = opts })
}

// WithBuildOptions sets how modules are built (WithClock, WithRand).
func WithBuildOptions(opts ...BuildOption) ReloaderOption {
	return reloaderOptionFunc(func(r *Reloader) { r.buildOpts = opts })
}

// OnReload registers a listener called after every reload attempt (from the goroutine
// that ran it). The daemon logs with it.
func OnReload(f func(ReloadResult)) ReloaderOption {
	return reloaderOptionFunc(func(r *Reloader) { r.listeners = append(r.listeners, f) })
}

// WithReloadClock sets the clock used for timestamps and the file watch's debounce.
func WithReloadClock(c clock.Clock) ReloaderOption {
	return reloaderOptionFunc(func(r *Reloader) { r.clock = clock.Or(c) })
}

// Reloader holds the configuration in force and replaces it on demand: Reload re-reads the
// sources, validates the result whole and hands it to the engine, which applies it at the
// next tick boundary. A configuration that fails is rejected whole; the running one stays,
// and the failure is kept for GET /config (View). It is safe for concurrent use; reloads
// are serialised.
type Reloader struct {
	engine    EngineReloader
	loadOpts  []LoadOption
	buildOpts []BuildOption
	listeners []func(ReloadResult)
	clock     clock.Clock

	mu sync.Mutex // serialises reloads; guards the fields below
	// cur is the configuration in force: the latest accepted, with the settings that apply
	// only at startup (restartOnly) as the daemon started with them.
	cur *Config
	// started is the configuration the daemon started with.
	started  *Config
	pending  []string // the settings changed since the start that wait for a restart
	regs     []cycle.Registration
	loadedAt time.Time
	last     *ReloadResult
	reloads  uint64
	failures uint64
}

// NewReloader returns a Reloader for an engine started with cur and regs (the result of
// cur.Engine).
func NewReloader(cur *Config, regs []cycle.Registration, eng EngineReloader, opts ...ReloaderOption) *Reloader {
	r := &Reloader{engine: eng, cur: cur, started: cur, regs: regs, clock: clock.Real()}
	for _, op := range opts {
		op.apply(r)
	}
	r.loadedAt = r.clock.Now()
	return r
}

// Current returns the configuration in force.
func (r *Reloader) Current() *Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Last returns the outcome of the latest reload attempt, or nil before the first.
func (r *Reloader) Last() *ReloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return nil
	}
	cp := *r.last
	return &cp
}

// LastError returns the error of the latest reload attempt, nil when it succeeded or
// before the first.
func (r *Reloader) LastError() error {
	if l := r.Last(); l != nil {
		return l.Err
	}
	return nil
}

// Reload re-reads the configuration and applies it. trigger is recorded ("api", "signal",
// "file"); ctx bounds the attempt (a reload refused because ctx ended changes nothing). On
// failure the running configuration stays and the error is a *tiers.ValidationError
// (possibly wrapped) or wraps ErrSyntax, or ErrRead and the file's read error.
//
// A configuration that lacks a module of the running configuration's safety tier is
// refused (it wraps cycle.ErrSafetyRemoval), unless the reload allows it (ReloadAllowing).
func (r *Reloader) Reload(ctx context.Context) error { return r.reload(ctx, "api", false) }

// ReloadFrom is Reload with the trigger named.
func (r *Reloader) ReloadFrom(ctx context.Context, trigger string) error {
	return r.reload(ctx, trigger, false)
}

// ReloadAllowing is ReloadFrom that, if allowSafetyRemoval, may remove safety modules;
// those it removes are named in the result (ReloadResult.SafetyRemoved).
func (r *Reloader) ReloadAllowing(ctx context.Context, trigger string, allowSafetyRemoval bool) error {
	return r.reload(ctx, trigger, allowSafetyRemoval)
}

func (r *Reloader) reload(ctx context.Context, trigger string, allowSafetyRemoval bool) error {
	r.mu.Lock()
	res, err := r.reloadLocked(ctx, trigger, allowSafetyRemoval)
	r.mu.Unlock()
	for _, l := range r.listeners {
		l(res)
	}
	return err
}

func (r *Reloader) reloadLocked(ctx context.Context, trigger string, allowSafetyRemoval bool) (ReloadResult, error) {
	res := ReloadResult{Trigger: trigger, AllowSafetyRemoval: allowSafetyRemoval}
	fail := func(err error) (ReloadResult, error) {
		res.At = r.clock.Now()
		res.Err = err
		res.Error = err.Error()
		var ve *tiers.ValidationError
		if errors.As(err, &ve) {
			res.Problems = ve.Problems
		}
		r.failures++
		r.last = &res
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("reload: %w", err))
	}
	cfg, err := Load(r.loadOpts...)
	if err != nil {
		return fail(fmt.Errorf("reload: %w", err))
	}
	ecfg, regs, ps := cfg.Engine(append(append([]BuildOption(nil), r.buildOpts...), Reusing(r.regs))...)
	if err := ps.Err(); err != nil {
		return fail(fmt.Errorf("reload: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("reload: %w", err))
	}
	runtime := r.runtimeRegistrations()
	var opts []cycle.ChangeOption
	if allowSafetyRemoval {
		opts = append(opts, cycle.AllowSafetyRemoval(&res.SafetyRemoved))
	}
	if err := r.engine.Reload(ecfg, regs, opts...); err != nil {
		// The engine validates the file's modules followed by the runtime ones: name a
		// problem of a runtime module by the module, unless the registrations changed
		// meanwhile (then which index is which is unknown).
		if again := r.runtimeRegistrations(); slices.EqualFunc(runtime, again, sameName) {
			err = NameRuntimeModules(err, append(slices.Clip(regs), runtime...))
		}
		return fail(err)
	}
	res.OK = true
	res.Warnings = cfg.Validate().Warnings()
	res.RestartRequired = restartOnly(r.started, cfg)
	res.At = r.clock.Now()
	r.cur, r.regs, r.loadedAt, r.pending = inForce(r.started, cfg), regs, res.At, res.RestartRequired
	r.reloads++
	r.last = &res
	return res, nil
}

// runtimeRegistrations returns the engine's runtime-registered modules in registration
// order, when the engine tells them (*cycle.Engine does).
func (r *Reloader) runtimeRegistrations() []cycle.Registration {
	e, ok := r.engine.(interface{ Registrations() []cycle.Registration })
	if !ok {
		return nil
	}
	var out []cycle.Registration
	for _, reg := range e.Registrations() {
		if reg.Origin == cycle.FromRuntime {
			out = append(out, reg)
		}
	}
	return out
}

func sameName(a, b cycle.Registration) bool { return a.Spec.Name == b.Spec.Name }

// enginePath matches the engine's path of a module: its index in the list validated.
var enginePath = regexp.MustCompile(`^modules\[(\d+)\](.*)$`)

// NameRuntimeModules rewrites the problems that the engine reports for modules registered
// at runtime. The engine validates the configuration's modules followed by the runtime
// ones (regs: that combined list, in order, each with its Origin) and names a module by
// its index in it, so a problem of a runtime module would read "modules[3].tier", a path
// that is not in the file. Such a problem becomes "runtime_modules[j].tier" (j counts the
// runtime modules only) with a message that starts with `runtime module "rt1": `. The
// configuration's modules keep their paths. An err that is not a *tiers.ValidationError,
// or has nothing to rename, is returned as it is; otherwise the result is a new
// *tiers.ValidationError (a prefix that wrapped it, such as "register \"rt1\": ", is dropped).
func NameRuntimeModules(err error, regs []cycle.Registration) error {
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	nth := make([]int, len(regs)) // index among the runtime modules, -1 for the file's
	j := 0
	for i, reg := range regs {
		nth[i] = -1
		if reg.Origin == cycle.FromRuntime {
			nth[i] = j
			j++
		}
	}
	ps := make(tiers.Problems, len(ve.Problems))
	renamed := false
	for k, p := range ve.Problems {
		if m := enginePath.FindStringSubmatch(p.Path); m != nil {
			if i, aerr := strconv.Atoi(m[1]); aerr == nil && i < len(regs) && nth[i] >= 0 {
				p.Path = fmt.Sprintf("runtime_modules[%d]%s", nth[i], m[2])
				p.Message = fmt.Sprintf("runtime module %q: %s", regs[i].Spec.Name, p.Message)
				renamed = true
			}
		}
		ps[k] = p
	}
	if !renamed {
		return err
	}
	return &tiers.ValidationError{Problems: ps}
}

// restartOnly lists the keys that differ between old and new but apply only at startup.
func restartOnly(old, cur *Config) []string {
	var out []string
	if old.Cycle.History != cur.Cycle.History {
		out = append(out, "cycle.history") // the engine sizes its history once, in cycle.New
	}
	if old.Cycle.RealtimePriority != cur.Cycle.RealtimePriority {
		out = append(out, "cycle.realtime_priority")
	}
	if old.HTTP.Addr != cur.HTTP.Addr {
		out = append(out, "http.addr")
	}
	if old.Log.Format != cur.Log.Format {
		out = append(out, "log.format")
	}
	if old.StateDir != cur.StateDir {
		out = append(out, "state_dir")
	}
	if old.Recorder != cur.Recorder {
		out = append(out, "recorder")
	}
	if old.HTTP.CacheBytes != cur.HTTP.CacheBytes {
		out = append(out, "http.cache_bytes")
	}
	if old.Tracing != cur.Tracing {
		out = append(out, "tracing")
	}
	return append(out, haRestart(old, cur)...)
}

// inForce returns cfg with the settings that apply only at startup (see restartOnly) taken
// from started: what the daemon runs with after cfg was reloaded.
func inForce(started, cfg *Config) *Config {
	cp := *cfg
	cp.Cycle.History, cp.Cycle.RealtimePriority = started.Cycle.History, started.Cycle.RealtimePriority
	cp.HTTP.Addr, cp.HTTP.CacheBytes = started.HTTP.Addr, started.HTTP.CacheBytes
	cp.Log.Format, cp.StateDir, cp.Recorder = started.Log.Format, started.StateDir, started.Recorder
	cp.Tracing, cp.HA, cp.Export = started.Tracing, started.HA, started.Export
	return &cp
}

// View is GET /config: the configuration in force (redacted: settings that apply only at
// startup as the daemon started with them), where it came from, when it was loaded, the
// settings changed since the start that wait for a restart (restart_required), and the
// outcome of the latest reload attempt.
func (r *Reloader) View() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := map[string]any{
		"source":    r.cur.Source(),
		"loaded_at": r.loadedAt,
		"config":    r.cur.Redacted(),
		"reloads":   r.reloads,
		"failures":  r.failures,
	}
	if len(r.pending) > 0 {
		v["restart_required"] = r.pending
	}
	if r.last != nil {
		v["last_reload"] = *r.last
	}
	return v
}

// DecodeModule is DecodeModule with the Reloader's build options (the engine's clock) and
// the header sources that the configuration in force allows a runtime registration.
func (r *Reloader) DecodeModule(body []byte) (cycle.Registration, error) {
	src := r.Current().HTTP.RuntimeHeaderSources
	return DecodeModuleWith(body, append(slices.Clip(r.buildOpts), WithHeaderSources(src))...)
}

// Watch reloads (trigger "file") whenever the configuration file changes, until ctx ends.
// It watches the file's directory, so editors that replace the file and Kubernetes
// ConfigMap symlink swaps are seen; bursts of events are debounced by 200ms. It returns
// nil at once when the configuration does not come from a file.
func (r *Reloader) Watch(ctx context.Context) error {
	path := r.Current().Source()
	if path == DemoSource || path == "defaults" || path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil // data given in memory, not a file
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	dir := filepath.Dir(abs)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	real, _ := filepath.EvalSymlinks(abs)
	const debounce = 200 * time.Millisecond
	var timer clock.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !r.relevant(ev, abs, &real) {
				continue
			}
			if timer == nil {
				timer = r.clock.NewTimer(debounce)
			} else {
				timer.Reset(debounce)
			}
			fire = timer.C()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			_ = err // a dropped event: the next change triggers again
		case <-fire:
			fire = nil
			_ = r.reload(ctx, "file", false)
		}
	}
}

// relevant reports whether ev may have changed the file at abs (directly, or through a
// symlink whose target moved).
func (r *Reloader) relevant(ev fsnotify.Event, abs string, real *string) bool {
	if !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Remove) {
		return false
	}
	if filepath.Clean(ev.Name) == abs {
		return true
	}
	now, err := filepath.EvalSymlinks(abs)
	if err == nil && now != *real {
		*real = now
		return true
	}
	return false
}
