package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

type page struct {
	Ticks []json.RawMessage `json:"ticks"`
	Count int               `json:"count"`
	Next  uint64            `json:"next_before"`
}

func tickIDs(p page) []uint64 {
	var out []uint64
	for _, b := range p.Ticks {
		var s struct {
			ID uint64 `json:"tick_id"`
		}
		_ = json.Unmarshal(b, &s)
		out = append(out, s.ID)
	}
	return out
}

// Without a recorder there are no events to serve, and the history is memory only.
func TestNoRecorder(t *testing.T) {
	r := newRig(t, rigOptions{})
	var e errorBody
	_ = json.Unmarshal(r.expect(http.StatusNotImplemented, "GET", "/events", nil), &e)
	if e.Error.Code != "not_configured" {
		t.Fatalf("code %q", e.Error.Code)
	}
	for range 8 {
		if _, err := r.e.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r.expect(http.StatusNotFound, "GET", "/ticks/1", nil) // history 5
	var p page
	_ = json.Unmarshal(r.expect(http.StatusOK, "GET", "/ticks?limit=50", nil), &p)
	if got := fmt.Sprint(tickIDs(p)); got != "[8 7 6 5 4]" {
		t.Fatalf("list %s", got)
	}
	_ = json.Unmarshal(r.expect(http.StatusOK, "GET", "/ticks?severity=ok&limit=2", nil), &p)
	if got := fmt.Sprint(tickIDs(p)); got != "[8 7]" {
		t.Fatalf("filtered list %s", got)
	}
}
