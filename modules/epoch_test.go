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

// TestHTTPEpochHeader: under modules.WithEpoch every request carries the epoch in force
// when it is built; without it, or with epoch 0, no header is sent.
func TestHTTPEpochHeader(t *testing.T) {
	got := make(chan string, 4)
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		got <- req.Header.Get(modules.HeaderEpoch)
		reply(http.StatusOK, `{"value": 1}`)(w, req)
	})
	m := r.module(t, "/m")
	board := blackboard.New(lastgood.New())
	var epoch uint64
	for _, tc := range []struct {
		ctx   context.Context
		epoch uint64
		want  string
	}{
		{context.Background(), 0, ""},
		{modules.WithEpoch(context.Background(), func() uint64 { return epoch }), 0, ""},
		{modules.WithEpoch(context.Background(), func() uint64 { return epoch }), 42, "42"},
	} {
		epoch = tc.epoch
		if _, err := m.Run(tc.ctx, tickInput("m", nil, board, 1, time.Second)); err != nil {
			t.Fatal(err)
		}
		if h := <-got; h != tc.want {
			t.Errorf("epoch %d: header %q, want %q", tc.epoch, h, tc.want)
		}
	}
}
