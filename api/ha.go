package api

import (
	"net/http"
)

// HA is the daemon's part in an active/standby group (package ha), as the API shows and
// drives it.
type HA interface {
	// Role returns "active" or "standby".
	Role() string
	// Status returns the node's view of its group (GET /ha; also in /healthz and /readyz).
	Status() any
	// StepDown asks an active daemon to step down at once (POST /ha/step-down); an error
	// means it is not active (409).
	StepDown() error
}

// haHealth adds the group's view to h. A standby runs no tick of its own: the watchdog,
// which watches this daemon's ticks, does not apply to it, and it is ready (but not
// active) once it runs.
func (s *server) haHealth(h *health) (standby bool) {
	if s.opts.HA == nil {
		return false
	}
	h.Role, h.HA = s.opts.HA.Role(), s.opts.HA.Status()
	return h.Role != "active"
}

// getHA serves GET /ha: the node's view of its group; 404 when the daemon runs alone.
func (s *server) getHA(w http.ResponseWriter, _ *http.Request) {
	if s.opts.HA == nil {
		writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: "this daemon is not part of an active/standby group (no ha section)"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.opts.HA.Status())
}

// stepDown serves POST /ha/step-down: the active daemon stops starting ticks at once and
// resigns, so that a standby takes over; 409 on a daemon that is not active.
func (s *server) stepDown(w http.ResponseWriter, _ *http.Request) {
	if s.opts.HA == nil {
		writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: "this daemon is not part of an active/standby group (no ha section)"})
		return
	}
	if err := s.opts.HA.StepDown(); err != nil {
		writeError(w, http.StatusConflict, apiError{Code: "not_active", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"stepped_down": true, "ha": s.opts.HA.Status()})
}
