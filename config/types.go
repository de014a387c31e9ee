package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// Config is the daemon's configuration. The yaml tags are the key names of the
// configuration reference (README.md), which are part of the contract; a Config returned by Load has every default applied, so it is
// also the effective configuration shown by GET /config (through Redacted).
type Config struct {
	// Cycle configures the scheduler.
	Cycle CycleConfig `yaml:"cycle"`
	// Backoff is the retry backoff of every tier that does not override it.
	Backoff BackoffConfig `yaml:"backoff"`
	// Emergency configures emergency mode.
	Emergency EmergencyConfig `yaml:"emergency"`
	// LastGood configures the last-known-good store.
	LastGood LastGoodConfig `yaml:"lastgood"`
	// Tiers in order; the first is the safety tier. Absent: the five seed tiers.
	Tiers []TierConfig `yaml:"tiers"`
	// Breakers are the named breakers that modules may share.
	Breakers map[string]BreakerConfig `yaml:"breakers"`
	// Modules are the modules to run.
	Modules []ModuleConfig `yaml:"modules"`
	// HTTP configures the API listener. Changing it needs a restart.
	HTTP HTTPConfig `yaml:"http"`
	// Log configures logging. Changing it needs a restart.
	Log LogConfig `yaml:"log"`
	// StateDir is where runtime registrations persist, and the flight recorder's
	// database. Empty disables persistence.
	StateDir string `yaml:"state_dir"`
	// Recorder configures the flight recorder. Changing it needs a restart.
	Recorder RecorderConfig `yaml:"recorder"`
	// HA makes the daemon one of an active/standby group (see HAConfig). Changing it needs
	// a restart.
	HA HAConfig `yaml:"ha"`
	// Export publishes summaries and events to a message stream. Changing it needs a
	// restart.
	Export ExportConfig `yaml:"export"`
	// Tracing sends each sampled tick as an OpenTelemetry trace (see TracingConfig).
	// Changing it needs a restart.
	Tracing TracingConfig `yaml:"tracing"`

	// Bulkheads are the named bulkheads modules may name (bulkhead: NAME).
	Bulkheads map[string]BulkheadConfig `yaml:"bulkheads"`
	// RetryBudget holds the retry-amplification budgets, per tier and per downstream.
	RetryBudget RetryBudgetConfig `yaml:"retry_budget"`

	// Shedding configures load shedding on overrun. Absent: off.
	Shedding *SheddingConfig `yaml:"shedding"`
	// Startup configures the startup state. Absent: off (the first tick runs every tier).
	Startup *StartupConfig `yaml:"startup"`

	// source names where the configuration came from.
	source string
	// tokenFromFile: AdminToken was read from AdminTokenFile.
	tokenFromFile bool
}

// CycleConfig configures the scheduler (key "cycle").
type CycleConfig struct {
	// Period is the tick period; 0 is step mode (default 100ms).
	Period time.Duration `yaml:"period"`
	// Overrun is skip (default), catch_up or delay.
	Overrun cycle.Overrun `yaml:"overrun"`
	// CatchUpMax caps the ticks run back to back by catch_up (default 10).
	CatchUpMax int `yaml:"catch_up_max"`
	// History is the number of summaries kept in memory (default 1000). Changing it needs a
	// restart.
	History int `yaml:"history"`
	// Timing is coarse (default) or precise.
	Timing cycle.Timing `yaml:"timing"`
	// PreciseMargin is how long before a target precise timing starts spinning (default 1.5ms).
	PreciseMargin time.Duration `yaml:"precise_margin"`
	// RealtimePriority, from 1 to 99, runs the daemon's threads under the real-time policy
	// SCHED_FIFO at that priority (Linux; needs CAP_SYS_NICE or RLIMIT_RTPRIO), so that
	// other processes and the daemon's own HTTP clients on the same CPUs do not delay its
	// ticks. 0 (the default) leaves the normal policy. Changing it needs a restart.
	RealtimePriority int `yaml:"realtime_priority"`
}

