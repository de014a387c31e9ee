package api

import (
	"net/http"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
)

// bulkheadView is a bulkhead as GET /bulkheads shows it.
type bulkheadView struct {
	Name        string  `json:"name"`
	MaxInFlight int     `json:"max_in_flight"`
	WaitMs      float64 `json:"wait_ms"`
	// InFlight counts the runs holding a permit now, runs outstanding from earlier ticks
	// (abandoned at their deadline, not yet returned) included.
	InFlight int `json:"in_flight"`
	// Waiting counts the modules waiting for a permit now.
	Waiting int `json:"waiting"`
	// Admitted and Rejections are lifetime counts since the bulkhead was created.
	Admitted   uint64 `json:"admitted"`
	Rejections uint64 `json:"rejections"`
}

func viewBulkhead(b bulkhead.Snapshot) bulkheadView {
	return bulkheadView{Name: b.Name, MaxInFlight: b.MaxInFlight, WaitMs: blackboard.Millis(b.Wait), InFlight: b.InFlight,
		Waiting: b.Waiting, Admitted: b.Admitted, Rejections: b.Rejections}
}

// listBulkheads serves GET /bulkheads: every bulkhead in force, sorted by name.
func (s *server) listBulkheads(w http.ResponseWriter, _ *http.Request) {
	snaps := s.e.Bulkheads()
	out := make([]bulkheadView, 0, len(snaps))
	for _, b := range snaps {
		out = append(out, viewBulkhead(b))
	}
	writeJSON(w, http.StatusOK, map[string]any{"bulkheads": out})
}

// viewRate adds a breaker's kind, and a rate breaker's window and counts, to v.
func viewRate(v *breakerView, b breaker.Snapshot) {
	v.Settings.Kind = b.Settings.Kind.String()
	if b.Settings.Kind != breaker.Rate {
		return
	}
	v.Settings.Window, v.Settings.MinTicks, v.Settings.FailureRate = b.Settings.Window, b.Settings.MinTicks, b.Settings.FailureRate
	n, f := b.WindowTicks, b.WindowFailures
	v.WindowTicks, v.WindowFailures = &n, &f
}
