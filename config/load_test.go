package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// load parses yaml without the environment.
func load(t *testing.T, yaml string) (*config.Config, error) {
	t.Helper()
	return config.Load(config.WithData([]byte(yaml), "test.yaml"), config.WithoutEnv())
}

func mustLoad(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := load(t, yaml)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// problems returns the problems of a *tiers.ValidationError, failing the test otherwise.
func problems(t *testing.T, err error) tiers.Problems {
	t.Helper()
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *tiers.ValidationError", err, err)
	}
	return ve.Problems
}

// wantRejected loads yaml, wants it rejected with problems at exactly the paths want, the first
// one's message containing msg, and returns the error.
func wantRejected(t *testing.T, yaml string, want []string, msg string) error {
	t.Helper()
	_, err := load(t, yaml)
	ps := problems(t, err)
	if got := paths(ps); !slices.Equal(got, want) {
		t.Fatalf("paths %q, want %q\n%v", got, want, err)
	}
	if !strings.Contains(ps[0].Message, msg) {
		t.Fatalf("message %q does not contain %q", ps[0].Message, msg)
	}
	return err
}

// wantProblemAt loads yaml and wants it rejected with a problem at path (among others).
func wantProblemAt(t *testing.T, yaml, path string) {
	t.Helper()
	_, err := load(t, yaml)
	if err == nil {
		t.Errorf("%q: accepted", yaml)
		return
	}
	if got := paths(problems(t, err)); !slices.Contains(got, path) {
		t.Errorf("%q: problems at %v; want %s", yaml, got, path)
	}
}

func paths(ps tiers.Problems) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Path
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const minimal = `
modules:
  - name: probe
    tier: perception
    builtin: {value: 1}
`