// BackoffConfig is a retry backoff: base · factor^(attempt-1), capped at max, ± jitter.
type BackoffConfig struct {
	// Base is the delay before the second attempt (default 10ms).
	Base time.Duration `yaml:"base"`
	// Factor multiplies the delay after every attempt (default 2).
	Factor float64 `yaml:"factor"`
	// Max caps the delay (default 100ms).
	Max time.Duration `yaml:"max"`
	// Jitter spreads each delay by ± jitter × delay, in [0, 1] (default 0.2).
	Jitter float64 `yaml:"jitter"`
}

// EmergencyConfig configures emergency mode (key "emergency").
type EmergencyConfig struct {
	// SkipTiers names the tiers skipped in emergency mode. Absent: every tier after the first.
	SkipTiers []string `yaml:"skip_tiers"`
	// Latch keeps emergency mode until an operator reset.
	Latch bool `yaml:"latch"`
	// RecoverAfter is the number of consecutive healthy safety ticks that ends it (default 3).
	RecoverAfter int `yaml:"recover_after"`
}

// LastGoodConfig configures the last-known-good store (key "lastgood").
type LastGoodConfig struct {
	// DefaultTTL is the TTL of keys whose module sets none (default 5s).
	DefaultTTL time.Duration `yaml:"default_ttl"`
}

// TierConfig is one tier. A tier named like a seed tier (safety, knowledge, perception,
// planning, execution) takes the seed's budget, attempts and breaker for the fields it
// omits; any other tier needs an explicit budget.
type TierConfig struct {
	// Name identifies the tier.
	Name string `yaml:"name"`
	// Budget is the tier's wall-clock budget, retries included.
	Budget time.Duration `yaml:"budget"`
	// MaxAttempts is the number of attempts per module per tick (default: seed or 1).
	MaxAttempts int `yaml:"max_attempts"`
	// Policy is the default error policy of the tier's modules (fail_fast for the first
	// tier, degrade for the others).
	Policy tiers.Policy `yaml:"policy"`
	// Backoff overrides the top-level backoff, field by field.
	Backoff BackoffConfig `yaml:"backoff"`
	// RetryOn lists the retried fault kinds (default [transient]).
	RetryOn []fault.Kind `yaml:"retry_on"`
	// Breaker is the settings of each module's own breaker in this tier.
	Breaker BreakerConfig `yaml:"breaker"`
}

// BreakerConfig is a circuit breaker's settings.
type BreakerConfig struct {
	// FailureThreshold is the number of consecutive failed ticks that opens it.
	FailureThreshold int `yaml:"failure_threshold"`
	// Cooldown is how long it stays open before admitting probes.
	Cooldown time.Duration `yaml:"cooldown"`
	// HalfOpenProbes caps the probes admitted at once while half-open.
	HalfOpenProbes int `yaml:"half_open_probes"`
	// HalfOpenSuccesses is the number of successful probes that closes it.
	HalfOpenSuccesses int `yaml:"half_open_successes"`
	// TripOn lists the fault kinds that count. Default: every fault kind for a module's own
	// breaker, [transient, downstream] for a named one.
	TripOn []fault.Kind `yaml:"trip_on"`
	// Kind is consecutive (default: failure_threshold consecutive failed ticks open it) or
	// rate (the share of failed ticks over a window opens it).
	Kind breaker.Kind `yaml:"kind"`
	// Window (rate) is the number of most recent counted ticks the rate is taken over
	// (default 20).
	Window int `yaml:"window"`
	// MinTicks (rate) is the number of counted ticks needed before the rate can open it
	// (default: window).
	MinTicks int `yaml:"min_ticks"`
	// FailureRate (rate) is the share of failed ticks, in (0, 1], that opens it (default 0.5).
	FailureRate float64 `yaml:"failure_rate"`
}

// The module kinds.
const (
	// KindBuiltin is the builtin demo and fault-injection module (the default).
	KindBuiltin = "builtin"
	// KindHTTP is a remote module (modules.HTTP): one POST per attempt to http.url.
	KindHTTP = "http"
)

