package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/internal/strictdecode"
	"github.com/cycled/cycled/tiers"
)

//go:embed demo.yaml
var demoYAML []byte

// DemoSource is the Source of the embedded demo configuration.
const DemoSource = "embedded demo"

// DemoYAML returns the embedded demo configuration file, which the daemon runs when no
// configuration file is given.
func DemoYAML() []byte { return append([]byte(nil), demoYAML...) }

// Demo returns the embedded demo configuration, without environment overrides.
func Demo() (*Config, error) {
	return Load(WithData(demoYAML, DemoSource), WithoutEnv())
}

// ErrSyntax is wrapped by the error of Load when the file is not well-formed YAML (or its
// top level is not a mapping). Every other rejection is a *tiers.ValidationError whose
// problems name a field path.
var ErrSyntax = errors.New("invalid YAML")

// ErrRead is wrapped by the error of Load when the configuration file cannot be read:
// it is missing, not a regular file (a directory), unreadable, or larger than
// MaxFileSize.
var ErrRead = errors.New("configuration file cannot be read")

// readError is a failure to read the configuration file: its message is msg and err's,
// and it wraps both ErrRead and err.
type readError struct {
	msg string
	err error
}

func (e *readError) Error() string   { return e.msg + ": " + e.err.Error() }
func (e *readError) Unwrap() []error { return []error{ErrRead, e.err} }

// MaxFileSize caps the size of a configuration file.
const MaxFileSize = 4 << 20

// envKeys are the keys that the environment (CYCLED_<KEY with . as _>) and bound flags
// can override. Lists of tiers and modules come from the file only.
var envKeys = []string{
	"cycle.period", "cycle.overrun", "cycle.catch_up_max", "cycle.history", "cycle.timing", "cycle.precise_margin",
	"cycle.realtime_priority",
	"backoff.base", "backoff.factor", "backoff.max", "backoff.jitter",
	"emergency.skip_tiers", "emergency.latch", "emergency.recover_after",
	"lastgood.default_ttl",
	"http.addr", "http.admin_token", "http.admin_token_file",
	"http.read_limit.rate", "http.read_limit.burst", "http.read_limit.max_wait", "http.cache_bytes",
	"http.admin_limit.rate", "http.admin_limit.burst", "http.max_runtime_modules",
	"log.level", "log.format",
	"state_dir",
	"recorder.enabled", "recorder.flush", "recorder.keep_ticks", "recorder.keep_for", "recorder.max_bytes",
	"ha.etcd.endpoints", "ha.etcd.username", "ha.etcd.password", "ha.election", "ha.lease_ttl", "ha.node", "ha.advertise",
	"export.nats.url", "export.nats.stream", "export.nats.subject",
	"tracing.endpoint", "tracing.service_name", "tracing.sampler", "tracing.sampler_arg", "tracing.queue_size",
}

// EnvVar returns the environment variable that overrides key ("http.addr" →
// "CYCLED_HTTP_ADDR").
func EnvVar(key string) string {
	return "CYCLED_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flagKeys maps the common flags to their keys.
var flagKeys = map[string]string{
	"http-addr": "http.addr",
	"log-level": "log.level",
	"period":    "cycle.period",
	"config":    "config",
}

// RegisterFlags defines the common flags on fs: --config, --http-addr, --log-level and
// --period. Pass fs to Load with WithFlags; a flag given on the command line overrides the
// environment, which overrides the file.
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "configuration file (YAML); default $CYCLED_CONFIG, else the embedded demo")
	fs.String("http-addr", "", "listen address of the HTTP API (http.addr), e.g. 127.0.0.1:8080")
	fs.String("log-level", "", "log level: debug, info, warn or error (log.level)")
	fs.String("period", "", "tick period (cycle.period), e.g. 100ms; 0 is step mode")
}

// LoadOption configures Load.
type LoadOption interface{ apply(*loadOptions) }

type loadOptions struct {
	file    string
	data    []byte
	dataSrc string
	flags   *pflag.FlagSet
	noEnv   bool
}

type loadOptionFunc func(*loadOptions)

func (f loadOptionFunc) apply(o *loadOptions) { f(o) }

