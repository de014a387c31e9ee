package config

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/internal/rtsched"
	"github.com/cycled/cycled/internal/setting"
	"github.com/cycled/cycled/internal/strictdecode"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// BuildOption configures how modules are built from their configuration.
type BuildOption interface{ apply(*buildOptions) }

type buildOptions struct {
	clock   clock.Clock
	rand    func() float64
	reuse   []cycle.Registration
	sources HeaderSources // for a runtime registration: where its header values may come from
}

type buildOptionFunc func(*buildOptions)

func (f buildOptionFunc) apply(o *buildOptions) { f(o) }

// WithClock sets the clock of the modules built (give the engine's). Default clock.Real().
func WithClock(c clock.Clock) BuildOption {
	return buildOptionFunc(func(o *buildOptions) { o.clock = c })
}

// WithRand sets the randomness of builtin modules (uniform in [0, 1), safe for concurrent
// use). Default math/rand/v2.
func WithRand(f func() float64) BuildOption {
	return buildOptionFunc(func(o *buildOptions) { o.rand = f })
}

// Reusing passes the registrations in force: a builtin module whose settings did not
// change keeps its instance, so the engine keeps its worker and the faults injected at
// runtime survive a reload.
func Reusing(regs []cycle.Registration) BuildOption {
	return buildOptionFunc(func(o *buildOptions) { o.reuse = regs })
}

// WithHeaderSources sets where the header values of a module registered at runtime may
// come from besides literals (http.runtime_header_sources; see DecodeModuleWith).
func WithHeaderSources(src HeaderSources) BuildOption {
	return buildOptionFunc(func(o *buildOptions) { o.sources = src })
}

func (o buildOptions) moduleOptions() []modules.Option {
	return []modules.Option{modules.WithClock(o.clock), modules.WithRand(o.rand)}
}

// Validate returns every problem of c, errors and warnings, each with its path: the
// configuration-level checks (http.addr, log.level, module kinds, builtin settings, …)
// and the engine's (cycle.Validate: tiers, budgets, breakers, dependencies, keys).
func (c *Config) Validate() tiers.Problems {
	ps := c.check()
	// Engine's own problems are those of builtin settings, which check reports already.
	ecfg, regs, _ := c.Engine()
	_, eps := cycle.Validate(ecfg, regs)
	return mergeProblems(ps, eps)
}

// spinWarnings warns of a precise wait that never sleeps: with a period no longer than
// precise_margin the scheduler spins through every whole period (a core), and at real-time
// priority the kernel throttles a thread that never sleeps (95% of each second by default),
// which stops the ticks for tens of milliseconds at a time.
func (cc CycleConfig) spinWarnings() tiers.Problems {
	if cc.Timing != cycle.Precise || cc.Period <= 0 || cc.Period > cc.PreciseMargin {
		return nil
	}
	ps := tiers.Problems{{Path: "cycle.precise_margin", Warning: true, Message: fmt.Sprintf(
		"the period (%v) is not longer than the margin: the scheduler spins through every whole period, up to a core", cc.Period)}}
	if cc.RealtimePriority > 0 {
		ps = append(ps, tiers.Problem{Path: "cycle.realtime_priority", Warning: true, Message: "with timing: precise and a period not longer " +
			"than precise_margin the scheduler never sleeps, and the kernel throttles a real-time thread that never sleeps " +
			"(kernel.sched_rt_runtime_us): ticks stop for tens of milliseconds at a time"})
	}
	return ps
}

