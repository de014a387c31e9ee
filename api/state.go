package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/cycled/cycled/blackboard"
)

// listBreakers serves GET /breakers: every breaker, sorted by name.
func (s *server) listBreakers(w http.ResponseWriter, _ *http.Request) {
	snaps := s.e.Breakers()
	now := s.e.Clock().Now()
	out := make([]*breakerView, 0, len(snaps))
	for _, b := range snaps {
		out = append(out, viewBreaker(b, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"breakers": out})
}

// resetBreaker serves POST /breakers/{name}/reset (admin): 200 with the breaker after
// the reset, 404 for an unknown breaker.
func (s *server) resetBreaker(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := s.e.ResetBreaker(name); err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	now := s.e.Clock().Now()
	for _, b := range s.e.Breakers() {
		if b.Name == name {
			writeJSON(w, http.StatusOK, viewBreaker(b, now))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "state": "closed"})
}

// blackboardView is the answer of GET /blackboard.
type blackboardView struct {
	// TickID is the tick after which the entries were served (0 before the first tick).
	TickID  uint64             `json:"tick_id"`
	Entries []blackboard.Entry `json:"entries"`
}

// getBlackboard serves GET /blackboard: what the board served after the latest tick.
func (s *server) getBlackboard(w http.ResponseWriter, _ *http.Request) {
	v := blackboardView{Entries: s.e.Blackboard()}
	if l := s.e.Latest(); l != nil {
		v.TickID = l.TickID
	}
	if v.Entries == nil {
		v.Entries = []blackboard.Entry{}
	}
	writeJSON(w, http.StatusOK, encodableEntries(v))
}

// encodableEntries replaces the value of every entry that cannot be encoded as JSON (a
// module may return anything) by a string saying so, so that one bad value does not hide
// the whole board.
func encodableEntries(v blackboardView) blackboardView {
	if _, err := json.Marshal(v); err == nil {
		return v
	}
	out := blackboardView{TickID: v.TickID, Entries: make([]blackboard.Entry, len(v.Entries))}
	for i, e := range v.Entries {
		if _, err := json.Marshal(e); err != nil {
			e.Value = fmt.Sprintf("<value not encodable as JSON: %v>", err)
		}
		out.Entries[i] = e
	}
	return out
}

// getBlackboardKey serves GET /blackboard/{key}: one entry, 404 if no module writes it.
func (s *server) getBlackboardKey(w http.ResponseWriter, r *http.Request) {
	key := blackboardKey(r)
	for _, e := range s.e.Blackboard() {
		if e.Key == key {
			v := encodableEntries(blackboardView{Entries: []blackboard.Entry{e}})
			writeJSON(w, http.StatusOK, v.Entries[0])
			return
		}
	}
	writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: fmt.Sprintf("no key %q on the blackboard", key)})
}

// getEmergency serves GET /emergency: the emergency episode as of the latest tick (the
// current one, else the last one) and the one before it.
func (s *server) getEmergency(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.e.EmergencyStatus())
}

// resetEmergency serves POST /emergency/reset (admin): the operator reset of a latched
// emergency. It applies at the next tick, after which emergency mode ends once
// recover_after consecutive safety ticks are healthy. 200 with the current state.
func (s *server) resetEmergency(w http.ResponseWriter, _ *http.Request) {
	s.e.ResetEmergency()
	writeJSON(w, http.StatusOK, map[string]any{"reset": "requested", "applies": "next_tick", "emergency": s.e.EmergencyStatus()})
}

// getConfig serves GET /config: ConfigView().
func (s *server) getConfig(w http.ResponseWriter, _ *http.Request) {
	if s.opts.ConfigView == nil {
		writeError(w, http.StatusNotImplemented, apiError{Message: "no configuration view is configured"})
		return
	}
	writeJSON(w, http.StatusOK, s.opts.ConfigView())
}

// reload serves POST /config/reload (admin): 200 on success, 422 with every problem when
// the new configuration is invalid, 409 safety_removal when it lacks a safety module of
// the running one and the request does not say allow_safety_removal=true (the running
// configuration stays in both cases).
func (s *server) reload(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reload == nil {
		writeError(w, http.StatusNotImplemented, apiError{Message: "configuration reload is not configured"})
		return
	}
	allow, ok := allowSafetyRemoval(w, r)
	if !ok {
		return
	}
	if err := s.opts.Reload(r.Context(), allow); err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	out := map[string]any{"status": "reloaded", "applies": "next_tick"}
	if s.opts.ConfigView != nil {
		out["config"] = s.opts.ConfigView()
	}
	writeJSON(w, http.StatusOK, out)
}

