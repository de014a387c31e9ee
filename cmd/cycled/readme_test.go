package main

import (
	"os"
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