// check runs the configuration-level checks that the engine does not make.
func (c *Config) check() tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if c.Cycle.History < 1 {
		add("cycle.history", "must be >= 1")
	}
	if c.Cycle.CatchUpMax < 1 {
		add("cycle.catch_up_max", "must be >= 1")
	}
	if c.Cycle.PreciseMargin < 0 {
		add("cycle.precise_margin", "must be >= 0")
	}
	if p := c.Cycle.RealtimePriority; p != 0 && (p < rtsched.MinPriority || p > rtsched.MaxPriority) {
		add("cycle.realtime_priority", "must be 0 (off) or a SCHED_FIFO priority from %d to %d", rtsched.MinPriority, rtsched.MaxPriority)
	}
	ps = append(ps, c.Cycle.spinWarnings()...)
	topBackoff := c.Backoff.engine().CheckExplicit()
	setting.Report("backoff", topBackoff, add)
	if c.Emergency.RecoverAfter < 1 {
		add("emergency.recover_after", "must be >= 1")
	}
	if c.LastGood.DefaultTTL <= 0 {
		add("lastgood.default_ttl", "must be > 0")
	}
	for i, t := range c.Tiers {
		p := fmt.Sprintf("tiers[%d]", i)
		if t.MaxAttempts < 1 {
			add(p+".max_attempts", "must be >= 1")
		}
		checkKinds(p+".retry_on", t.RetryOn, add)
		checkBreakerConfig(p+".breaker", t.Breaker, add)
		// A field a tier inherits from the top-level backoff is reported there only.
		setting.Each(t.Backoff.engine().CheckExplicit(), func(field, msg string) {
			if !setting.Has(topBackoff, field) {
				add(p+".backoff."+field, "%s", msg)
			}
		})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Breakers)) {
		checkBreakerConfig("breakers."+name, c.Breakers[name], add)
	}
	for i, m := range c.Modules {
		ps = append(ps, m.check(fmt.Sprintf("modules[%d]", i))...)
	}
	c.checkBounds(add)
	c.HTTP.check(c.tokenFromFile, add)
	c.Log.check(add)
	c.Recorder.check(c.StateDir, add)
	c.HA.check(c.Cycle.Period, add)
	c.Export.check(add)
	c.Tracing.check(add)
	return ps
}

// check checks the http section; tokenFromFile tells an admin_token read from
// admin_token_file from one set beside it.
func (h HTTPConfig) check(tokenFromFile bool, add func(string, string, ...any)) {
	if _, port, err := net.SplitHostPort(h.Addr); err != nil {
		add("http.addr", "want host:port, e.g. 127.0.0.1:8080 (%v)", err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		add("http.addr", "invalid port %q", port)
	}
	if rl := h.ReadLimit; !(rl.Rate >= 0 && !math.IsInf(rl.Rate, 0)) {
		add("http.read_limit.rate", "must be a number of requests a second >= 0 (0: no limit)")
	}
	if h.ReadLimit.Burst < 0 {
		add("http.read_limit.burst", "must be >= 0")
	}
	if h.ReadLimit.MaxWait < 0 {
		add("http.read_limit.max_wait", "must be >= 0")
	}
	if al := h.AdminLimit; !(al.Rate >= 0 && !math.IsInf(al.Rate, 0)) {
		add("http.admin_limit.rate", "must be a number of requests a second >= 0 (0: no limit)")
	}
	if h.AdminLimit.Burst < 1 {
		add("http.admin_limit.burst", "must be >= 1")
	}
	if h.MaxRuntimeModules < 0 {
		add("http.max_runtime_modules", "must be >= 0 (0: no runtime registration)")
	}
	if h.CacheBytes < 0 {
		add("http.cache_bytes", "must be a size >= 0 (0: cache only the latest summary)")
	}
	if h.AdminTokenFile != "" && h.AdminToken != "" && !tokenFromFile {
		add("http.admin_token_file", "set either admin_token or admin_token_file, not both")
	}
	h.checkAdminTokens(add)
}

// adminTokenName is what a named admin token's name may hold: it is written into logs and
// events as is.
var adminTokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// checkAdminTokens checks http.admin_tokens: a valid, unique name each, exactly one of
// token and token_file, and no token twice (a token used by two names, or equal to
// admin_token, could not say who acted).
func (h HTTPConfig) checkAdminTokens(add func(string, string, ...any)) {
	names := map[string]int{}
	tokens := map[string]int{}
	if h.AdminToken != "" {
		tokens[h.AdminToken] = -1
	}
	for i, t := range h.AdminTokens {
		p := fmt.Sprintf("http.admin_tokens[%d]", i)
		switch j, dup := names[t.Name]; {
		case t.Name == "":
			add(p+".name", "required: the name the audit trail shows for this token")
		case !adminTokenName.MatchString(t.Name):
			add(p+".name", "%q: use letters, digits, '.', '_', '-' and '@', at most 64 characters", t.Name)
		case dup:
			add(p+".name", "%q is already the name of http.admin_tokens[%d]", t.Name, j)
		default:
			names[t.Name] = i
		}
		switch {
		case t.TokenFile != "" && t.Token != "" && !t.fromFile:
			add(p+".token_file", "set either token or token_file, not both")
		case t.Token == "" && t.TokenFile == "":
			add(p+".token", "required (or token_file)")
		case t.Token != "":
			if j, dup := tokens[t.Token]; dup {
				other := "http.admin_token"
				if j >= 0 {
					other = fmt.Sprintf("http.admin_tokens[%d]", j)
				}
				add(p+".token", "the same token as %s: each holder needs a token of its own", other)
			} else {
				tokens[t.Token] = i
			}
		}
	}
}

// check checks the log section.
func (l LogConfig) check(add func(string, string, ...any)) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "unknown level %q (want debug, info, warn or error)", l.Level)
	}
	switch l.Format {
	case "console", "json":
	default:
		add("log.format", "unknown format %q (want console or json)", l.Format)
	}
}