// WithFile loads the configuration from path, whatever --config or CYCLED_CONFIG say.
func WithFile(path string) LoadOption {
	return loadOptionFunc(func(o *loadOptions) { o.file = path })
}

// WithData loads the configuration from data (YAML); name is its Source.
func WithData(data []byte, name string) LoadOption {
	return loadOptionFunc(func(o *loadOptions) { o.data, o.dataSrc = data, name })
}

// WithFlags takes --config and the overrides from fs (defined with RegisterFlags); only
// flags set on the command line count.
func WithFlags(fs *pflag.FlagSet) LoadOption {
	return loadOptionFunc(func(o *loadOptions) { o.flags = fs })
}

// WithoutEnv ignores the environment (CYCLED_CONFIG and every override).
func WithoutEnv() LoadOption { return loadOptionFunc(func(o *loadOptions) { o.noEnv = true }) }

// Load reads the configuration: the file (WithData, WithFile, --config or CYCLED_CONFIG,
// in that order; the embedded demo when none is given), then the environment overrides
// (CYCLED_HTTP_ADDR, CYCLED_CYCLE_PERIOD, …: CYCLED_ and the key with '.' as '_'), then the
// flags. Keys the file omits take Defaults. It validates the result whole.
//
// Decoding is strict: an unknown key is an error naming its path ("tiers[0].budegt:
// unknown key"), and so is a value that does not parse ("cycle.period: invalid duration").
// Every problem of the file is reported at once in a *tiers.ValidationError; a file that is
// not YAML gives an error wrapping ErrSyntax, and a file that cannot be read one wrapping
// ErrRead.
//
// Viper supplies the environment and flag layer. The file itself is decoded from YAML
// directly, because viper lower-cases every key, which would corrupt builtin values and
// breaker names, and loses the positions needed for field paths.
func Load(opts ...LoadOption) (*Config, error) {
	var o loadOptions
	for _, op := range opts {
		op.apply(&o)
	}
	v := viper.New()
	if !o.noEnv {
		v.SetEnvPrefix("CYCLED")
		v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
		for _, k := range append([]string{"config"}, envKeys...) {
			if err := v.BindEnv(k); err != nil {
				return nil, fmt.Errorf("bind env %s: %w", k, err)
			}
		}
	}
	if o.flags != nil {
		for name, key := range flagKeys {
			if f := o.flags.Lookup(name); f != nil {
				if err := v.BindPFlag(key, f); err != nil {
					return nil, fmt.Errorf("bind flag --%s: %w", name, err)
				}
			}
		}
	}

	data, src := o.data, o.dataSrc
	switch {
	case data != nil:
	case o.file != "":
		src = o.file
	case v.GetString("config") != "":
		src = v.GetString("config")
	default:
		data, src = demoYAML, DemoSource
	}
	if data == nil {
		var err error
		if data, err = readFile(src); err != nil {
			return nil, err
		}
	}
	return parse(data, src, overridesOf(v, o.flags))
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &readError{msg: "read configuration", err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &readError{msg: "read configuration " + path, err: err}
	}
	if len(data) > MaxFileSize {
		return nil, &readError{msg: "read configuration " + path, err: fmt.Errorf("larger than %d bytes", MaxFileSize)}
	}
	return data, nil
}

// override is a value of the environment or a flag that replaces the file's.
type override struct{ key, value, origin string }

// overridesOf returns the overrides found in v: for each key, the flag if set on the
// command line, else the environment variable.
func overridesOf(v *viper.Viper, fs *pflag.FlagSet) []override {
	var out []override
	for _, key := range envKeys {
		if !v.IsSet(key) {
			continue
		}
		origin := "env " + EnvVar(key)
		for name, k := range flagKeys {
			if k == key && fs != nil {
				if f := fs.Lookup(name); f != nil && f.Changed {
					origin = "flag --" + name
				}
			}
		}
		out = append(out, override{key: key, value: v.GetString(key), origin: origin})
	}
	return out
}

