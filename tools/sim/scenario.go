package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/internal/didyoumean"
	"github.com/cycled/cycled/internal/strictdecode"
	"github.com/cycled/cycled/tiers"
	"go.yaml.in/yaml/v3"
)

// Scenario is a timeline of events played against a configuration.
type Scenario struct {
	// Name names the scenario in the report.
	Name string `yaml:"name"`
	// StandIn is the behaviour of the stand-ins of http modules until an event changes it
	// (default: answer at once with success).
	StandIn Behaviour `yaml:"stand_in"`
	// Events are played in the order of their time; events at the same time in file order.
	Events []Event `yaml:"events"`
	// Replace makes every module a stand-in driven by the scenario alone, builtin modules
	// included (their configured latency and faults are ignored): for replaying behaviour
	// observed elsewhere, as advise --from does.
	Replace bool `yaml:"replace"`

	dir     string                    // the scenario file's directory: reload paths are relative to it
	reloads map[string]*config.Config // the configurations reloads name, loaded by Check
}

// Behaviour is what a module does on top of (builtin) or instead of (http stand-in) its
// configuration. Unset fields leave the behaviour as it was.
type Behaviour struct {
	// Latency replaces the latency of every attempt.
	Latency *Dist `yaml:"latency"`
	// FailRate is the probability that an attempt fails.
	FailRate *float64 `yaml:"fail_rate"`
	// FailKind is the fault kind of those failures (default transient).
	FailKind *fault.Kind `yaml:"fail_kind"`
	// Hang blocks every attempt this long, ignoring its context.
	Hang *time.Duration `yaml:"hang"`
	// Panic makes every attempt panic.
	Panic *bool `yaml:"panic"`
}

// Event is one change at a tick or a virtual time. It sets exactly one of: a module's
// behaviour (module with behaviour fields, or restore), an outage, a reload, a reset, a
// period.
type Event struct {
	// Tick applies the event before this tick starts (ticks count from 1).
	Tick uint64 `yaml:"tick"`
	// At applies the event once this much virtual time has passed since the start.
	At *time.Duration `yaml:"at"`
	// Module names the module whose behaviour changes.
	Module string `yaml:"module"`
	// Behaviour is the module's new behaviour.
	Behaviour `yaml:",inline"`
	// Restore returns the module to its configured behaviour.
	Restore bool `yaml:"restore"`
	// Outage makes every module that names a breaker fail.
	Outage *Outage `yaml:"outage"`
	// Reload replaces the configuration by another file (relative to the scenario's).
	Reload string `yaml:"reload"`
	// Reset is an operator reset.
	Reset *Reset `yaml:"reset"`
	// Period changes the scheduler's period.
	Period *time.Duration `yaml:"period"`
}

// Outage is a downstream outage: every module naming the breaker fails with Kind.
type Outage struct {
	// Breaker is the named breaker (or a module's own, by the module's name).
	Breaker string `yaml:"breaker"`
	// Kind is the fault kind of the failures (default transient).
	Kind *fault.Kind `yaml:"kind"`
	// Ticks is how many ticks it lasts (events given by tick); 0 with For 0: to the end.
	Ticks uint64 `yaml:"ticks"`
	// For is how long it lasts (events given by time).
	For time.Duration `yaml:"for"`
}

// Reset is an operator reset.
type Reset struct {
	// Emergency resets a latched emergency (as POST /emergency/reset).
	Emergency bool `yaml:"emergency"`
	// Breaker closes the named breaker (as POST /breakers/{name}/reset).
	Breaker string `yaml:"breaker"`
}

// ErrScenario is wrapped by every error of a scenario that cannot be read or parsed.
var ErrScenario = errors.New("invalid scenario")

// LoadScenario reads and decodes a scenario file. Check validates it against a
// configuration.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := ParseScenario(data, path)
	if err != nil {
		return nil, err
	}
	sc.dir = filepath.Dir(path)
	return sc, nil
}

// ParseScenario decodes a scenario from YAML; name names it in errors. Unknown keys and
// wrong types are errors with their paths (a *tiers.ValidationError).
func ParseScenario(data []byte, name string) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrScenario, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: %w: the top level must be a mapping (name, stand_in, events)", name, ErrScenario)
	}
	d := strictdecode.NewYAML()
	sc := &Scenario{dir: "."}
	d.Decode(doc, sc, "")
	if err := d.Problems.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return sc, nil
}

// Check validates sc against cfg: every field, every module and breaker named, every
// configuration a reload names (loaded now). It returns every problem with its path.
func (sc *Scenario) Check(cfg *config.Config) error {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	ps = append(ps, sc.StandIn.check("stand_in")...)
	sc.reloads = map[string]*config.Config{}
	cfgs := []*config.Config{cfg}
	for i, ev := range sc.Events {
		if ev.Reload == "" {
			continue
		}
		c, err := config.Load(config.WithFile(sc.path(ev.Reload)), config.WithoutEnv())
		if err != nil {
			add(fmt.Sprintf("events[%d].reload", i), "%v", err)
			continue
		}
		sc.reloads[ev.Reload] = c
		cfgs = append(cfgs, c)
	}
	mods, breakers := namesOf(cfgs)
	for i, ev := range sc.Events {
		ps = append(ps, ev.check(fmt.Sprintf("events[%d]", i), mods, breakers)...)
	}
	return ps.Err()
}