// check runs the module-level checks, with paths under p ("" for a module on its own).
func (m ModuleConfig) check(p string) tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	switch m.Kind {
	case KindBuiltin:
		if m.HTTP != nil {
			add(strictdecode.Join(p, "http"), "only valid with kind: http (add kind: http)")
		}
		if m.Builtin != nil {
			for _, q := range m.Builtin.Faults.Validate() {
				add(strictdecode.Sub(strictdecode.Join(p, "builtin"), q.Path), "%s", q.Message)
			}
		}
	case KindHTTP:
		if m.Builtin != nil {
			add(strictdecode.Join(p, "builtin"), "only valid with kind: builtin")
		}
		var hs modules.HTTPSettings
		if m.HTTP != nil {
			var hps tiers.Problems
			hs, hps = m.HTTP.settings(strictdecode.Join(p, "http"))
			ps = append(ps, hps...)
		}
		for _, q := range hs.Validate() {
			add(strictdecode.Sub(strictdecode.Join(p, "http"), q.Path), "%s", q.Message)
		}
	default:
		add(strictdecode.Join(p, "kind"), "unknown kind %q (want builtin or http)", m.Kind)
	}
	m.checkBounds(p, add)
	if m.Every < 0 || m.Every > tiers.MaxEvery {
		add(strictdecode.Join(p, "every"), "must be between 1 and %d", tiers.MaxEvery)
	}
	if m.MaxAttempts < 0 || m.MaxAttempts > tiers.MaxAttempts {
		add(strictdecode.Join(p, "max_attempts"), "must be between 1 and %d", tiers.MaxAttempts)
	}
	return ps
}

func checkKinds(p string, ks []fault.Kind, add func(string, string, ...any)) {
	for i, k := range ks {
		if k == fault.KindNone {
			add(fmt.Sprintf("%s[%d]", p, i), "%q is not a fault kind", "none")
		}
	}
}

// checkBreakerConfig checks a breaker of the file: its trip_on list, and its settings by
// the breaker package's rules (every field is given once the defaults filled those the
// file omitted, so a zero is a value written).
func checkBreakerConfig(p string, b BreakerConfig, add func(string, string, ...any)) {
	checkKinds(p+".trip_on", b.TripOn, add)
	setting.Report(p, b.engine("").CheckExplicit(), add)
}

func kindSet(ks []fault.Kind) fault.Set { return fault.SetOf(ks...) }

func (b BackoffConfig) engine() retrybudget.Backoff {
	return retrybudget.Backoff{Base: b.Base, Factor: b.Factor, Max: b.Max, Jitter: b.Jitter}
}

func (b BreakerConfig) engine(name string) breaker.Settings {
	return breaker.Settings{Name: name, FailureThreshold: b.FailureThreshold, Cooldown: b.Cooldown,
		HalfOpenProbes: b.HalfOpenProbes, HalfOpenSuccesses: b.HalfOpenSuccesses, TripOn: kindSet(b.TripOn),
		Kind: b.Kind, Window: b.Window, MinTicks: b.MinTicks, FailureRate: b.FailureRate}
}

