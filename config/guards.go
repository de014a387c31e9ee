package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cycled/cycled/cycle"
)

// SheddingConfig configures load shedding on overrun (key "shedding"; see
// cycle.SheddingConfig). Its presence turns shedding on.
type SheddingConfig struct {
	// AfterOverruns is how many consecutive overrunning ticks shed one more step (default 3).
	AfterOverruns int `yaml:"after_overruns"`
	// RestoreAfter is how many consecutive ticks that fit restore one step (default 10).
	RestoreAfter int `yaml:"restore_after"`
	// Floor, if set, is the priority at or above which modules are never shed.
	Floor *int `yaml:"floor"`
	// Target is the wall time a tick must fit in (default: the period; required in step mode).
	Target time.Duration `yaml:"target"`
}

// StartupConfig configures the startup state (key "startup"; see cycle.StartupConfig). Its
// presence turns it on.
type StartupConfig struct {
	// Timeout enters emergency mode ("startup_timeout") if startup has not ended this long
	// after the first tick; 0: no timeout.
	Timeout time.Duration `yaml:"timeout"`
}

func (c *SheddingConfig) engine() *cycle.SheddingConfig {
	if c == nil {
		return nil
	}
	return &cycle.SheddingConfig{AfterOverruns: c.AfterOverruns, RestoreAfter: c.RestoreAfter, Floor: c.Floor, Target: c.Target}
}

func (c *StartupConfig) engine() *cycle.StartupConfig {
	if c == nil {
		return nil
	}
	return &cycle.StartupConfig{Timeout: c.Timeout}
}

// Priority is a module's priority: an integer (higher runs first within its tier and is
// shed later), or "critical", which is never shed.
type Priority struct {
	Value    int
	Critical bool
}

// MarshalText encodes p as its integer or "critical".
func (p Priority) MarshalText() ([]byte, error) {
	if p.Critical {
		return []byte("critical"), nil
	}
	return []byte(strconv.Itoa(p.Value)), nil
}

// JSONScalars says that a JSON body gives a priority as an integer or a string.
func (*Priority) JSONScalars() ([]string, string) {
	return []string{"!!int", "!!str"}, "an integer or \"critical\""
}

// UnmarshalText parses an integer, "critical", or "" (0).
func (p *Priority) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch s {
	case "":
		*p = Priority{}
		return nil
	case "critical":
		*p = Priority{Critical: true}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("invalid priority %q (want an integer or critical)", s)
	}
	*p = Priority{Value: n}
	return nil
}
