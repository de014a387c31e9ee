package sim_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files instead of comparing with them: run
//
//	go test ./sim/ -run Golden -update     (or UPDATE_GOLDEN=1 go test ./sim/ -run Golden)
//
// when a change of the engine's rules changes what the demo does, and review the diff of
// testdata/*.golden before committing it (docs/sim.md, "Golden reports").
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func updating() bool { return *update || os.Getenv("UPDATE_GOLDEN") == "1" }

// The demo's report over 6000 ticks (ten minutes at 10 Hz) is the one kept in testdata.
func TestGoldenDemoReport(t *testing.T) {
	_, rep := runDemo(t, 6000, 1, nil)
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "demo-6000.report.golden", text.Bytes())
	golden(t, "demo-6000.report.json.golden", js.Bytes())
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updating() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update or UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the report (first difference at byte %d); if the engine's rules changed on purpose, run with -update and review the diff\n--- got:\n%s",
			path, firstDiff(got, want), got)
	}
}