// Engine converts c into the engine's configuration and module registrations, building
// each module. The problems are those found while building modules (paths
// "modules[i]…"); a module that cannot be built is registered as a placeholder that
// fails, so that cycle.Validate still reports everything else. Validate runs it.
func (c *Config) Engine(opts ...BuildOption) (cycle.Config, []cycle.Registration, tiers.Problems) {
	o := buildOptions{}
	for _, op := range opts {
		op.apply(&o)
	}
	ec := cycle.Config{
		Period:        c.Cycle.Period,
		Overrun:       c.Cycle.Overrun,
		CatchUpMax:    c.Cycle.CatchUpMax,
		History:       c.Cycle.History,
		Timing:        c.Cycle.Timing,
		PreciseMargin: c.Cycle.PreciseMargin,
		Emergency: cycle.EmergencyConfig{
			SkipTiers:    c.Emergency.SkipTiers,
			Latch:        c.Emergency.Latch,
			RecoverAfter: c.Emergency.RecoverAfter,
		},
		DefaultTTL: c.LastGood.DefaultTTL,
		Tiers:      make([]tiers.Tier, 0, len(c.Tiers)),
		Shedding:   c.Shedding.engine(),
		Startup:    c.Startup.engine(),
	}
	for _, t := range c.Tiers {
		ec.Tiers = append(ec.Tiers, tiers.Tier{Name: t.Name, Budget: t.Budget, MaxAttempts: t.MaxAttempts,
			Backoff: t.Backoff.engine(), Retryable: kindSet(t.RetryOn), Policy: t.Policy, Breaker: t.Breaker.engine("")})
	}
	if len(c.Breakers) > 0 {
		ec.Breakers = make(map[string]breaker.Settings, len(c.Breakers))
		for name, b := range c.Breakers {
			ec.Breakers[name] = b.engine(name)
		}
	}
	ec.Bulkheads, ec.RetryBudgets = c.resilienceEngine()
	var ps tiers.Problems
	regs := make([]cycle.Registration, 0, len(c.Modules))
	for i, m := range c.Modules {
		reg, mps := m.registration(fmt.Sprintf("modules[%d]", i), o)
		ps = append(ps, mps...)
		regs = append(regs, reg)
	}
	return ec, regs, ps
}

// Spec returns the engine's spec of m.
func (m ModuleConfig) Spec() tiers.ModuleSpec {
	return tiers.ModuleSpec{Name: m.Name, Tier: m.Tier, DependsOn: m.DependsOn, Reads: m.Reads, Writes: m.Writes,
		TTL: m.TTL.TTL, Policy: m.Policy, Breaker: m.Breaker, OnOpen: m.OnOpen, Idempotent: m.Idempotent,
		MaxAttempts: m.MaxAttempts, Every: m.Every, Emergency: m.Emergency, Priority: m.Priority.Value,
		Critical: m.Priority.Critical, Async: m.Async, Timeout: m.Timeout,
		Bulkhead: m.Bulkhead, OnReject: m.OnReject, RetryBudget: m.RetryBudget}
}

// unbuildable stands in for a module that could not be built; validation refuses the
// configuration anyway.
var unbuildable = tiers.ModuleFunc(func(ctx context.Context, _ *tiers.Input) (any, error) {
	return nil, fault.Permanent(errors.New("module could not be built from its configuration"))
})

// registration builds m; p prefixes the paths of its problems.
func (m ModuleConfig) registration(p string, o buildOptions) (cycle.Registration, tiers.Problems) {
	reg := cycle.Registration{Spec: m.Spec(), Module: unbuildable}
	switch m.Kind {
	case KindBuiltin:
	case KindHTTP:
		return m.httpRegistration(reg, p, o)
	default:
		return reg, nil // check reports the kind
	}
	var s modules.Settings
	if m.Builtin != nil {
		s = *m.Builtin
	}
	for _, old := range o.reuse {
		if b, ok := old.Module.(*modules.Builtin); ok && old.Spec.Name == m.Name && reflect.DeepEqual(b.Settings(), normalized(s)) {
			reg.Module = b
			return reg, nil
		}
	}
	b, err := modules.NewBuiltin(s, o.moduleOptions()...)
	if err != nil {
		return reg, problemsUnder(strictdecode.Join(p, "builtin"), err)
	}
	reg.Module = b
	return reg, nil
}

