package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The shedding and startup sections and priority: critical reach the
// engine's configuration; absent sections leave both off.
func TestLoadSheddingAndStartup(t *testing.T) {
	c := mustLoad(t, `
shedding: {after_overruns: 2, restore_after: 5, floor: 7, target: 40ms}
startup: {timeout: 3s}
modules:
  - {name: guard, tier: knowledge, priority: critical, builtin: {value: 1}}
  - {name: extra, tier: planning, priority: -3, builtin: {value: 2}}
`)
	ec, regs, ps := c.Engine()
	if len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	if sh := ec.Shedding; sh == nil || sh.AfterOverruns != 2 || sh.RestoreAfter != 5 || sh.Floor == nil || *sh.Floor != 7 || sh.Target != 40*time.Millisecond {
		t.Fatalf("shedding = %+v", ec.Shedding)
	}
	if ec.Startup == nil || ec.Startup.Timeout != 3*time.Second {
		t.Fatalf("startup = %+v", ec.Startup)
	}
	if !regs[0].Spec.Critical || regs[1].Spec.Critical || regs[1].Spec.Priority != -3 {
		t.Fatalf("specs = %+v, %+v", regs[0].Spec, regs[1].Spec)
	}
	ec, _, _ = mustLoad(t, minimal).Engine()
	if ec.Shedding != nil || ec.Startup != nil {
		t.Fatalf("absent sections: shedding %+v startup %+v, want both off", ec.Shedding, ec.Startup)
	}
}

func TestLoadSheddingAndStartupErrorsNamePaths(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		paths      []string
		msg        string
	}{
		{"negative shedding", "shedding: {after_overruns: -1, restore_after: -2, target: -1s}\n",
			[]string{"shedding.after_overruns", "shedding.restore_after", "shedding.target"}, "must be >= 0"},
		{"negative startup timeout", "startup: {timeout: -1s}\n", []string{"startup.timeout"}, "must be >= 0"},
		{"bad priority", "modules:\n  - {name: m, tier: planning, priority: urgent}\n", []string{"modules[0].priority"}, "integer or critical"},
		{"unknown shedding key", "shedding: {after: 3}\n", []string{"shedding.after"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml)
			ps := problems(t, err)
			if got := paths(ps.Errors()); !slices.Equal(got, tt.paths) {
				t.Fatalf("paths %q, want %q\n%v", got, tt.paths, err)
			}
			if !strings.Contains(ps[0].Message, tt.msg) {
				t.Fatalf("message %q does not contain %q", ps[0].Message, tt.msg)
			}
		})
	}
}