// parse decodes data, applies the overrides, resolves the defaults and validates.
func parse(data []byte, src string, overrides []override) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("parse %s: %w: %w", src, ErrSyntax, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	switch {
	case doc.Kind == 0 || doc.Kind == yaml.DocumentNode || strictdecode.IsNull(doc):
		// An empty file is a file being written, truncated or emptied by mistake: taken as
		// the defaults, it would replace every module, the safety tier's included.
		return nil, fmt.Errorf("%s: %w", src, &tiers.ValidationError{Problems: tiers.Problems{{Path: "(top level)",
			Message: "the configuration is empty (no keys); write at least the modules, or {} for every default"}}})
	case doc.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("parse %s: %w: the top level must be a mapping of keys (cycle, tiers, modules, …)", src, ErrSyntax)
	}
	d := strictdecode.NewYAML()
	for _, ov := range overrides {
		inject(d, doc, ov.key, ov.value, ov.origin)
	}
	cfg := Defaults()
	cfg.source = src
	d.Decode(doc, cfg, "")
	cfg.resolve(d.Present)
	if cfg.HTTP.AdminTokenFile != "" && cfg.HTTP.AdminToken == "" {
		tok, err := readToken(cfg.HTTP.AdminTokenFile)
		if err != nil {
			d.Problems = append(d.Problems, tiers.Problem{Path: "http.admin_token_file", Message: err.Error()})
		} else {
			cfg.HTTP.AdminToken = tok
			cfg.tokenFromFile = true
		}
	}
	d.Problems = append(d.Problems, cfg.HTTP.readTokenFiles()...)
	validated := cfg.Validate()
	for i, p := range validated {
		for _, ov := range overrides {
			if p.Path == ov.key || strings.HasPrefix(p.Path, ov.key+"[") {
				validated[i].Message += " (from " + ov.origin + ")"
			}
		}
	}
	ps := mergeProblems(d.Problems, withLines(validated, doc))
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return cfg, nil
}

// inject sets key (dotted) to the scalar s in mapping root, creating mappings on the way.
// A list key takes a comma-separated value.
func inject(d *strictdecode.Decoder, root *yaml.Node, key, s, origin string) {
	parts := strings.Split(key, ".")
	m := root
	for i, part := range parts {
		var val *yaml.Node
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == part {
				val = m.Content[j+1]
			}
		}
		last := i == len(parts)-1
		if val == nil || (!last && val.Kind != yaml.MappingNode) {
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part}
			val = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			m.Content = append(m.Content, k, val)
		}
		if last {
			if key == "emergency.skip_tiers" || key == "ha.etcd.endpoints" { // lists, comma-separated
				*val = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
				for _, t := range strings.Split(s, ",") {
					if t = strings.TrimSpace(t); t != "" {
						n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}
						d.Origins[n] = origin
						val.Content = append(val.Content, n)
					}
				}
			} else {
				*val = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
			}
			d.Origins[val] = origin
			return
		}
		m = val
	}
}

func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4097))
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	if len(b) > 4096 {
		return "", errors.New("admin token file is larger than 4 KiB")
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("admin token file is empty")
	}
	return tok, nil
}

// mergeProblems appends the validation problems to the decoding ones, dropping those at or
// under a path that already failed to decode (its value is a default, not the user's).
func mergeProblems(decoded, validated tiers.Problems) tiers.Problems {
	out := append(tiers.Problems(nil), decoded...)
	for _, p := range validated {
		shadowed := false
		for _, q := range decoded {
			if q.Path != "" && (p.Path == q.Path || strings.HasPrefix(p.Path, q.Path+".") || strings.HasPrefix(p.Path, q.Path+"[")) {
				shadowed = true
				break
			}
		}
		if !shadowed {
			out = append(out, p)
		}
	}
	return out
}

// readTokenFiles reads the token of every named admin token that has a token_file (and no
// token beside it: Validate reports that); each unreadable file is a problem at its path.
func (h *HTTPConfig) readTokenFiles() tiers.Problems {
	var ps tiers.Problems
	for i := range h.AdminTokens {
		t := &h.AdminTokens[i]
		if t.TokenFile == "" || t.Token != "" {
			continue
		}
		tok, err := readToken(t.TokenFile)
		if err != nil {
			ps = append(ps, tiers.Problem{Path: fmt.Sprintf("http.admin_tokens[%d].token_file", i), Message: err.Error()})
			continue
		}
		t.Token, t.fromFile = tok, true
	}
	return ps
}
