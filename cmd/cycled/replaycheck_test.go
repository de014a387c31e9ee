package main

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cycled/cycled/daemon/recorder"
)

// tamper rewrites the recorded summary of tick id with edit, as an older version that
// decided differently would have written it.
func tamper(t *testing.T, state string, id int, edit func(string) string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(state, recorder.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var z []byte
	if err := db.QueryRow(`SELECT summary FROM ticks WHERE id = ?`, id).Scan(&z); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(edit(string(body))))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE ticks SET summary = ? WHERE id = ?`, buf.Bytes(), id); err != nil {
		t.Fatal(err)
	}
}

// The real daemon's database replays with no difference (exit 0); a tick recorded with a
// decision the current rules do not make is listed with its tick, module and field (exit 1).
func TestReplayCheck(t *testing.T) {
	state := t.TempDir()
	cfg := write(t, "rec.yaml", strings.ReplaceAll(strings.Replace(recorderConfig, "period: 10ms", "period: 0", 1), "STATE", state))
	d := start(t, nil, "--config", cfg)
	var s summary
	for range 4 {
		d.do("POST", "/ticks", "{}", &s)
	}
	if code, _ := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--check", "--state", state}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "4 ticks checked, 0 differences") {
		t.Fatalf("replay --check: %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"replay", "--json", "--state", state}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), `"kind":"decision_rules"`) || !strings.Contains(out.String(), `"recall":{"policy":"degrade"`) {
		t.Fatalf("the daemon did not record its decision rules: %d\n%s", code, out.String())
	}
	tamper(t, state, 2, func(js string) string {
		if !strings.Contains(js, `"status":"retried"`) {
			t.Fatalf("tick 2 has no retried line: %s", js)
		}
		return strings.Replace(js, `"status":"retried"`, `"status":"ok"`, 1)
	})
	out.Reset()
	if code := run([]string{"replay", "--check", "--json", "--state", state, "--from", "2", "--to", "3"}, &out, &errb); code != exitError {
		t.Fatalf("replay --check on a changed tick: exit %d; want 1\n%s%s", code, out.String(), errb.String())
	}
	var diff struct {
		TickID     uint64 `json:"tick_id"`
		Module     string `json:"module"`
		Field      string `json:"field"`
		Recorded   string `json:"recorded"`
		Recomputed string `json:"recomputed"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &diff); err != nil ||
		diff.TickID != 2 || diff.Module != "recall" || diff.Field != "status" || diff.Recorded != "ok" || diff.Recomputed != "retried" {
		t.Fatalf("first difference: %+v %v\n%s", diff, err, out.String())
	}
}
