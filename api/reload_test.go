package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
)

// A reload whose configuration file cannot be read (removed, replaced by a directory, too
// large) is the operator's problem, not the server's: 422 "invalid" naming the file, no
// error logged, and the running configuration stays.
func TestReloadUnreadableFileIs422(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cycled.yaml")
	if err := os.WriteFile(path, []byte("cycle: {period: 0}\nmodules:\n  - {name: a, tier: safety, builtin: {value: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := []config.LoadOption{config.WithFile(path), config.WithoutEnv()}
	cfg, err := config.Load(load...)
	if err != nil {
		t.Fatal(err)
	}
	ec, regs, _ := cfg.Engine()
	e, err := cycle.New(ec, regs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	rl := config.NewReloader(cfg, regs, e, config.WithLoadOptions(load...))
	core, logs := observer.New(zapcore.InfoLevel)
	h := api.New(api.Options{
		Engine:     e,
		AdminToken: "t",
		Logger:     zap.New(core),
		Reload:     func(ctx context.Context, allow bool) error { return rl.ReloadAllowing(ctx, "api", allow) },
		ConfigView: rl.View,
	})

	for _, tc := range []struct {
		name    string
		breakIt func() error
		want    string
	}{
		{"missing", func() error { return os.Remove(path) }, "no such file"},
		{"directory", func() error { return os.Mkdir(path, 0o700) }, "is a directory"},
		{"too large", func() error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.WriteFile(path, []byte("#"+strings.Repeat("x", config.MaxFileSize)+"\n"), 0o600)
		}, "larger than"},
	} {
		if err := tc.breakIt(); err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/config/reload", nil)
		req.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: answer is not JSON: %v: %s", tc.name, err, w.Body.Bytes())
		}
		if w.Code != http.StatusUnprocessableEntity || body.Error.Code != "invalid" ||
			!strings.Contains(body.Error.Message, path) || !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%s: POST /config/reload = %d %s, want 422 invalid naming %s and %q", tc.name, w.Code, w.Body.Bytes(), path, tc.want)
		}
		if rl.Current() != cfg {
			t.Errorf("%s: the running configuration was replaced", tc.name)
		}
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 0 {
		t.Errorf("%d error log lines for rejected reloads: %v", n, logs.FilterLevelExact(zapcore.ErrorLevel).All())
	}
}
