package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCurlPostsJSON checks that every curl command in README.md (and in the demo
// configuration's comments) that sends a body declares it as JSON: curl -d sends
// application/x-www-form-urlencoded, which the admin routes answer with 415.
func TestReadmeCurlPostsJSON(t *testing.T) {
	for _, name := range []string{"../../README.md", "../../config/demo.yaml"} {
		checkCurlPostsJSON(t, name)
	}
}

func checkCurlPostsJSON(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "curl ") {
			continue
		}
		_, cmd, _ := strings.Cut(line, "curl ")
		cmd, _, _ = strings.Cut(cmd, " #") // the command, not its comment
		sendsBody := false
		for _, f := range strings.Fields(cmd) {
			if f == "-d" || strings.HasPrefix(f, "--data") || strings.HasPrefix(f, "--json") {
				sendsBody = true
			}
		}
		if sendsBody && !strings.Contains(cmd, "Content-Type: application/json") && !strings.Contains(cmd, "--json") {
			t.Errorf("%s:%d: curl sends a body without -H 'Content-Type: application/json': %s", name, i+1, strings.TrimSpace(cmd))
		}
	}
}

// TestDocLinksResolve checks that every relative link of README.md, SECURITY.md,
// BENCHMARKS.md and docs/*.md names a file or directory of the repository.
func TestDocLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "SECURITY.md"), filepath.Join(root, "BENCHMARKS.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(md), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s: link %q does not resolve inside the repository", rel, m[1])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the pattern is wrong")
	}
}

// TestCIRunsTheReadmeTestCommand: the README's test command is what CI runs, and it
// installs what its tests need itself: .ci/run calls make test and installs nothing of its
// own (scripts/test-deps does, for make test and so for CI), and the Makefile's test target
// runs test-deps first and the alert rules' unit tests.
func TestCIRunsTheReadmeTestCommand(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, ci, mk, deps := read("README.md"), read(".ci/run"), read("Makefile"), read("scripts/test-deps")
	if !regexp.MustCompile("(?m)^make test +#").MatchString(readme) {
		t.Fatal("README.md: no `make test` line in its first block")
	}
	if !regexp.MustCompile(`(?m)^make test$`).MatchString(ci) {
		t.Error(".ci/run does not run the README's test command, make test")
	}
	for _, own := range []string{"apt-get", "pip ", "python3 -m pytest", "chromium"} {
		if strings.Contains(ci, own) {
			t.Errorf(".ci/run installs or probes %q itself: that belongs to scripts/test-deps, which make test runs", own)
		}
	}
	if !regexp.MustCompile(`(?m)^test: test-deps\b`).MatchString(mk) || !strings.Contains(mk, "TEST_DEPS ?= scripts/test-deps") {
		t.Error("Makefile: make test does not run scripts/test-deps first")
	}
	if !regexp.MustCompile(`(?m)^test-check: test-rules\b`).MatchString(mk) {
		t.Error("Makefile: make test does not run the alert rules' unit tests (test-check: test-rules)")
	}
	for _, pkg := range []string{"python3-pytest", "chromium", "prometheus"} {
		if !strings.Contains(deps, pkg) {
			t.Errorf("scripts/test-deps does not install %s", pkg)
		}
	}
}
