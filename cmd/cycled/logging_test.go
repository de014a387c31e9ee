package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const flakyStep = `
cycle: {period: 0}
emergency: {recover_after: 1}
tiers:
  - {name: safety, breaker: {failure_threshold: 5}}
  - name: knowledge
    max_attempts: 1
    breaker: {failure_threshold: 2, cooldown: 1h}
modules:
  - {name: guard, tier: safety, builtin: {fail_ticks: [[3, 3]]}}
  - {name: flaky, tier: knowledge, builtin: {fail_rate: 1}}
  - {name: fine, tier: knowledge}
`

// logTicks runs ticks of flakyStep with the daemon's event logging at level and returns
// the log.
func logTicks(t *testing.T, level string, ticks int) string {
	t.Helper()
	cfg, err := config.Load(config.WithData([]byte(flakyStep+"log: {level: "+level+", format: json}\n"), "t.yaml"), config.WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	log, _ := newLogger(cfg.Log, &buf)
	events := newEventLog(log)
	ec, regs, _ := cfg.Engine()
	e, err := cycle.New(ec, regs, cycle.WithHooks(events.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	for range ticks {
		if _, err := e.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()
	events.Close()
	return buf.String()
}

func TestStateChangesLoggedOnce(t *testing.T) {
	out := logTicks(t, "info", 10)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	count := func(s string) int {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}
	if n := count(`"level":"warn","ts"`); n != 2 {
		t.Errorf("%d warn lines, want 2 (breaker opened, emergency entered):\n%s", n, out)
	}
	if count(`"msg":"circuit breaker opened","breaker":"flaky"`) != 1 || count(`"msg":"emergency mode entered"`) != 1 ||
		count(`"msg":"emergency mode left"`) != 1 || count("configuration applied") != 1 {
		t.Errorf("missing or repeated state changes:\n%s", out)
	}
	if len(lines) != 4 {
		t.Errorf("%d lines for 10 ticks, want 4 (one per state change, none per module per tick):\n%s", len(lines), out)
	}
	if debug := logTicks(t, "debug", 10); !strings.Contains(debug, `"msg":"module did not succeed","module":"flaky"`) {
		t.Errorf("debug level does not log module failures:\n%s", debug)
	}
}
