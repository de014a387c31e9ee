package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/tiers"
)

var testSettings = settings{history: 300, token: "t0ken", stateDir: "/tmp/state"}

// The generated variants load, and every invalid file is rejected by the loader the
// daemon uses, so that the reloader's expectations (200, 422) hold.
func TestGeneratedConfigurations(t *testing.T) {
	mods := genModules()
	if n := len(mods) + 1; n < 45 || n > 55 {
		t.Fatalf("%d modules, want about 50", n)
	}
	yamls := map[string]string{}
	for _, v := range variants {
		yamls[v.marker] = render(v, mods, testSettings)
	}
	b, err := newBook(yamls)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		c := b.variantConfig(v.marker)
		if len(c.Tiers) != 5 || len(c.Modules) != len(mods)+1 {
			t.Fatalf("variant %s: %d tiers, %d modules", v.name, len(c.Tiers), len(c.Modules))
		}
		var sum time.Duration
		for _, tr := range c.Tiers {
			sum += tr.Budget
		}
		if sum > 9*time.Millisecond {
			t.Fatalf("variant %s: budgets add up to %s, more than the 10ms period allows", v.name, sum)
		}
		// The random actors run against bulkheads and retry budgets.
		bulkheads := 0
		for _, m := range c.Modules {
			if m.Bulkhead != "" {
				bulkheads++
			}
		}
		if len(c.RetryBudgets) != 2 || bulkheads != 3 {
			t.Fatalf("variant %s: %d retry budgets, %d modules with a bulkhead; want 2 and 3", v.name, len(c.RetryBudgets), bulkheads)
		}
	}
	for k := range 6 {
		kind, y := invalid(k, variants[k%2], mods, testSettings)
		if y == render(variants[k%2], mods, testSettings) {
			t.Fatalf("invalid %d (%s) did not change the file", k, kind)
		}
		_, err := config.Load(config.WithData([]byte(y), "bad.yaml"), config.WithoutEnv())
		var ve *tiers.ValidationError
		if err == nil || !(errors.As(err, &ve) || errors.Is(err, config.ErrSyntax)) {
			t.Fatalf("invalid %d (%s): %v", k, kind, err)
		}
	}
}

// configFor recognises the variant and the runtime modules of a summary.
func TestBookConfigFor(t *testing.T) {
	mods := genModules()
	b, err := newBook(map[string]string{"cfg_a": render(variants[0], mods, testSettings), "cfg_b": render(variants[1], mods, testSettings)})
	if err != nil {
		t.Fatal(err)
	}
	s := &faultsummary.Summary{TickID: 7}
	var lines []faultsummary.Module
	for _, m := range mods {
		lines = append(lines, faultsummary.Module{Name: m.name})
	}
	s.SetModules(append(lines, faultsummary.Module{Name: "cfg_b"}, faultsummary.Module{Name: "remote_1"}))
	if _, _, err := b.configFor(s); err == nil || !strings.Contains(err.Error(), "remote_1") {
		t.Fatalf("an unknown runtime module: %v", err)
	}
	b.addRuntime("remote_1", []byte(`{"name": "remote_1", "tier": "planning", "kind": "http", "http": {"url": "http://127.0.0.1:1/m"}}`))
	c, marker, err := b.configFor(s)
	if err != nil || marker != "cfg_b" || len(c.Modules) != len(mods)+2 {
		t.Fatalf("configFor: %v %s %d modules", err, marker, len(c.Modules))
	}
	s.SetModules(append(s.Modules(), faultsummary.Module{Name: "cfg_a"}))
	if _, _, err := b.configFor(s); err == nil {
		t.Fatal("two markers accepted")
	}
}

func TestJudge(t *testing.T) {
	// A minute of samples, one a second.
	noisy := make([]float64, 60)
	for i := range noisy {
		noisy[i] = 65 + float64((i*7)%11) - 5 // ±5 around 65
	}
	if tr := judge(noisy, goroutineRel, goroutineAbs); !tr.bounded || tr.max != 70 {
		t.Fatalf("noise judged growing: %+v", tr)
	}
	leak := make([]float64, 60)
	for i := range leak {
		leak[i] = 65 + float64(i) // one goroutine a second
	}
	if tr := judge(leak, goroutineRel, goroutineAbs); tr.bounded {
		t.Fatalf("a goroutine a second judged bounded: %+v", tr)
	}
	mem := make([]float64, 60)
	for i := range mem {
		mem[i] = 40<<20 + float64(i)*0.8*(1<<20) // 0.8 MiB a second
	}
	if tr := judge(mem, rssRel, rssAbs); tr.bounded {
		t.Fatalf("0.8 MiB a second judged bounded: %+v", tr)
	}
	five := make([]float64, 300)
	for i := range five {
		five[i] = 40<<20 + float64(i)*0.2*(1<<20) // 0.2 MiB a second for five minutes
	}
	if tr := judge(five, rssRel, rssAbs); tr.bounded {
		t.Fatalf("0.2 MiB a second for five minutes judged bounded: %+v", tr)
	}
	if tr := judge([]float64{1, 2, 3}, goroutineRel, goroutineAbs); !tr.bounded || tr.n != 3 {
		t.Fatalf("short: %+v", tr)
	}
}

func TestETagID(t *testing.T) {
	for tag, want := range map[string]uint64{`"m1x2-42"`: 42, `W/"abc-7"`: 7, "abc-19": 19} {
		if got, ok := etagID(tag); !ok || got != want {
			t.Errorf("etagID(%s) = %d %v", tag, got, ok)
		}
	}
	if _, ok := etagID(`"nodash"`); ok {
		t.Error("a tag without an id accepted")
	}
}

// The op log holds back the ticks an operator action may show in until it is recorded.
func TestOpLogBarrier(t *testing.T) {
	l := newOpLog()
	c := check.New(check.Config{})
	tok := l.begin(10)
	l.before(10, c) // tick 10 was published before the action: not held back
	done := make(chan struct{})
	go func() {
		l.before(11, c)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("tick 11 checked while an action after tick 10 is pending")
	case <-time.After(50 * time.Millisecond):
	}
	l.end(tok, op{breaker: "b", lo: 10, hi: 12}, true)
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("tick 11 still held back after the action was recorded")
	}
}

func TestStallProbeSplit(t *testing.T) {
	p := &stallProbe{}
	t0 := time.Now()
	p.stalls = []stall{{from: t0.Add(100 * time.Millisecond), to: t0.Add(140 * time.Millisecond)}}
	in := violation{Violation: check.Violation{Rule: check.RuleTierBudget}, started: t0.Add(130 * time.Millisecond), finished: t0.Add(150 * time.Millisecond)}
	out := violation{Violation: check.Violation{Rule: check.RuleTierBudget}, started: t0.Add(300 * time.Millisecond), finished: t0.Add(310 * time.Millisecond)}
	other := violation{Violation: check.Violation{Rule: check.RuleEvery}, started: in.started, finished: in.finished}
	real, excused := p.split([]violation{in, out, other})
	if len(excused) != 1 || len(real) != 2 || real[0].started != out.started || real[1].Rule != check.RuleEvery {
		t.Fatalf("real %v, excused %v", real, excused)
	}
}