// health is the body of /healthz and /readyz.
type health struct {
	Status        string    `json:"status"`
	Version       string    `json:"version,omitempty"`
	Mode          string    `json:"mode"`
	LastTickID    uint64    `json:"last_tick_id"`
	LastTickAgeMs *float64  `json:"last_tick_age_ms,omitempty"`
	WatchdogMs    float64   `json:"watchdog_ms,omitempty"`
	EmergencyMode bool      `json:"emergency_mode"`
	Subscribers   int       `json:"stream_subscribers"`
	Role          string    `json:"role,omitempty"` // with ha: active or standby
	HA            any       `json:"ha,omitempty"`
	Error         *apiError `json:"error,omitempty"`
}

func (s *server) health() health {
	h := health{Status: "ok", Version: s.opts.Version, Mode: "periodic", EmergencyMode: s.e.Emergency().Active,
		Subscribers: s.e.Events().Subscribers()}
	now := s.e.Clock().Now()
	origin := s.started
	if l := s.e.Latest(); l != nil {
		h.LastTickID = l.TickID
		origin = l.FinishedAt
		age := blackboard.Millis(max(now.Sub(l.FinishedAt), 0))
		h.LastTickAgeMs = &age
	}
	since := now.Sub(origin)
	cfg := s.e.Config()
	if s.haHealth(&h) {
		return h // a standby: the watchdog watches an active daemon's own ticks
	}
	if cfg.Period == 0 {
		h.Mode = "step"
		return h
	}
	pcfg, waited, pending := s.e.Pending()
	period := cfg.Period
	if pending && pcfg.Period > 0 {
		period = min(period, pcfg.Period) // the configured period promises ticks at least this often
	}
	wd := s.opts.WatchdogTimeout
	if wd <= 0 {
		wd = max(3*period, MinWatchdog)
	}
	h.WatchdogMs = blackboard.Millis(wd)
	var idErr error
	if s.opts.TickIDs != nil {
		idErr = s.opts.TickIDs()
	}
	switch {
	case idErr != nil:
		h.Status = "stalled"
		h.Error = &apiError{Code: "ids_exhausted", Message: idErr.Error()}
	case pending && waited > wd:
		h.Status = "stalled"
		h.Error = &apiError{Code: "config_pending", Message: fmt.Sprintf(
			"a configuration change has waited %s to be applied (watchdog %s)", waited.Round(time.Millisecond), wd)}
	case since > wd:
		h.Status = "stalled"
		what := "no tick has completed"
		if h.LastTickID > 0 {
			what = fmt.Sprintf("no tick has completed since tick %d", h.LastTickID)
		}
		h.Error = &apiError{Code: "watchdog", Message: fmt.Sprintf("%s for %s (watchdog %s)",
			what, since.Round(time.Millisecond), wd)}
	}
	return h
}

// healthz serves GET /healthz: 200 while ticks advance; 503 when a periodic scheduler has
// completed no tick within the watchdog timeout (since the last tick, or since the API
// started when there was none), or a configuration change has waited longer than that to
// be applied. The timeout follows the shorter of the periods in force and pending: the one
// configured last promises ticks that often. In step mode ticks run on demand and the watchdog does
// not apply. Emergency mode is reported but does not fail the check: the scheduler works.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	h := s.health()
	status := http.StatusOK
	if h.Error != nil {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, h)
}

// readyz serves GET /readyz: 503 until the first tick has completed, and while the cycle is
// starting (a startup configuration: some safety module has not succeeded once). In step
// mode the daemon is ready at once unless starting: its ticks only run when asked, so
// waiting for one would never end.
func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	h := s.health()
	h.Error = nil
	status := http.StatusOK
	switch {
	case s.e.Starting() && h.Role != "standby": // also in step mode, whose ticks end startup; a standby runs no tick
		status = http.StatusServiceUnavailable
		h.Status = "not_ready"
		h.Error = &apiError{Code: "starting", Message: "starting: some safety module has not succeeded once yet"}
	case h.LastTickID == 0 && h.Mode != "step" && h.Role != "standby":
		status = http.StatusServiceUnavailable
		h.Status = "not_ready"
		h.Error = &apiError{Code: "no_tick_yet", Message: "no tick has completed yet"}
	default:
		h.Status = "ready"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, h)
}

// getMetrics serves GET /metrics from Options.Registry.
func (s *server) getMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		writeError(w, http.StatusNotImplemented, apiError{Message: "no metrics registry is configured"})
		return
	}
	s.metrics.ServeHTTP(w, r)
}

// allowSafetyRemoval reads the query parameter allow_safety_removal ("true" or "false",
// absent: false); a malformed value is answered 400 and ok is false.
func allowSafetyRemoval(w http.ResponseWriter, r *http.Request) (allow, ok bool) {
	v := r.URL.Query().Get("allow_safety_removal")
	switch v {
	case "", "false":
		return false, true
	case "true":
		return true, true
	}
	writeError(w, http.StatusBadRequest, apiError{Code: "bad_query", Field: "allow_safety_removal",
		Message: fmt.Sprintf("allow_safety_removal must be true or false, got %q", v)})
	return false, false
}
