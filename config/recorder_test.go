package config_test

import (
	"testing"
	"time"

	"github.com/cycled/cycled/config"
)

func TestRecorderDefaults(t *testing.T) {
	c := mustLoad(t, "cycle: {period: 100ms}\n")
	want := config.RecorderConfig{Flush: 100 * time.Millisecond, KeepTicks: 1_000_000,
		KeepFor: 168 * time.Hour, MaxBytes: 1 << 30}
	if c.Recorder != want {
		t.Errorf("recorder defaults %+v; want %+v", c.Recorder, want)
	}
	if c.HTTP.CacheBytes != 64<<20 {
		t.Errorf("http.cache_bytes default %d; want 64MiB", c.HTTP.CacheBytes)
	}
	c = mustLoad(t, "recorder: {enabled: true, flush: 50ms, keep_ticks: 10, keep_for: 1h, max_bytes: 2MiB}\nhttp: {cache_bytes: 1MiB}\n")
	want = config.RecorderConfig{Enabled: true, Flush: 50 * time.Millisecond, KeepTicks: 10, KeepFor: time.Hour, MaxBytes: 2 << 20}
	if c.Recorder != want || c.HTTP.CacheBytes != 1<<20 {
		t.Errorf("recorder %+v cache %d; want %+v and 1MiB", c.Recorder, c.HTTP.CacheBytes, want)
	}
}

func TestRecorderRejections(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		path string
	}{
		{"recorder: {flush: 0s}", "recorder.flush"},
		{"recorder: {flush: -1s}", "recorder.flush"},
		{"recorder: {keep_ticks: -1}", "recorder.keep_ticks"},
		{"recorder: {keep_for: -1h}", "recorder.keep_for"},
		{"recorder: {max_bytes: -1}", "recorder.max_bytes"},
		{"recorder: {enabled: true}\nstate_dir: \"\"", "recorder.enabled"},
		{"recorder: {flsuh: 1s}", "recorder.flsuh"},
		{"http: {cache_bytes: -5}", "http.cache_bytes"},
		{"http: {cache_bytes: lots}", "http.cache_bytes"},
	} {
		wantProblemAt(t, tc.yaml, tc.path)
	}
}

func TestRecorderFromEnvironment(t *testing.T) {
	t.Setenv("CYCLED_RECORDER_ENABLED", "true")
	t.Setenv("CYCLED_RECORDER_KEEP_TICKS", "7")
	t.Setenv("CYCLED_HTTP_CACHE_BYTES", "1KiB")
	c, err := config.Load(config.WithData([]byte("cycle: {period: 10ms}\n"), "env.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Recorder.Enabled || c.Recorder.KeepTicks != 7 || c.HTTP.CacheBytes != 1024 {
		t.Fatalf("environment not applied: %+v cache %d", c.Recorder, c.HTTP.CacheBytes)
	}
}