func TestLoadDefaults(t *testing.T) {
	c := mustLoad(t, minimal)
	if c.Cycle.Period != 100*time.Millisecond || c.Cycle.History != 1000 || c.HTTP.Addr != "127.0.0.1:8080" ||
		c.Log.Level != "info" || c.Log.Format != "console" || c.LastGood.DefaultTTL != 5*time.Second ||
		c.Emergency.RecoverAfter != 3 || c.Emergency.SkipTiers != nil {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if c.Backoff != (config.BackoffConfig{Base: 10 * time.Millisecond, Factor: 2, Max: 100 * time.Millisecond, Jitter: 0.2}) {
		t.Fatalf("backoff %+v", c.Backoff)
	}
	if c.HTTP.ReadLimit != (config.ReadLimitConfig{Rate: config.DefaultReadRate, Burst: 20, MaxWait: time.Second}) {
		t.Fatalf("http.read_limit %+v", c.HTTP.ReadLimit)
	}
	want := []struct {
		name     string
		budget   time.Duration
		attempts int
		thr      int
		cool     time.Duration
		succ     int
	}{
		{"safety", 50 * time.Millisecond, 1, 2, 60 * time.Second, 3},
		{"knowledge", 200 * time.Millisecond, 3, 5, 30 * time.Second, 2},
		{"perception", 150 * time.Millisecond, 2, 7, 20 * time.Second, 2},
		{"planning", 100 * time.Millisecond, 2, 10, 15 * time.Second, 1},
		{"execution", 100 * time.Millisecond, 2, 10, 10 * time.Second, 1},
	}
	if len(c.Tiers) != len(want) {
		t.Fatalf("%d tiers, want the 5 seed tiers", len(c.Tiers))
	}
	for i, w := range want {
		got := c.Tiers[i]
		if got.Name != w.name || got.Budget != w.budget || got.MaxAttempts != w.attempts || got.Breaker.FailureThreshold != w.thr ||
			got.Breaker.Cooldown != w.cool || got.Breaker.HalfOpenSuccesses != w.succ || got.Backoff != c.Backoff {
			t.Errorf("tier %d = %+v, want %+v", i, got, w)
		}
	}
	if c.Tiers[0].Policy != tiers.FailFast || c.Tiers[1].Policy != tiers.Degrade {
		t.Errorf("tier policies %v %v", c.Tiers[0].Policy, c.Tiers[1].Policy)
	}
	if c.Modules[0].Kind != config.KindBuiltin {
		t.Errorf("kind defaults to %q", c.Modules[0].Kind)
	}
	if c.Source() != "test.yaml" {
		t.Errorf("source %q", c.Source())
	}
}

func TestLoadSeedTierOverrides(t *testing.T) {
	c := mustLoad(t, `
backoff: {base: 20ms}
tiers:
  - name: safety
    budget: 30ms
    breaker: {cooldown: 5s}
  - name: knowledge
    backoff: {jitter: 0, factor: 3}
    retry_on: [transient, downstream]
  - name: custom
    budget: 80ms
`)
	s, k, x := c.Tiers[0], c.Tiers[1], c.Tiers[2]
	if s.Budget != 30*time.Millisecond || s.MaxAttempts != 1 || s.Breaker.FailureThreshold != 2 || s.Breaker.Cooldown != 5*time.Second || s.Breaker.HalfOpenSuccesses != 3 {
		t.Errorf("safety %+v", s)
	}
	if k.Budget != 200*time.Millisecond || k.Backoff.Base != 20*time.Millisecond || k.Backoff.Factor != 3 || k.Backoff.Jitter != 0 || k.Backoff.Max != 100*time.Millisecond {
		t.Errorf("knowledge %+v", k)
	}
	if !slices.Equal(k.RetryOn, []fault.Kind{fault.KindTransient, fault.KindDownstream}) {
		t.Errorf("retry_on %v", k.RetryOn)
	}
	if x.Budget != 80*time.Millisecond || x.MaxAttempts != 1 || x.Breaker.FailureThreshold != 5 || x.Breaker.Cooldown != 30*time.Second {
		t.Errorf("custom %+v", x)
	}
	ec, _, _ := c.Engine()
	if ec.Tiers[1].Retryable != fault.SetOf(fault.KindTransient, fault.KindDownstream) || ec.Tiers[0].Breaker.TripOn != fault.AllFaults {
		t.Errorf("engine tiers %+v", ec.Tiers)
	}
}

func TestLoadNamedBreakerDefaults(t *testing.T) {
	c := mustLoad(t, `
breakers:
  llm-provider: {failure_threshold: 3, cooldown: 10s}
modules:
  - {name: planner, tier: planning, breaker: llm-provider}
`)
	b := c.Breakers["llm-provider"]
	if b.FailureThreshold != 3 || b.Cooldown != 10*time.Second || b.HalfOpenProbes != 1 ||
		!slices.Equal(b.TripOn, []fault.Kind{fault.KindTransient, fault.KindDownstream}) {
		t.Fatalf("breaker %+v", b)
	}
}

func TestLoadEnvironmentAndFlags(t *testing.T) {
	t.Setenv("CYCLED_HTTP_ADDR", "0.0.0.0:9090")
	t.Setenv("CYCLED_CYCLE_PERIOD", "250ms")
	t.Setenv("CYCLED_LOG_LEVEL", "debug")
	t.Setenv("CYCLED_HTTP_ADMIN_TOKEN", "s3cret")
	t.Setenv("CYCLED_EMERGENCY_SKIP_TIERS", "planning, execution")
	t.Setenv("CYCLED_STATE_DIR", "/var/lib/cycled")
	t.Setenv("CYCLED_CYCLE_REALTIME_PRIORITY", "10")
	t.Setenv("CYCLED_HTTP_READ_LIMIT_RATE", "0")
	t.Setenv("CYCLED_HTTP_READ_LIMIT_MAX_WAIT", "250ms")
	path := writeFile(t, "c.yaml", minimal+"log: {level: warn, format: json}\n")
	t.Setenv("CYCLED_CONFIG", path)

	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Source() != path || c.HTTP.Addr != "0.0.0.0:9090" || c.Cycle.Period != 250*time.Millisecond ||
		c.Log.Level != "debug" || c.Log.Format != "json" || c.HTTP.AdminToken != "s3cret" || c.StateDir != "/var/lib/cycled" || c.Cycle.RealtimePriority != 10 ||
		!slices.Equal(c.Emergency.SkipTiers, []string{"planning", "execution"}) ||
		c.HTTP.ReadLimit != (config.ReadLimitConfig{Rate: 0, Burst: 20, MaxWait: 250 * time.Millisecond}) {
		t.Fatalf("environment not applied: %+v", c)
	}

	// A flag set on the command line beats the environment; an unset one does not count.
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Parse([]string{"--period", "0", "--http-addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	c, err = config.Load(config.WithFlags(fs))
	if err != nil {
		t.Fatal(err)
	}
	if c.Cycle.Period != 0 || c.HTTP.Addr != "127.0.0.1:0" || c.Log.Level != "debug" {
		t.Fatalf("flags: period %v addr %q level %q", c.Cycle.Period, c.HTTP.Addr, c.Log.Level)
	}

	// A bad value from the environment names the path and the variable.
	t.Setenv("CYCLED_CYCLE_PERIOD", "fast")
	_, err = config.Load()
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Path != "cycle.period" || !strings.Contains(ps[0].Message, "env CYCLED_CYCLE_PERIOD") {
		t.Fatalf("problems %v", ps)
	}
}

func TestLoadConfigFlagSelectsFile(t *testing.T) {
	path := writeFile(t, "c.yaml", "cycle: {period: 0}\n")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(config.WithFlags(fs), config.WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	if c.Source() != path || c.Cycle.Period != 0 {
		t.Fatalf("source %q period %v", c.Source(), c.Cycle.Period)
	}
	if _, err := config.Load(config.WithFile(filepath.Join(t.TempDir(), "missing.yaml"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestLoadNoFileIsDemo(t *testing.T) {
	c, err := config.Load(config.WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	if c.Source() != config.DemoSource || len(c.Modules) == 0 {
		t.Fatalf("source %q with %d modules", c.Source(), len(c.Modules))
	}
}

func TestLoadRejections(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		paths []string
		msg   string // in the first problem's message
	}{
		{"unknown key with path", "tiers:\n  - name: safety\n    budegt: 50ms\n", []string{"tiers[0].budegt"}, `unknown key (did you mean "budget"?) (line 3)`},
		{"unknown top-level key", "cylce: {period: 1s}\n", []string{"cylce"}, "unknown key"},
		{"bad duration", "cycle: {period: fast}\n", []string{"cycle.period"}, `invalid duration "fast"`},
		{"duration without unit", "lastgood: {default_ttl: 5}\n", []string{"lastgood.default_ttl"}, "give a unit"},
		{"bad nested duration", minimal + "    ttl: soon\n", []string{"modules[0].ttl"}, "invalid ttl"},
		{"three mistakes, three paths", `
cycle: {period: 1 second}
tiers:
  - name: safety
    budegt: 50ms
  - name: extra
modules:
  - {name: m, tier: safety, builtin: {fail_rate: 2}}
`, []string{"cycle.period", "tiers[0].budegt", "modules[0].builtin.fail_rate", "tiers[1].budget"}, ""},
		{"values over their bounds", `
tiers:
  - {name: safety, budget: 50ms}
  - {name: knowledge, budget: 50ms, max_attempts: 1000000000}
modules:
  - {name: a, tier: knowledge, every: 1000000000000000000, max_attempts: 1000000000, builtin: {latency: 1000000h, hang: 1000000h}}
`, []string{"modules[0].builtin.latency", "modules[0].builtin.hang", "modules[0].every", "modules[0].max_attempts", "tiers[1].max_attempts"}, "must be at most 1h0m0s"},
		{"budget must be positive", "tiers:\n  - {name: safety, budget: 0s}\n", []string{"tiers[0].budget"}, "must be > 0"},
		{"wrong shapes", "tiers: {name: safety}\nmodules: [1]\n", []string{"tiers", "modules[0]"}, "want a list"},
		{"http url", `
modules:
  - {name: a, tier: planning, kind: http, http: {url: 'ftp://x/'}}
  - {name: b, tier: planning, kind: http, http: {url: '/tick'}}
  - {name: c, tier: planning, kind: http}
  - {name: d, tier: planning, kind: http, http: {url: 'http://u:pw@x/'}}
`, []string{"modules[0].http.url", "modules[1].http.url", "modules[2].http.url", "modules[3].http.url"}, `scheme "ftp" is not supported`},
		{"http limits", "modules:\n  - {name: p, tier: planning, kind: http, http: {url: 'https://x', max_body: 1GiB, timeout: -1s}}\n",
			[]string{"modules[0].http.max_body", "modules[0].http.timeout"}, "at most 64MiB"},
		{"http shapes", "modules:\n  - {name: p, tier: planning, kind: http, http: {url: 'http://x', max_body: lots, retries: 2}}\n",
			[]string{"modules[0].http.max_body", "modules[0].http.retries"}, "invalid size"},
		{"http with builtin settings", "modules:\n  - {name: p, tier: planning, kind: http, http: {url: 'http://x'}, builtin: {value: 1}}\n",
			[]string{"modules[0].builtin"}, "only valid with kind: builtin"},
		{"http settings without the kind", "modules:\n  - {name: p, tier: planning, http: {url: 'http://x'}}\n",
			[]string{"modules[0].http"}, "only valid with kind: http"},
		{"unknown kind", "modules:\n  - {name: m, tier: planning, kind: grpc}\n", []string{"modules[0].kind"}, "unknown kind"},
		{"builtin ranges", `
modules:
  - name: m
    tier: planning
    builtin: {fail_rate: -0.1, latency: 5ms-1ms, fail_ticks: [[9, 3], [0, 2]], fail_attempts: -1, hang: -1s}
`, []string{"modules[0].builtin.latency", "modules[0].builtin.fail_rate", "modules[0].builtin.fail_ticks[0]", "modules[0].builtin.fail_ticks[1]",
			"modules[0].builtin.fail_attempts", "modules[0].builtin.hang"}, ""},
		{"fail_ticks shape", "modules:\n  - {name: m, tier: planning, builtin: {fail_ticks: [3, 9]}}\n",
			[]string{"modules[0].builtin.fail_ticks[0]", "modules[0].builtin.fail_ticks[1]"}, "want a list of 2 items"},
		{"not a number", "backoff: {factor: .nan}\n", []string{"backoff.factor"}, "finite"},
		{"http and log", "http: {addr: nowhere}\nlog: {level: loud, format: xml}\n", []string{"http.addr", "log.level", "log.format"}, ""},
		{"read limit", "http: {read_limit: {rate: -1, burst: -1, max_wait: -1s}}\n",
			[]string{"http.read_limit.rate", "http.read_limit.burst", "http.read_limit.max_wait"}, ""},
		{"read limit rate not a number", "http: {read_limit: {rate: .inf}}\n", []string{"http.read_limit.rate"}, ""},
		{"engine problems keep their paths", `
modules:
  - {name: a, tier: nowhere}
  - {name: a, tier: safety, breaker: ghost}
`, []string{"modules[1].name", "modules[0].tier", "modules[1].writes", "modules[1].breaker"}, ""},
		{"unknown fault kind", "tiers:\n  - {name: safety, retry_on: [flaky]}\n", []string{"tiers[0].retry_on[0]"}, "unknown fault kind"},
		{"breaker zero", "breakers:\n  b: {failure_threshold: 0}\n", []string{"breakers.b.failure_threshold"}, "must be >= 1"},
		// The breaker's and the backoff's own rules (Settings.CheckExplicit): in a file a zero
		// is a value written, never a silent default, in a tier as at the top level.
		{"tier backoff zero factor", "tiers:\n  - {name: safety, backoff: {factor: 0}}\n", []string{"tiers[0].backoff.factor"}, "must be >= 1"},
		{"top-level backoff zero factor", "backoff: {factor: 0}\n", []string{"backoff.factor"}, "must be >= 1"},
		{"tier breaker zero cooldown", "tiers:\n  - {name: safety, breaker: {cooldown: 0s, half_open_successes: 0}}\n",
			[]string{"tiers[0].breaker.cooldown", "tiers[0].breaker.half_open_successes"}, ""},
		{"bool", "emergency: {latch: yes}\n", []string{"emergency.latch"}, "want true or false"},
		{"realtime priority too high", "cycle: {realtime_priority: 100}\n", []string{"cycle.realtime_priority"}, "must be 0 (off) or a SCHED_FIFO priority from 1 to 99"},
		{"realtime priority negative", "cycle: {realtime_priority: -1}\n", []string{"cycle.realtime_priority"}, "must be 0 (off)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wantRejected(t, tt.yaml, tt.paths, tt.msg)
			if !strings.Contains(err.Error(), "test.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

func TestLoadSyntaxErrors(t *testing.T) {
	for _, y := range []string{"cycle: {period: 1s\n", "- a\n- b\n", "just a string", "a: b\n  c: d\n\t- x"} {
		_, err := load(t, y)
		if !errors.Is(err, config.ErrSyntax) {
			t.Errorf("Load(%q) = %v, want ErrSyntax", y, err)
		}
	}
	if c := mustLoad(t, "{}"); len(c.Tiers) != 5 {
		t.Error("{} is not the defaults")
	}
}

// TestLoadEmpty: an empty file (or one of comments and blanks only, as a truncated or
// half-written file can be) is an error, not the defaults: those have no module at all.
func TestLoadEmpty(t *testing.T) {
	for _, y := range []string{"", "\n\n", "# only a comment\n", "---\n", "~\n"} {
		_, err := load(t, y)
		var ve *tiers.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Load(%q) = %v, want the configuration is empty", y, err)
		}
	}
}

func TestLoadAnchorsAndMerges(t *testing.T) {
	c := mustLoad(t, `
modules:
  - name: a
    tier: perception
    builtin: &common
      latency: 1ms-2ms
      fail_rate: 0.1
  - name: b
    tier: perception
    builtin:
      <<: *common
      fail_rate: 0.5
`)
	a, b := c.Modules[0].Builtin.Faults, c.Modules[1].Builtin.Faults
	if a.FailRate != 0.1 || b.FailRate != 0.5 || b.Latency != a.Latency {
		t.Fatalf("merge: a %+v b %+v", a, b)
	}
}

func TestLoadAdminTokenFile(t *testing.T) {
	tok := writeFile(t, "token", "  hunter2\n")
	c := mustLoad(t, "http: {admin_token_file: "+tok+"}\n")
	if c.HTTP.AdminToken != "hunter2" {
		t.Fatalf("token %q", c.HTTP.AdminToken)
	}
	_, err := load(t, "http: {admin_token: a, admin_token_file: "+tok+"}\n")
	if got := paths(problems(t, err)); !slices.Equal(got, []string{"http.admin_token_file"}) {
		t.Fatalf("both set: %v", got)
	}
	_, err = load(t, "http: {admin_token_file: /nonexistent/token}\n")
	if got := paths(problems(t, err)); !slices.Equal(got, []string{"http.admin_token_file"}) {
		t.Fatalf("missing file: %v", got)
	}
}

func TestRedacted(t *testing.T) {
	c := mustLoad(t, minimal+"http: {admin_token: s3cret}\n")
	b, err := json.Marshal(c.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if strings.Contains(s, "s3cret") || !strings.Contains(s, `"admin_token":"***"`) {
		t.Fatalf("token not redacted: %s", s)
	}
	for _, want := range []string{`"period":"100ms"`, `"budget":"50ms"`, `"name":"probe"`, `"fail_kind":"transient"`, `"trip_on":["validation","contract","transient","downstream","internal"]`} {
		if !strings.Contains(s, want) {
			t.Errorf("redacted view lacks %s:\n%s", want, s)
		}
	}
	if c.HTTP.AdminToken != "s3cret" {
		t.Fatal("Redacted changed the configuration")
	}
	c2 := mustLoad(t, minimal)
	b, _ = json.Marshal(c2.Redacted())
	if !strings.Contains(string(b), `"admin_token":""`) {
		t.Fatalf("unset token shown as %s", b)
	}
}

// TestRedactedSkipTiers: GET /config tells an absent emergency.skip_tiers (every tier
// after the first is skipped) from an explicit [] (none is), showing the effective list.
func TestRedactedSkipTiers(t *testing.T) {
	skip := func(yaml string) string {
		t.Helper()
		c := mustLoad(t, yaml)
		b, err := json.Marshal(c.Redacted().(map[string]any)["emergency"].(map[string]any)["skip_tiers"])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tt := range []struct{ yaml, want string }{
		{minimal, `["knowledge","perception","planning","execution"]`},
		{minimal + "emergency: {skip_tiers: []}\n", `[]`},
		{minimal + "emergency: {skip_tiers: [planning]}\n", `["planning"]`},
		{"tiers: [{name: safety}, {name: act, budget: 5ms}]\n", `["act"]`},
		{"tiers: [{name: safety}]\n", `[]`},
	} {
		if got := skip(tt.yaml); got != tt.want {
			t.Errorf("%q: skip_tiers %s, want %s", tt.yaml, got, tt.want)
		}
	}
	if c := mustLoad(t, minimal); c.Redacted() == nil || c.Emergency.SkipTiers != nil {
		t.Fatalf("Redacted changed the configuration: %q", c.Emergency.SkipTiers)
	}
}

func TestEngineConversionHTTP(t *testing.T) {
	c := mustLoad(t, `
modules:
  - {name: p, tier: planning, kind: http, reads: [x.result], http: {url: 'https://planner.internal:8443/tick?v=2', timeout: 30ms}}
  - {name: q, tier: planning, kind: http, idempotent: false, max_attempts: 1, http: {url: 'http://127.0.0.1:9000', max_body: 512KiB}}
  - {name: x, tier: safety}
`)
	ec, regs, ps := c.Engine()
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	if _, ps := cycle.Validate(ec, regs); len(ps.Errors()) != 0 {
		t.Fatal(ps)
	}
	p, ok := regs[0].Module.(*modules.HTTP)
	if !ok || !p.Settings().Equal(modules.HTTPSettings{URL: "https://planner.internal:8443/tick?v=2", MaxBody: 1 << 20, Timeout: 30 * time.Millisecond}) {
		t.Fatalf("p: %T %+v", regs[0].Module, p)
	}
	if q := regs[1].Module.(*modules.HTTP); q.Settings().MaxBody != 512<<10 {
		t.Fatalf("q: %+v", q.Settings())
	}
	// The transport may send a request again only for a module that may be retried.
	if !p.Replays() || regs[1].Module.(*modules.HTTP).Replays() {
		t.Fatalf("replays: p %v (idempotent by default), q %v (idempotent: false)", p.Replays(), regs[1].Module.(*modules.HTTP).Replays())
	}
	// The effective configuration shows the default max_body.
	b, _ := json.Marshal(c.Redacted())
	if !strings.Contains(string(b), `"max_body":"1MiB"`) || !strings.Contains(string(b), `"kind":"http"`) {
		t.Fatalf("redacted %s", b)
	}
}

func TestEngineConversion(t *testing.T) {
	c := mustLoad(t, `
cycle: {period: 0, overrun: catch_up, timing: precise}
emergency: {skip_tiers: [planning], latch: true}
modules:
  - name: m
    tier: knowledge
    writes: mem.out
    reads: [x.result]
    ttl: auto
    policy: abort
    on_open: fail
    idempotent: false
    max_attempts: 1
    every: 2
    priority: 5
    builtin: {value: {a: 1}}
  - {name: x, tier: safety, ttl: 2s}
`)
	ec, regs, ps := c.Engine()
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	if ec.Period != 0 || ec.Overrun.String() != "catch_up" || ec.Timing.String() != "precise" || !ec.Emergency.Latch ||
		!slices.Equal(ec.Emergency.SkipTiers, []string{"planning"}) {
		t.Fatalf("engine config %+v", ec)
	}
	s := regs[0].Spec
	if s.Writes != "mem.out" || !s.TTL.Auto || s.Policy != tiers.Abort || s.OnOpen != tiers.Fail || s.IsIdempotent() ||
		s.MaxAttempts != 1 || s.Every != 2 || s.Priority != 5 || regs[0].Module == nil {
		t.Fatalf("spec %+v", s)
	}
	if regs[1].Spec.TTL.Fixed != 2*time.Second {
		t.Fatalf("ttl %+v", regs[1].Spec.TTL)
	}
	// The reference spelling of skip_tiers: [] means "skip nothing", unlike absent.
	c = mustLoad(t, "emergency: {skip_tiers: []}\n")
	if ec, _, _ := c.Engine(); ec.Emergency.SkipTiers == nil {
		t.Fatal("skip_tiers: [] became nil (every tier after the first)")
	}
}

// TestSpinWarnings: a precise wait that never sleeps is a warning (a core spent), and
// one more at real-time priority (the kernel throttles it); neither rejects the configuration.
func TestSpinWarnings(t *testing.T) {
	for _, tt := range []struct {
		cycle string
		want  []string // warning paths
	}{
		{"{period: 1ms, timing: precise}", []string{"cycle.precise_margin"}},
		{"{period: 1ms, timing: precise, realtime_priority: 10}", []string{"cycle.precise_margin", "cycle.realtime_priority"}},
		{"{period: 1500us, timing: precise}", []string{"cycle.precise_margin"}},
		{"{period: 2ms, timing: precise, realtime_priority: 10}", nil},
		{"{period: 1ms, timing: precise, precise_margin: 500us, realtime_priority: 10}", nil},
		{"{period: 1ms, timing: coarse, realtime_priority: 10}", nil},
		{"{period: 0, timing: precise}", nil},
	} {
		t.Run(tt.cycle, func(t *testing.T) {
			c := mustLoad(t, "cycle: "+tt.cycle+"\n")
			ps := c.Validate()
			if len(ps.Errors()) != 0 {
				t.Fatalf("errors %v", ps.Errors())
			}
			if got := paths(ps.Warnings()); !slices.Equal(got, tt.want) {
				t.Fatalf("warnings %v, want paths %q", ps.Warnings(), tt.want)
			}
		})
	}
}

func TestWarningsDoNotReject(t *testing.T) {
	c := mustLoad(t, "modules:\n  - {name: m, tier: planning, reads: [nobody.result]}\n")
	ps := c.Validate()
	if len(ps.Errors()) != 0 || len(ps.Warnings()) != 1 || ps[0].Path != "modules[0].reads[0]" {
		t.Fatalf("problems %v", ps)
	}
}

func TestLoadAdminTokens(t *testing.T) {
	file := writeFile(t, "carol", "  carol-token\n")
	c := mustLoad(t, "http:\n  admin_token: shared\n  admin_tokens:\n    - {name: alice, token: alice-token}\n    - {name: carol, token_file: "+file+"}\n")
	got := c.HTTP.AdminTokens
	if len(got) != 2 || got[0].Name != "alice" || got[0].Token != "alice-token" || got[1].Name != "carol" || got[1].Token != "carol-token" {
		t.Fatalf("tokens %+v", got)
	}
	b, err := json.Marshal(c.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, "alice-token") || strings.Contains(s, "carol-token") || !strings.Contains(s, `"name":"alice"`) {
		t.Fatalf("named tokens not redacted: %s", s)
	}
	if c.HTTP.AdminTokens[0].Token != "alice-token" {
		t.Fatal("Redacted changed the configuration")
	}

	for _, tc := range []struct {
		name, tokens string
		want         []string
	}{
		{"no name", "[{token: a}]", []string{"http.admin_tokens[0].name"}},
		{"bad name", "[{name: 'a b', token: a}]", []string{"http.admin_tokens[0].name"}},
		{"duplicate name", "[{name: a, token: x}, {name: a, token: y}]", []string{"http.admin_tokens[1].name"}},
		{"no token", "[{name: a}]", []string{"http.admin_tokens[0].token"}},
		{"both", "[{name: a, token: x, token_file: " + file + "}]", []string{"http.admin_tokens[0].token_file"}},
		{"shared token", "[{name: a, token: x}, {name: b, token: x}]", []string{"http.admin_tokens[1].token"}},
		{"same as admin_token", "[{name: a, token: shared}]", []string{"http.admin_tokens[0].token"}},
		{"unreadable file", "[{name: a}, {name: b, token_file: /nonexistent/token}]", []string{"http.admin_tokens[0].token", "http.admin_tokens[1].token_file"}},
		{"unknown key", "[{name: a, tokn: x}]", []string{"http.admin_tokens[0].token", "http.admin_tokens[0].tokn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, "http: {admin_token: shared, admin_tokens: "+tc.tokens+"}\n")
			got := paths(problems(t, err))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("problems at %v, want %v (%v)", got, tc.want, err)
			}
		})
	}
}

// TestUpperBounds: every bounded duration beyond its bound is an error naming its path and
// line; at the bound it is accepted.
func TestUpperBounds(t *testing.T) {
	for _, tc := range []struct{ name, yaml, path string }{
		{"period", "cycle: {period: 876000h}\n", "cycle.period"},
		{"budget", "tiers:\n  - name: safety\n    budget: 2h\n", "tiers[0].budget"},
		{"tier cooldown", "tiers:\n  - name: safety\n    breaker: {cooldown: 90m}\n", "tiers[0].breaker.cooldown"},
		{"named cooldown", "breakers:\n  db: {cooldown: 2h}\n", "breakers.db.cooldown"},
		{"default ttl", "lastgood: {default_ttl: 25h}\n", "lastgood.default_ttl"},
		{"module ttl", "modules:\n  - name: m\n    tier: safety\n    ttl: 48h\n", "modules[0].ttl"},
		{"startup", "startup: {timeout: 2h}\n", "startup.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.WithData([]byte(tc.yaml), "t.yaml"), config.WithoutEnv())
			var ve *tiers.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Load: %v, want a validation error", err)
			}
			found := false
			for _, p := range ve.Problems {
				if p.Path == tc.path && strings.Contains(p.Message, "upper bound") && strings.Contains(p.Message, "(line ") {
					found = true
				}
			}
			if !found {
				t.Errorf("problems %v, want %s beyond its upper bound with its line", ve.Problems, tc.path)
			}
		})
	}
	if _, err := config.Load(config.WithData([]byte("cycle: {period: 1h}\nlastgood: {default_ttl: 24h}\n"), "t.yaml"), config.WithoutEnv()); err != nil {
		t.Errorf("values at their bounds: %v", err)
	}
}

// TestLoadDuplicateKeys: a key given twice in one mapping is an error naming its path and
// both lines, at the top and deeper; a merge key's entries may still be overridden.
func TestLoadDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ name, yaml, path, lines string }{
		{"sections", "cycle: {period: 10ms}\nmodules: []\ncycle: {period: 1h}\n", "cycle", "lines 1 and 3"},
		{"breakers", "breakers:\n  db: {cooldown: 1s}\n  db: {cooldown: 2s}\n", "breakers.db", "lines 2 and 3"},
		{"module field", "modules:\n  - name: a\n    tier: safety\n    tier: knowledge\n", "modules[0].tier", "lines 3 and 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			var ve *tiers.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Load: %v, want a validation error", err)
			}
			for _, p := range ve.Problems {
				if p.Path == tc.path && strings.Contains(p.Message, "duplicate key") && strings.Contains(p.Message, tc.lines) {
					return
				}
			}
			t.Errorf("problems %v, want a duplicate key at %s (%s)", ve.Problems, tc.path, tc.lines)
		})
	}
}