// problemsUnder turns a module constructor's error into problems under prefix: each
// problem of a *tiers.ValidationError with its path below prefix, anything else at prefix.
func problemsUnder(prefix string, err error) tiers.Problems {
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		return tiers.Problems{{Path: prefix, Message: err.Error()}}
	}
	var ps tiers.Problems
	for _, q := range ve.Problems {
		ps = append(ps, tiers.Problem{Path: strictdecode.Sub(prefix, q.Path), Message: q.Message})
	}
	return ps
}

// normalized returns s as a Builtin stores it, for comparing settings.
func normalized(s modules.Settings) modules.Settings {
	s.Faults.FailKind = s.Faults.Kind()
	return s
}

// settings returns the module package's settings of c, its header values read; p
// prefixes the paths of the problems of reading them.
func (c HTTPModuleConfig) settings(p string) (modules.HTTPSettings, tiers.Problems) {
	s := modules.HTTPSettings{URL: c.URL, MaxBody: int64(c.MaxBody), Timeout: c.Timeout}
	var ps tiers.Problems
	for name, hv := range c.Headers {
		v, path, err := hv.resolve()
		if err != nil {
			ps = append(ps, tiers.Problem{Path: strictdecode.Sub(strictdecode.Join(strictdecode.Join(p, "headers"), name), path), Message: err.Error()})
			continue
		}
		if s.Headers == nil {
			s.Headers = make(map[string]string, len(c.Headers))
		}
		s.Headers[name] = v
	}
	slices.SortFunc(ps, func(a, b tiers.Problem) int { return strings.Compare(a.Path, b.Path) })
	return s, ps
}

// httpRegistration builds an http module into reg; p prefixes the paths of its problems.
// A reload that keeps a module's http settings keeps its instance (and so its worker).
func (m ModuleConfig) httpRegistration(reg cycle.Registration, p string, o buildOptions) (cycle.Registration, tiers.Problems) {
	var hs modules.HTTPSettings
	if m.HTTP != nil {
		var ps tiers.Problems
		if hs, ps = m.HTTP.settings(strictdecode.Join(p, "http")); len(ps) > 0 {
			return reg, ps
		}
	}
	for _, old := range o.reuse {
		if h, ok := old.Module.(*modules.HTTP); ok && old.Spec.Name == m.Name && h.Settings().Equal(withHTTPDefaults(hs)) && h.Replays() == reg.Spec.IsIdempotent() {
			reg.Module = h
			return reg, nil
		}
	}
	h, err := modules.NewHTTP(hs, modules.WithClock(o.clock), modules.WithReplay(reg.Spec.IsIdempotent()))
	if err != nil {
		return reg, problemsUnder(strictdecode.Join(p, "http"), err)
	}
	reg.Module = h
	return reg, nil
}

// withHTTPDefaults returns s as an HTTP module stores it, for comparing settings.
func withHTTPDefaults(s modules.HTTPSettings) modules.HTTPSettings {
	if s.MaxBody == 0 {
		s.MaxBody = modules.DefaultMaxBody
	}
	return s
}

// check adds the problems of the recorder section.
func (r RecorderConfig) check(stateDir string, add func(path, format string, args ...any)) {
	if r.Flush <= 0 {
		add("recorder.flush", "must be > 0 (the most often the recorder commits, e.g. 100ms)")
	}
	if r.KeepTicks < 0 {
		add("recorder.keep_ticks", "must be >= 0 (0: no count bound)")
	}
	if r.KeepFor < 0 {
		add("recorder.keep_for", "must be >= 0 (0: no age bound)")
	}
	if r.MaxBytes < 0 {
		add("recorder.max_bytes", "must be a size >= 0 (0: no size bound)")
	}
	if r.Enabled && stateDir == "" {
		add("recorder.enabled", "the recorder needs state_dir (its database lives there)")
	}
}
