package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cycled/cycled/internal/strictdecode"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

// The upper bounds of the configuration's durations that no policy package owns (a
// breaker's cooldown is bounded by breaker.MaxCooldown, a module's ttl by
// lastgood.MaxTTL). A value beyond one is an error, in the file (validate, a reload: the
// running configuration stays) and in a registration: a period of years would leave the
// scheduler asleep for good.
const (
	// MaxPeriod bounds cycle.period: the longest time between two ticks.
	MaxPeriod = time.Hour
	// MaxBudget bounds a tier's budget, a module's timeouts (timeout, http.timeout) and
	// startup.timeout.
	MaxBudget = time.Hour
)

// checkBounds reports every duration of c beyond its upper bound.
func (c *Config) checkBounds(add func(string, string, ...any)) {
	over := func(path string, d, limit time.Duration) {
		if d > limit {
			add(path, "%v is beyond the upper bound of %v", d, limit)
		}
	}
	over("cycle.period", c.Cycle.Period, MaxPeriod)
	over("lastgood.default_ttl", c.LastGood.DefaultTTL, lastgood.MaxTTL)
	if c.Startup != nil {
		over("startup.timeout", c.Startup.Timeout, MaxBudget)
	}
	for i, t := range c.Tiers {
		over(fmt.Sprintf("tiers[%d].budget", i), t.Budget, MaxBudget)
	}
}

// checkBounds reports every timeout of m beyond its upper bound, with paths under p.
func (m ModuleConfig) checkBounds(p string, add func(string, string, ...any)) {
	if m.Timeout > MaxBudget {
		add(strictdecode.Join(p, "timeout"), "%v is beyond the upper bound of %v", m.Timeout, MaxBudget)
	}
	if m.HTTP != nil && m.HTTP.Timeout > MaxBudget {
		add(strictdecode.Join(p, "http.timeout"), "%v is beyond the upper bound of %v", m.HTTP.Timeout, MaxBudget)
	}
}

// withLines appends to each problem without a position the line of the node its path
// names in doc, when there is one: a check made after decoding knows the path only.
func withLines(ps tiers.Problems, doc *yaml.Node) tiers.Problems {
	for i, p := range ps {
		if strings.Contains(p.Message, "(line ") || strings.Contains(p.Message, "(from ") {
			continue
		}
		if n := nodeAt(doc, p.Path); n != nil && n.Line > 0 {
			ps[i].Message += fmt.Sprintf(" (line %d)", n.Line)
		}
	}
	return ps
}

// nodeAt returns the node at path ("tiers[0].breaker.cooldown") in mapping doc, or the
// deepest node on the way that exists (nil: none). Quoted keys are not followed.
func nodeAt(doc *yaml.Node, path string) *yaml.Node {
	var found *yaml.Node
	n := doc
	for _, seg := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		n = child(n, key)
		if n == nil {
			return found
		}
		found = n
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return found
			}
			n = n.Content[i]
			found = n
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return found
}

// child returns the value of key in mapping n (its last occurrence), or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var v *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v = n.Content[i+1]
		}
	}
	return v
}
