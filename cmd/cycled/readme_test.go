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
