package modules_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/modules"
)

// TestHTTPTraceHeaders checks that a remote module's request carries the trace context
// the daemon's hook gives for its tick and module, every attempt the same, and neither
// header without a hook or when the hook gives none.
func TestHTTPTraceHeaders(t *testing.T) {
	type headers struct{ parent, state string }
	got := make(chan headers, 4)
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		got <- headers{req.Header.Get(modules.HeaderTraceparent), req.Header.Get(modules.HeaderTracestate)}
		reply(http.StatusOK, `{"value": 1}`)(w, req)
	})
	m := r.module(t, "/m")
	board := blackboard.New(lastgood.New())
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var asked []string
	hook := func(tick uint64, module string) (string, string) {
		asked = append(asked, module)
		if tick == 7 {
			return "", ""
		}
		return parent, "cycled=t1"
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		tick uint64
		want headers
	}{
		{"no hook", context.Background(), 1, headers{}},
		{"hook", modules.WithTraceContext(context.Background(), hook), 1, headers{parent, "cycled=t1"}},
		{"hook gives none", modules.WithTraceContext(context.Background(), hook), 7, headers{}},
	} {
		if _, err := m.Run(tc.ctx, tickInput("m", nil, board, tc.tick, time.Second)); err != nil {
			t.Fatal(err)
		}
		if h := <-got; h != tc.want {
			t.Errorf("%s: headers %+v, want %+v", tc.name, h, tc.want)
		}
	}
	if len(asked) != 2 || asked[0] != "m" {
		t.Errorf("the hook was asked for %v", asked)
	}
}