// ModuleConfig is one module (an item of "modules", or the body of POST /modules).
type ModuleConfig struct {
	// Name is unique among modules.
	Name string `yaml:"name"`
	// Tier is the tier's name (or derived from DependsOn when empty).
	Tier string `yaml:"tier"`
	// DependsOn lists modules that must run in earlier tiers.
	DependsOn []string `yaml:"depends_on"`
	// Kind is builtin (default) or http.
	Kind string `yaml:"kind"`
	// Writes is the key written (default "<name>.result").
	Writes string `yaml:"writes"`
	// Reads lists the keys read.
	Reads []string `yaml:"reads"`
	// TTL is the last-known-good TTL of the written key: a duration or "auto".
	TTL TTL `yaml:"ttl"`
	// Policy is degrade, fail_fast or abort (default: the tier's).
	Policy tiers.Policy `yaml:"policy"`
	// Breaker names a shared breaker instead of the module's own.
	Breaker string `yaml:"breaker"`
	// OnOpen is bypass (default) or fail.
	OnOpen tiers.OnOpen `yaml:"on_open"`
	// Idempotent says whether the module may be retried (default true).
	Idempotent *bool `yaml:"idempotent"`
	// MaxAttempts overrides the tier's attempts.
	MaxAttempts int `yaml:"max_attempts"`
	// Every runs the module on every k-th tick (default 1).
	Every int `yaml:"every"`
	// Emergency makes the module run only in emergency mode.
	Emergency bool `yaml:"emergency"`
	// Priority orders modules within a tier (higher first) and decides which are shed
	// first on overrun (lower first); "critical" is never shed.
	Priority Priority `yaml:"priority"`
	// Async runs the module after each tick, outside the tiers (see cycle.AsyncConfig).
	Async bool `yaml:"async"`
	// Timeout caps an asynchronous module's run (default 1s).
	Timeout time.Duration `yaml:"timeout"`
	// Builtin configures a builtin module.
	Builtin *modules.Settings `yaml:"builtin"`
	// HTTP configures an http module.
	HTTP *HTTPModuleConfig `yaml:"http"`

	// Bulkhead names a bulkhead (bulkheads.NAME) every run takes a permit of.
	Bulkhead string `yaml:"bulkhead"`
	// OnReject is bypass (default) or fail: what a refusal by the bulkhead means.
	OnReject tiers.OnOpen `yaml:"on_reject"`
	// RetryBudget names a downstream's retry budget (retry_budget.downstreams.NAME) the
	// module's retries count against instead of its tier's.
	RetryBudget string `yaml:"retry_budget"`
}

// HTTPModuleConfig configures a remote module (kind http; see modules.HTTP for the
// protocol).
type HTTPModuleConfig struct {
	// URL receives the module's POSTs: an absolute http:// or https:// URL without
	// credentials. Required.
	URL string `yaml:"url"`
	// MaxBody caps the answer read ("1MiB", the default; at most 64MiB). A longer answer
	// is a downstream fault.
	MaxBody ByteSize `yaml:"max_body"`
	// Timeout caps one attempt (default: the time left in the tier budget), so that a
	// slow answer leaves time for a retry.
	Timeout time.Duration `yaml:"timeout"`
	// Headers are sent with every request, to authenticate to the remote: e.g.
	// {Authorization: {env: PLANNER_TOKEN}}. Their values are never shown.
	Headers map[string]HeaderValue `yaml:"headers"`
}

// HeaderValue is the value of a remote module's request header: a literal string, or
// where to read it, {env: NAME} (an environment variable of the daemon) or {file: PATH}
// (a file's content, surrounding whitespace trimmed, at most 4 KiB). It is read when the
// configuration is loaded or reloaded and when a module is registered or restored, so a
// reload picks up a rotated file. It is never shown: GET /config shows the variable or
// the file it comes from, and "***" for a literal.
type HeaderValue struct {
	// Value is a literal value (also given as a plain string instead of a mapping).
	Value string `yaml:"value"`
	// Env names an environment variable holding the value.
	Env string `yaml:"env"`
	// File names a file holding the value.
	File string `yaml:"file"`
}