func (sc *Scenario) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(sc.dir, p)
}

// namesOf returns the module names and breaker names (named breakers and modules' own)
// of every configuration the scenario may run under.
func namesOf(cfgs []*config.Config) (mods, breakers []string) {
	for _, c := range cfgs {
		for _, m := range c.Modules {
			mods = append(mods, m.Name)
			breakers = append(breakers, m.Name)
			if m.Breaker != "" {
				breakers = append(breakers, m.Breaker)
			}
		}
		for n := range c.Breakers {
			breakers = append(breakers, n)
		}
	}
	slices.Sort(mods)
	slices.Sort(breakers)
	return slices.Compact(mods), slices.Compact(breakers)
}

func (b Behaviour) set() bool {
	return b.Latency != nil || b.FailRate != nil || b.FailKind != nil || b.Hang != nil || b.Panic != nil
}

func (b Behaviour) check(p string) tiers.Problems {
	var ps tiers.Problems
	if b.Latency != nil {
		ps = append(ps, b.Latency.check(strictdecode.Join(p, "latency"))...)
	}
	if r := b.FailRate; r != nil && !(*r >= 0 && *r <= 1) {
		ps = append(ps, tiers.Problem{Path: strictdecode.Join(p, "fail_rate"), Message: "must be in [0, 1]"})
	}
	if h := b.Hang; h != nil && (*h < 0 || *h > maxLatency) {
		ps = append(ps, tiers.Problem{Path: strictdecode.Join(p, "hang"), Message: fmt.Sprintf("must be in [0, %s]", maxLatency)})
	}
	return ps
}

// check validates one event under path p.
func (ev Event) check(p string, mods, breakers []string) tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case ev.Tick == 0 && ev.At == nil:
		add(p, "give tick (a tick id from 1) or at (a virtual time such as 30s)")
	case ev.Tick > 0 && ev.At != nil:
		add(p+".at", "give tick or at, not both")
	case ev.At != nil && *ev.At < 0:
		add(p+".at", "must be >= 0")
	}
	kinds := 0
	if ev.Module != "" || ev.Behaviour.set() || ev.Restore {
		kinds++
		ps = append(ps, ev.checkModule(p, mods)...)
	}
	if ev.Outage != nil {
		kinds++
		ps = append(ps, ev.checkOutage(p+".outage", breakers)...)
	}
	if ev.Reload != "" {
		kinds++
	}
	if ev.Reset != nil {
		kinds++
		r := ev.Reset
		switch {
		case r.Emergency == (r.Breaker != ""):
			add(p+".reset", "give emergency: true or breaker: NAME")
		case r.Breaker != "" && !slices.Contains(breakers, r.Breaker):
			add(p+".reset.breaker", "unknown breaker %q%s", r.Breaker, suggest(r.Breaker, breakers))
		}
	}
	if ev.Period != nil {
		kinds++
		if *ev.Period < 0 {
			add(p+".period", "must be >= 0 (0 is step mode)")
		}
	}
	if kinds != 1 {
		add(p, "an event does exactly one thing: a module's behaviour, outage, reload, reset or period (got %d)", kinds)
	}
	return ps
}

func (ev Event) checkModule(p string, mods []string) tiers.Problems {
	var ps tiers.Problems
	switch {
	case ev.Module == "":
		ps = append(ps, tiers.Problem{Path: p + ".module", Message: "name the module whose behaviour changes"})
	case !slices.Contains(mods, ev.Module):
		ps = append(ps, tiers.Problem{Path: p + ".module", Message: fmt.Sprintf("unknown module %q%s", ev.Module, suggest(ev.Module, mods))})
	}
	if ev.Restore && ev.Behaviour.set() {
		ps = append(ps, tiers.Problem{Path: p + ".restore", Message: "restore takes no other behaviour fields"})
	}
	if !ev.Restore && !ev.Behaviour.set() && ev.Module != "" {
		ps = append(ps, tiers.Problem{Path: p, Message: "give a behaviour (latency, fail_rate, fail_kind, hang, panic) or restore: true"})
	}
	return append(ps, ev.Behaviour.check(p)...)
}

func (ev Event) checkOutage(p string, breakers []string) tiers.Problems {
	var ps tiers.Problems
	o := ev.Outage
	switch {
	case o.Breaker == "":
		ps = append(ps, tiers.Problem{Path: p + ".breaker", Message: "name the breaker whose downstream is out"})
	case !slices.Contains(breakers, o.Breaker):
		ps = append(ps, tiers.Problem{Path: p + ".breaker", Message: fmt.Sprintf("unknown breaker %q%s", o.Breaker, suggest(o.Breaker, breakers))})
	}
	if ev.At != nil && o.Ticks > 0 {
		ps = append(ps, tiers.Problem{Path: p + ".ticks", Message: "an event given by at lasts for a duration: use for"})
	}
	if ev.Tick > 0 && o.For > 0 {
		ps = append(ps, tiers.Problem{Path: p + ".for", Message: "an event given by tick lasts for ticks: use ticks"})
	}
	if o.For < 0 {
		ps = append(ps, tiers.Problem{Path: p + ".for", Message: "must be >= 0"})
	}
	return ps
}

func suggest(s string, names []string) string { return didyoumean.Hint(s, names) }
