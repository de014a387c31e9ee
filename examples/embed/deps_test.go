package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// heavy are the module paths that must never reach a program that embeds only the engine:
// the daemon's optional parts (etcd and the grpc it brings, NATS, SQLite, the browser
// driver, OpenTelemetry) live in modules of their own.
var heavy = []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/nats-io/", "modernc.org/sqlite",
	"github.com/chromedp/", "go.opentelemetry.io/"}

// TestEmbedderModuleGraph builds testdata/embedder, a program of a few lines that imports
// only cycle and tiers, as its own module against this repository, runs it, and lists its
// module graph: none of the heavy modules may be in it.
func TestEmbedderModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "main.go"} {
		b, err := os.ReadFile(filepath.Join("testdata", "embedder", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			msg := err.Error()
			if ee, ok := err.(*exec.ExitError); ok {
				msg += "\n" + string(ee.Stderr)
			}
			t.Fatalf("go %s: %s", strings.Join(args, " "), msg)
		}
		return string(out)
	}
	goCmd("mod", "edit", "-replace", "github.com/cycled/cycled="+root)
	goCmd("mod", "tidy")
	if out := goCmd("run", "."); out != "1 ok\n" {
		t.Fatalf("embedder printed %q, want %q", out, "1 ok\n")
	}
	mods := strings.Fields(goCmd("list", "-m", "-f", "{{.Path}}", "all"))
	for _, m := range mods {
		for _, h := range heavy {
			if strings.HasPrefix(m, h) {
				t.Errorf("an embedder's module graph lists %s", m)
			}
		}
	}
	t.Logf("an embedder's module graph: %d modules", len(mods))
}