// HTTPConfig configures the API listener (key "http").
type HTTPConfig struct {
	// Addr is the listen address (default 127.0.0.1:8080).
	Addr string `yaml:"addr"`
	// AdminToken is the bearer token of the admin routes. Never shown by Redacted.
	AdminToken string `yaml:"admin_token"`
	// AdminTokenFile is a file holding the admin token (trailing whitespace trimmed).
	AdminTokenFile string `yaml:"admin_token_file"`
	// AdminTokens are named admin tokens, accepted beside AdminToken: the audit trail
	// (GET /events, the log) names the token an admin request used. Token files are read
	// at every load, so a reload puts a rotated file in force without a restart.
	AdminTokens []AdminTokenConfig `yaml:"admin_tokens"`
	// ReadLimit paces the read routes (api.ReadLimit), so that clients polling in a tight
	// loop cannot take the CPUs the tick needs. Applied on reload.
	ReadLimit ReadLimitConfig `yaml:"read_limit"`
	// CacheBytes bounds the cache of encoded summaries (JSON and gzip, by tick id) that
	// serves GET /ticks/latest and reads of older ticks (default 64MiB; 0: only the
	// latest summary's encoding is kept).
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// AdminLimit paces the admin routes per client address (api.AdminLimit): beyond it
	// they answer 429 with Retry-After. Applied on reload.
	AdminLimit AdminLimitConfig `yaml:"admin_limit"`
	// MaxRuntimeModules caps the modules registered at runtime (POST /modules); beyond it
	// a registration answers 409 module_limit (default 256). Applied on reload.
	MaxRuntimeModules int `yaml:"max_runtime_modules"`
	// RuntimeHeaderSources lists the environment variables and files that a module
	// registered at runtime may take a header value from ({env: NAME}, {file: PATH}). A
	// runtime registration naming any other is refused: by default it may use literal
	// values only, so that a client of the admin routes cannot have the daemon send its
	// environment or its files to a URL of the client's choice. The configuration file's
	// own modules are not restricted. Applied on reload.
	RuntimeHeaderSources HeaderSources `yaml:"runtime_header_sources"`
}

// HeaderSources is http.runtime_header_sources.
type HeaderSources struct {
	// Env lists environment variable names.
	Env []string `yaml:"env"`
	// File lists file paths, compared as written (cleaned).
	File []string `yaml:"file"`
}

// AdminTokenConfig is one named admin token (http.admin_tokens[i]): a name and either the
// token or a file holding it. The token is never shown by Redacted.
type AdminTokenConfig struct {
	// Name identifies the token's holder in the audit trail: letters, digits, '.', '_',
	// '-' and '@', at most 64 characters, unique among the tokens.
	Name string `yaml:"name"`
	// Token is the token itself.
	Token string `yaml:"token"`
	// TokenFile is a file holding the token (trailing whitespace trimmed), read at every
	// load and reload.
	TokenFile string `yaml:"token_file"`

	fromFile bool // Token was read from TokenFile
}

// AdminLimitConfig is http.admin_limit.
type AdminLimitConfig struct {
	// Rate is the admin requests served a second to one client address (default 20; 0:
	// no limit).
	Rate float64 `yaml:"rate"`
	// Burst is how many admin requests one client may make at once above the rate
	// (default 40).
	Burst int `yaml:"burst"`
}

// The defaults of the admin surface's bounds.
const (
	DefaultAdminRate         = 20
	DefaultAdminBurst        = 40
	DefaultMaxRuntimeModules = 256
)

// RecorderConfig is the flight recorder (key "recorder"): every summary and event kept
// in a SQLite database in state_dir, within the retention bounds.
type RecorderConfig struct {
	// Enabled turns the recorder on (default false: ids start at 1 at every start and
	// history is the in-memory window only).
	Enabled bool `yaml:"enabled"`
	// Flush is the most often the recorder commits (default 100ms); at most this much
	// recorded history, plus the running tick, is lost when the process is killed.
	Flush time.Duration `yaml:"flush"`
	// KeepTicks is the most summaries kept (default 1000000; 0: no count bound).
	KeepTicks int `yaml:"keep_ticks"`
	// KeepFor is how long summaries and events are kept (default 168h; 0: no age bound).
	KeepFor time.Duration `yaml:"keep_for"`
	// MaxBytes bounds the database's size (default 1GiB; 0: no size bound); the oldest
	// records go first.
	MaxBytes ByteSize `yaml:"max_bytes"`
}

// The recorder's and the summary cache's defaults.
const (
	DefaultRecorderFlush     = 100 * time.Millisecond
	DefaultRecorderKeepTicks = 1_000_000
	DefaultRecorderKeepFor   = 7 * 24 * time.Hour
	DefaultRecorderMaxBytes  = ByteSize(1 << 30)
	DefaultCacheBytes        = ByteSize(64 << 20)
)

