package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

const reloadBase = `
cycle: {period: 0}
modules:
  - {name: a, tier: perception, builtin: {value: 1}}
`

// startFromFile starts a step-mode engine from the file at path and returns it with its
// Reloader.
func startFromFile(t *testing.T, path string, opts ...config.ReloaderOption) (*cycle.Engine, *config.Reloader) {
	t.Helper()
	c, err := config.Load(config.WithFile(path), config.WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	ec, regs, _ := c.Engine()
	e, err := cycle.New(ec, regs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	opts = append([]config.ReloaderOption{config.WithLoadOptions(config.WithFile(path), config.WithoutEnv())}, opts...)
	return e, config.NewReloader(c, regs, e, opts...)
}

func moduleNames(e *cycle.Engine) []string {
	var out []string
	for _, m := range e.Modules() {
		out = append(out, m.Spec.Name)
	}
	return out
}

func TestReloaderKeepsOldConfigOnBadFile(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	e, r := startFromFile(t, path)
	old := r.Current()
	ctx := context.Background()

	bad := map[string]func(error) bool{
		"tiers:\n  - {name: safety, budegt: 1ms}\n": func(err error) bool {
			return len(problems(t, err)) > 0 && strings.Contains(err.Error(), "tiers[0].budegt")
		},
		"cycle: {period: [\n": func(err error) bool { return errors.Is(err, config.ErrSyntax) },
	}
	for content, check := range bad {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		err := r.Reload(ctx)
		if err == nil || !check(err) {
			t.Fatalf("Reload of %q = %v", content, err)
		}
		if r.Current() != old || r.LastError() == nil {
			t.Fatal("a failed reload replaced the configuration or lost its error")
		}
		if _, err := e.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if got := moduleNames(e); len(got) != 1 || got[0] != "a" {
			t.Fatalf("engine modules after a failed reload: %v", got)
		}
	}
	view, _ := json.Marshal(r.View())
	if !strings.Contains(string(view), `"ok":false`) || !strings.Contains(string(view), `"source":"`+path) {
		t.Fatalf("view does not show the failed reload: %s", view)
	}

	// A good file is applied at the next tick boundary and clears the error.
	if err := os.WriteFile(path, []byte(reloadBase+"  - {name: b, tier: planning}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if r.LastError() != nil || r.Current() == old {
		t.Fatal("a good reload did not take")
	}
	if _, err := e.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := moduleNames(e); len(got) != 2 {
		t.Fatalf("engine modules after reload: %v", got)
	}
}

func TestReloaderRejectsWhatTheEngineRejects(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	e, r := startFromFile(t, path)
	reg, err := config.DecodeModule([]byte(`{"name": "b", "tier": "planning"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(reg); err != nil {
		t.Fatal(err)
	}
	// The file now declares "b" too: a conflict with the runtime registration.
	if err := os.WriteFile(path, []byte(reloadBase+"  - {name: b, tier: planning}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = r.Reload(context.Background())
	if ps := problems(t, err); !strings.Contains(ps[0].Message, "duplicate module") {
		t.Fatalf("Reload = %v", err)
	}
	if last := r.Last(); last == nil || last.OK || len(last.Problems) == 0 {
		t.Fatalf("last reload %+v", last)
	}
}

func TestReloaderKeepsUnchangedModulesAndTheirFaults(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase+"  - {name: c, tier: planning, builtin: {value: 3}}\n")
	e, r := startFromFile(t, path, config.OnReload(func(res config.ReloadResult) {}))
	instance := func(name string) *modules.Builtin {
		m, _ := e.Module(name)
		b, _ := m.Module.(*modules.Builtin)
		return b
	}
	a0, c0 := instance("a"), instance("c")
	if _, err := modules.ApplyFaultsJSON(a0, []byte(`{"fail_rate": 1}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(reloadBase+"  - {name: c, tier: planning, builtin: {value: 4}}\nlog: {level: debug, format: json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if instance("a") != a0 || instance("a").Faults().FailRate != 1 {
		t.Fatal("an unchanged module was rebuilt or lost its injected faults")
	}
	if instance("c") == c0 {
		t.Fatal("a changed module kept its old instance")
	}
	if got := r.Last().RestartRequired; len(got) != 1 || got[0] != "log.format" {
		t.Fatalf("restart required %v", got)
	}
}

func TestReloaderWatchesTheFile(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	results := make(chan config.ReloadResult, 16)
	_, r := startFromFile(t, path, config.OnReload(func(res config.ReloadResult) { results <- res }))
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan error)
	go func() { watching <- r.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-watching; err != nil {
			t.Error(err)
		}
	}()

	// The watch starts asynchronously: rewrite the file until a reload reports it.
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	content := reloadBase + "  - {name: b, tier: planning}\n"
	for {
		select {
		case res := <-results:
			if res.Trigger != "file" || !res.OK {
				t.Fatalf("reload %+v", res)
			}
			if len(r.Current().Modules) != 2 {
				t.Fatal("the watched change was not loaded")
			}
			return
		case <-tick.C:
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("no reload after the file changed")
		}
	}
}

func TestReloaderKeepsUnchangedHTTPModules(t *testing.T) {
	const mods = `  - {name: r, tier: planning, kind: http, http: {url: 'http://127.0.0.1:1/r'}}
  - {name: s, tier: planning, kind: http, http: {url: 'http://127.0.0.1:1/s', max_body: 1KiB}}
`
	path := writeFile(t, "c.yaml", reloadBase+mods)
	e, r := startFromFile(t, path)
	instance := func(name string) *modules.HTTP {
		m, _ := e.Module(name)
		h, _ := m.Module.(*modules.HTTP)
		return h
	}
	r0, s0 := instance("r"), instance("s")
	if r0 == nil || s0 == nil {
		t.Fatal("http modules not built")
	}
	changed := strings.Replace(mods, "max_body: 1KiB", "max_body: 2KiB", 1)
	if err := os.WriteFile(path, []byte(reloadBase+changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if instance("r") != r0 {
		t.Error("an unchanged http module was rebuilt")
	}
	if instance("s") == s0 || instance("s").Settings().MaxBody != 2048 {
		t.Error("a changed http module kept its old instance")
	}
}

// TestReloaderRealtimePriorityNeedsRestart: the daemon sets its threads' scheduling once,
// at start; a reload that changes the priority is applied otherwise and says so.
func TestReloaderRealtimePriorityNeedsRestart(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	_, r := startFromFile(t, path)
	changed := strings.Replace(reloadBase, "cycle: {period: 0}", "cycle: {period: 0, realtime_priority: 20}", 1)
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.Last().RestartRequired; len(got) != 1 || got[0] != "cycle.realtime_priority" {
		t.Fatalf("restart required %v, want [cycle.realtime_priority]", got)
	}
	if r.Current().Cycle.RealtimePriority != 0 {
		t.Fatalf("the configuration in force shows priority %d, want 0 until a restart", r.Current().Cycle.RealtimePriority)
	}
	v := r.View().(map[string]any)
	if got, _ := v["restart_required"].([]string); !slices.Equal(got, []string{"cycle.realtime_priority"}) {
		t.Errorf("GET /config restart_required %v, want [cycle.realtime_priority]", v["restart_required"])
	}
}

// TestReloaderHistoryNeedsRestart: the engine sizes its tick history once, when it is
// created; a reload that changes cycle.history must not answer as if it applied.
func TestReloaderHistoryNeedsRestart(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	e, r := startFromFile(t, path)
	before := e.History().Cap()
	changed := strings.Replace(reloadBase, "cycle: {period: 0}", "cycle: {period: 0, history: 5}", 1)
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.Last().RestartRequired; len(got) != 1 || got[0] != "cycle.history" {
		t.Fatalf("restart required %v, want [cycle.history]", got)
	}
	if got := e.History().Cap(); got != before {
		t.Fatalf("history holds %d after the reload, want %d until a restart", got, before)
	}
}

// TestReloaderNamesRuntimeModules: the engine validates a reload with the modules
// registered at runtime appended to the file's, so a problem of a runtime module must name
// that module, not a "modules[2]" that the file does not have.
func TestReloaderNamesRuntimeModules(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	e, r := startFromFile(t, path)
	for _, body := range []string{`{"name": "rt0", "tier": "planning"}`, `{"name": "rt1", "tier": "knowledge"}`} {
		reg, err := config.DecodeModule([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(reloadBase, "cycle: {period: 0}",
		"cycle: {period: 0}\ntiers: [{name: safety}, {name: perception}, {name: planning}]", 1)
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	err := r.Reload(context.Background())
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("reload = %v, want a *tiers.ValidationError", err)
	}
	want := tiers.Problems{{Path: "runtime_modules[1].tier", Message: `runtime module "rt1": unknown tier "knowledge"`}}
	if got := r.Last().Problems; !slices.Equal(got, want) || !slices.Equal(ve.Problems, want) {
		t.Fatalf("problems %q (last %q), want %q", ve.Problems, got, want)
	}
	if got := moduleNames(e); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"a", "rt0", "rt1"}) {
		t.Fatalf("modules %q after a rejected reload", got)
	}
}

// TestNameRuntimeModules: only problems of runtime modules are renamed; the file's keep
// their paths, and other errors pass through.
func TestNameRuntimeModules(t *testing.T) {
	regs := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "a"}, Origin: cycle.FromConfig},
		{Spec: tiers.ModuleSpec{Name: "b"}, Origin: cycle.FromConfig},
		{Spec: tiers.ModuleSpec{Name: "rt"}, Origin: cycle.FromRuntime},
	}
	in := &tiers.ValidationError{Problems: tiers.Problems{
		{Path: "modules[1].tier", Message: "unknown tier \"x\""},
		{Path: "modules[2]", Message: "no implementation"},
		{Path: "modules[2].reads[0]", Message: "bad key"},
		{Path: "tiers[0].budget", Message: "must be > 0"},
	}}
	var ve *tiers.ValidationError
	if !errors.As(config.NameRuntimeModules(fmt.Errorf("register \"rt\": %w", in), regs), &ve) {
		t.Fatal("not a *tiers.ValidationError")
	}
	want := tiers.Problems{
		{Path: "modules[1].tier", Message: "unknown tier \"x\""},
		{Path: "runtime_modules[0]", Message: `runtime module "rt": no implementation`},
		{Path: "runtime_modules[0].reads[0]", Message: `runtime module "rt": bad key`},
		{Path: "tiers[0].budget", Message: "must be > 0"},
	}
	if !slices.Equal(ve.Problems, want) {
		t.Fatalf("problems %q, want %q", ve.Problems, want)
	}
	other := errors.New("boom")
	if got := config.NameRuntimeModules(other, regs); got != other {
		t.Fatalf("other error became %v", got)
	}
}

// A configuration file that cannot be read (gone, replaced by a directory, too large) is
// rejected like an invalid one: the error wraps ErrRead and names the file, and the
// running configuration stays.
func TestReloaderKeepsOldConfigOnUnreadableFile(t *testing.T) {
	path := writeFile(t, "c.yaml", reloadBase)
	_, r := startFromFile(t, path)
	old := r.Current()
	for _, tc := range []struct {
		name    string
		breakIt func() error
		want    string
	}{
		{"missing", func() error { return os.Remove(path) }, "no such file"},
		{"directory", func() error { return os.Mkdir(path, 0o700) }, "is a directory"},
		{"too large", func() error {
			return os.WriteFile(path, []byte("#"+strings.Repeat("x", config.MaxFileSize)+"\n"), 0o600)
		}, "larger than"},
	} {
		if err := tc.breakIt(); err != nil {
			t.Fatal(err)
		}
		err := r.Reload(context.Background())
		if !errors.Is(err, config.ErrRead) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Reload = %v, want ErrRead naming %s and %q", tc.name, err, path, tc.want)
		}
		if r.Current() != old {
			t.Errorf("%s: a failed reload replaced the configuration", tc.name)
		}
		if tc.name == "directory" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
	}
}