// ReadLimitConfig is http.read_limit.
type ReadLimitConfig struct {
	// Rate is the number of read requests served a second across all clients (default
	// 1000; 0: no limit). Probes, /metrics, the SSE stream, admin routes and long-polls
	// answered with a tick new to their connection are not counted.
	Rate float64 `yaml:"rate"`
	// Burst is how many read requests may be served at once above the rate (default 20).
	Burst int `yaml:"burst"`
	// MaxWait is the longest a request waits for its turn before it is answered 429 with
	// Retry-After (default 1s).
	MaxWait time.Duration `yaml:"max_wait"`
}

// LogConfig configures logging (key "log").
type LogConfig struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is console (default) or json.
	Format string `yaml:"format"`
}

// TTL is a module's last-known-good TTL as configured: a duration ("5s") or "auto".
type TTL struct {
	lastgood.TTL
}

// MarshalText encodes t as "auto", a duration, or "" for the engine default.
func (t TTL) MarshalText() ([]byte, error) {
	switch {
	case t.Auto:
		return []byte("auto"), nil
	case t.Fixed == 0:
		return nil, nil
	}
	return []byte(t.Fixed.String()), nil
}

// UnmarshalText parses "auto", a duration such as "5s", or "" (the engine default).
func (t *TTL) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch s {
	case "", "0":
		*t = TTL{}
		return nil
	case "auto":
		*t = TTL{lastgood.TTL{Auto: true}}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid ttl %q (want a duration such as 5s, or auto)", s)
	}
	*t = TTL{lastgood.TTL{Fixed: d}}
	return nil
}

// ByteSize is a size in bytes, written "1MiB", "512KiB", "1MB" or "1048576".
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// ParseByteSize parses a size such as "1MiB".
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	num := s
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (want e.g. 1MiB, 512KiB or 1048576)", s)
	}
	return ByteSize(n * mult), nil
}

// String renders the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.m == 0 {
			return strconv.FormatInt(int64(b)/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalText encodes b as String does.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText parses b as ParseByteSize does.
func (b *ByteSize) UnmarshalText(t []byte) error {
	v, err := ParseByteSize(string(t))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// DefaultReadRate is http.read_limit.rate when the file omits it: read requests served a
// second. It keeps the tick's start lag within its target on a two-core machine under
// clients polling in a tight loop (BENCHMARKS.md, "HTTP under load"; docs/decisions.md).
const DefaultReadRate = 1000

// Defaults returns the configuration used for every key a file omits: the documented
// defaults (README.md, "Configuration"), the five seed tiers, and no modules.
func Defaults() *Config {
	bo := tiers.DefaultBackoff()
	c := &Config{
		Cycle:     CycleConfig{Period: 100 * time.Millisecond, CatchUpMax: 10, History: 1000, PreciseMargin: 1500 * time.Microsecond},
		Backoff:   BackoffConfig{Base: bo.Base, Factor: bo.Factor, Max: bo.Max, Jitter: bo.Jitter},
		Emergency: EmergencyConfig{RecoverAfter: 3},
		LastGood:  LastGoodConfig{DefaultTTL: 5 * time.Second},
		HTTP: HTTPConfig{Addr: "127.0.0.1:8080", ReadLimit: ReadLimitConfig{Rate: DefaultReadRate, Burst: 20, MaxWait: time.Second},
			CacheBytes: DefaultCacheBytes, AdminLimit: AdminLimitConfig{Rate: DefaultAdminRate, Burst: DefaultAdminBurst},
			MaxRuntimeModules: DefaultMaxRuntimeModules},
		Recorder: RecorderConfig{Flush: DefaultRecorderFlush, KeepTicks: DefaultRecorderKeepTicks,
			KeepFor: DefaultRecorderKeepFor, MaxBytes: DefaultRecorderMaxBytes},
		Log:      LogConfig{Level: "info", Format: "console"},
		StateDir: "./cycled-state",
		Tracing: TracingConfig{ServiceName: "cycled", Sampler: DefaultTracingSampler, SamplerArg: DefaultTracingSamplerArg,
			QueueSize: DefaultTracingQueueSize},
		source: "defaults",
	}
	haDefaults(c)
	c.resolve(map[string]bool{})
	return c
}

// Source names where the configuration was loaded from: a file path, "embedded demo",
// or "defaults".
func (c *Config) Source() string { return c.source }

// seedTier returns the seed tier named name.
func seedTier(name string) (tiers.Tier, bool) {
	for _, t := range tiers.SeedTiers() {
		if t.Name == name {
			return t, true
		}
	}
	return tiers.Tier{}, false
}

// resolve fills what the file omitted, knowing which paths it gave.
func (c *Config) resolve(present map[string]bool) {
	has := func(p string) bool { return present[p] }
	if !has("tiers") {
		c.Tiers = nil
		for _, t := range tiers.SeedTiers() {
			c.Tiers = append(c.Tiers, TierConfig{Name: t.Name})
		}
	}
	for i := range c.Tiers {
		t := &c.Tiers[i]
		p := fmt.Sprintf("tiers[%d]", i)
		seed, isSeed := seedTier(t.Name)
		if !isSeed {
			seed = tiers.Tier{MaxAttempts: 1, Breaker: breakerDefaults()}
		}
		if !has(p+".budget") && isSeed {
			t.Budget = seed.Budget
		}
		if !has(p + ".max_attempts") {
			t.MaxAttempts = seed.MaxAttempts
		}
		if !has(p + ".policy") {
			t.Policy = tiers.TierPolicy(tiers.Tier{}, i)
		}
		bp := p + ".backoff"
		if !has(bp + ".base") {
			t.Backoff.Base = c.Backoff.Base
		}
		if !has(bp + ".factor") {
			t.Backoff.Factor = c.Backoff.Factor
		}
		if !has(bp + ".max") {
			t.Backoff.Max = c.Backoff.Max
		}
		if !has(bp + ".jitter") {
			t.Backoff.Jitter = c.Backoff.Jitter
		}
		if !has(p + ".retry_on") {
			t.RetryOn = []fault.Kind{fault.KindTransient}
		}
		resolveBreaker(&t.Breaker, p+".breaker", seed.Breaker, fault.AllFaults, has)
	}
	for name, b := range c.Breakers {
		resolveBreaker(&b, "breakers."+name, breakerDefaults(), fault.SetOf(fault.KindTransient, fault.KindDownstream), has)
		c.Breakers[name] = b
	}
	for i := range c.Modules {
		m := &c.Modules[i]
		if !has(fmt.Sprintf("modules[%d].kind", i)) && m.Kind == "" {
			m.Kind = KindBuiltin
		}
		if m.Builtin != nil {
			m.Builtin.Faults.FailKind = m.Builtin.Faults.Kind()
		}
		if m.HTTP != nil && m.HTTP.MaxBody == 0 {
			m.HTTP.MaxBody = modules.DefaultMaxBody
		}
	}
}

// breakerDefaults are the breaker package's defaults, made explicit.
func breakerDefaults() breaker.Settings {
	return breaker.Settings{FailureThreshold: 5, Cooldown: 30 * time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1}
}

// resolveBreaker fills the fields of b that the file omitted from def, and trip_on from trip.
func resolveBreaker(b *BreakerConfig, p string, def breaker.Settings, trip fault.Set, has func(string) bool) {
	if !has(p + ".failure_threshold") {
		b.FailureThreshold = def.FailureThreshold
	}
	if !has(p + ".cooldown") {
		b.Cooldown = def.Cooldown
	}
	if !has(p + ".half_open_probes") {
		b.HalfOpenProbes = def.HalfOpenProbes
	}
	if !has(p + ".half_open_successes") {
		b.HalfOpenSuccesses = def.HalfOpenSuccesses
	}
	if !has(p + ".trip_on") {
		b.TripOn = trip.Kinds()
	}
	if b.Kind == breaker.Rate {
		// The rate kind's defaults, for the fields the file omitted only: a value given
		// out of bounds is reported, not replaced.
		r := breaker.Settings{Kind: breaker.Rate, Window: b.Window}.WithDefaults()
		if !has(p + ".window") {
			b.Window = r.Window
		}
		if !has(p + ".min_ticks") {
			b.MinTicks = b.Window
		}
		if !has(p + ".failure_rate") {
			b.FailureRate = r.FailureRate
		}
	}
}
