package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// moduleView is a module as served by /modules.
type moduleView struct {
	Name        string           `json:"name"`
	Tier        string           `json:"tier"`
	TierIndex   int              `json:"tier_index"`
	Origin      cycle.Origin     `json:"origin"`
	Pending     bool             `json:"pending"`
	Busy        bool             `json:"busy"`
	MaxAttempts int              `json:"max_attempts"`
	Policy      string           `json:"policy"`
	TTL         string           `json:"ttl"`
	Spec        tiers.ModuleSpec `json:"spec"`
	// Kind is "builtin", "http" or "go" (a module given by an embedding program).
	Kind string `json:"kind"`
	// HTTP is where a remote module (kind http) is called.
	HTTP *httpView `json:"http,omitempty"`
	// Breaker is the state of the module's breaker (its own or the shared one it names);
	// null while the registration is pending.
	Breaker *breakerView `json:"breaker"`
	// Last is the module's line in the latest tick it took part in; null before.
	Last     *faultsummary.Module `json:"last"`
	LastGood lastGoodView         `json:"last_good"`
}

// httpView is the endpoint of a remote module, its secrets redacted: the values of the
// URL's query (modules.RedactURL) and of the configured headers are never shown.
type httpView struct {
	URL     string            `json:"url"`
	MaxBody int64             `json:"max_body"`
	Timeout string            `json:"timeout,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// moduleKind returns the kind of m and, for a remote module, its endpoint.
func moduleKind(m tiers.Module) (string, *httpView) {
	switch m := m.(type) {
	case *modules.Builtin:
		return "builtin", nil
	case *modules.HTTP:
		st := m.Settings().Redact()
		v := &httpView{URL: st.URL, MaxBody: st.MaxBody, Headers: st.Headers}
		if st.Timeout > 0 {
			v.Timeout = st.Timeout.String()
		}
		return "http", v
	}
	return "go", nil
}

// lastGoodView is a key's last-known-good value as seen now, in the vocabulary of the
// summary's "served": Source is what the latest tick served, "live" when the module wrote
// the value in that tick, "last_good" when an older value stands in (Stale), "none" when
// there is nothing to serve (Expired when a value outlived its TTL).
type lastGoodView struct {
	Key     string `json:"key"`
	Source  string `json:"source"`
	Stale   bool   `json:"stale"`
	Expired bool   `json:"expired"`
	// AgeMs is the age of the stored value; null when there is none.
	AgeMs     *float64   `json:"age_ms"`
	TTLMs     float64    `json:"ttl_ms"`
	TickID    uint64     `json:"tick_id,omitempty"`
	WrittenAt *time.Time `json:"written_at,omitempty"`
}

// breakerView is a breaker as served by /breakers and /modules.
type breakerView struct {
	Name                string  `json:"name"`
	State               string  `json:"state"`
	ConsecutiveFailures int     `json:"consecutive_failures"`
	ProbesInFlight      int     `json:"probes_in_flight"`
	ProbeSuccesses      int     `json:"probe_successes"`
	TotalFailures       uint64  `json:"total_failures"`
	TotalSuccesses      uint64  `json:"total_successes"`
	Transitions         uint64  `json:"transitions"`
	OpenedAt            *string `json:"opened_at,omitempty"`
	// CooldownRemainingMs is the time until an open breaker half-opens.
	CooldownRemainingMs *float64            `json:"cooldown_remaining_ms,omitempty"`
	Settings            breakerSettingsView `json:"settings"`
	// WindowTicks and WindowFailures (rate breakers) are the counted ticks in
	// the window and the failures among them.
	WindowTicks    *int `json:"window_ticks,omitempty"`
	WindowFailures *int `json:"window_failures,omitempty"`
}

type breakerSettingsView struct {
	FailureThreshold  int      `json:"failure_threshold"`
	Cooldown          string   `json:"cooldown"`
	HalfOpenProbes    int      `json:"half_open_probes"`
	HalfOpenSuccesses int      `json:"half_open_successes"`
	TripOn            []string `json:"trip_on"`
	// Kind is consecutive or rate; Window, MinTicks and FailureRate are a rate breaker's.
	Kind        string  `json:"kind"`
	Window      int     `json:"window,omitempty"`
	MinTicks    int     `json:"min_ticks,omitempty"`
	FailureRate float64 `json:"failure_rate,omitempty"`
}

func viewBreaker(b breaker.Snapshot, now time.Time) *breakerView {
	v := &breakerView{Name: b.Name, State: b.State.String(), ConsecutiveFailures: b.ConsecutiveFailures,
		ProbesInFlight: b.ProbesInFlight, ProbeSuccesses: b.ProbeSuccesses, TotalFailures: b.TotalFailures,
		TotalSuccesses: b.TotalSuccesses, Transitions: b.Transitions,
		Settings: breakerSettingsView{FailureThreshold: b.Settings.FailureThreshold, Cooldown: b.Settings.Cooldown.String(),
			HalfOpenProbes: b.Settings.HalfOpenProbes, HalfOpenSuccesses: b.Settings.HalfOpenSuccesses, TripOn: []string{}}}
	for _, k := range b.Settings.TripOn.Kinds() {
		v.Settings.TripOn = append(v.Settings.TripOn, k.String())
	}
	viewRate(v, b)
	if !b.OpenedAt.IsZero() {
		at := b.OpenedAt.Format(time.RFC3339Nano)
		v.OpenedAt = &at
	}
	if b.State == breaker.Open && !b.OpenedAt.IsZero() {
		left := max(b.OpenedAt.Add(b.Settings.Cooldown).Sub(now), 0)
		ms := blackboard.Millis(left)
		v.CooldownRemainingMs = &ms
	}
	return v
}

// viewModule renders a module; served holds the latest summary's lines by module name
// (nil: looked up in the latest summary).
func (s *server) viewModule(m cycle.ModuleInfo, cfg cycle.Config, now time.Time, served map[string]faultsummary.Module) moduleView {
	v := moduleView{Name: m.Spec.Name, Tier: m.Spec.Tier, TierIndex: m.TierIndex, Origin: m.Origin, Pending: m.Pending,
		Busy: m.Busy, MaxAttempts: m.Attempts, Policy: m.Policy.String(), TTL: ttlString(m.Spec.TTL), Spec: m.Spec, Last: m.Last}
	v.Kind, v.HTTP = moduleKind(m.Module)
	if v.Tier == "" && m.TierIndex >= 0 && m.TierIndex < len(cfg.Tiers) {
		v.Tier = cfg.Tiers[m.TierIndex].Name
	}
	if !m.Pending && m.Breaker.Name != "" {
		v.Breaker = viewBreaker(m.Breaker, now)
	}
	lg := m.LastGood
	v.LastGood = lastGoodView{Key: m.Spec.Key(), Source: blackboard.None.String(), TTLMs: blackboard.Millis(lg.TTL)}
	if served == nil {
		served = latestLines(s.e.Latest(), m.Spec.Name)
	}
	switch line, ok := served[m.Spec.Name]; {
	case ok:
		// What the latest tick served, word for word: GET /modules/{name} and the
		// summary agree.
		v.LastGood.Source, v.LastGood.Stale, v.LastGood.Expired = line.Served.Source.String(), line.Served.Stale, line.Served.Expired
	case lg.Quality == lastgood.Stale:
		v.LastGood.Source, v.LastGood.Stale = blackboard.LastGood.String(), true
	case lg.Quality == lastgood.Expired:
		v.LastGood.Expired = true
	}
	if lg.Quality != lastgood.Missing {
		age := blackboard.Millis(lg.Age)
		v.LastGood.AgeMs = &age
		v.LastGood.TickID = lg.TickID
		if !lg.Written.IsZero() {
			at := lg.Written
			v.LastGood.WrittenAt = &at
		}
	}
	return v
}

// latestLines returns the latest summary's module lines by name: only the named one's
// when only is not empty.
func latestLines(latest *faultsummary.Summary, only string) map[string]faultsummary.Module {
	out := map[string]faultsummary.Module{}
	if latest == nil {
		return out
	}
	if only != "" {
		if m, ok := latest.Module(only); ok {
			out[only] = m
		}
		return out
	}
	for _, m := range latest.Modules() {
		out[m.Name] = m
	}
	return out
}

// ttlString renders a module's TTL policy: "auto", a duration, or "default".
func ttlString(t lastgood.TTL) string {
	switch {
	case t.Auto:
		return "auto"
	case t.Fixed > 0:
		return t.Fixed.String()
	}
	return "default"
}

// listModules serves GET /modules: every module in force, then pending registrations.
func (s *server) listModules(w http.ResponseWriter, _ *http.Request) {
	mods := s.e.Modules()
	cfg := s.e.Config()
	now := s.e.Clock().Now()
	served := latestLines(s.e.Latest(), "")
	out := make([]moduleView, 0, len(mods))
	for _, m := range mods {
		out = append(out, s.viewModule(m, cfg, now, served))
	}
	writeJSON(w, http.StatusOK, map[string]any{"modules": out})
}

// getModule serves GET /modules/{name}.
func (s *server) getModule(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	m, ok := s.e.Module(name)
	if !ok {
		writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: fmt.Sprintf("no module %q", name)})
		return
	}
	writeJSON(w, http.StatusOK, s.viewModule(m, s.e.Config(), s.e.Clock().Now(), nil))
}

// readBody reads the (size-limited) body.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return b, nil
}

// readJSONBody reads the body and checks that it is one well-formed JSON value (or empty
// when allowEmpty); it answers the error itself and returns ok=false.
func (s *server) readJSONBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) ([]byte, bool) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err, http.StatusBadRequest)
		return nil, false
	}
	if len(body) == 0 {
		if allowEmpty {
			return body, true
		}
		writeError(w, http.StatusBadRequest, apiError{Code: "empty_body", Message: "a JSON body is required"})
		return nil, false
	}
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v) // for the offset of the error
		if err == nil {
			err = errTrailingData
		}
		writeError(w, http.StatusBadRequest, apiError{Code: "malformed_json", Message: "malformed JSON: " + err.Error()})
		return nil, false
	}
	return body, true
}

// postModule serves POST /modules (admin): DecodeModule, then Engine.Register. 201 with
// the module (pending until the next tick boundary) and its Location.
func (s *server) postModule(w http.ResponseWriter, r *http.Request) {
	if s.opts.DecodeModule == nil {
		writeError(w, http.StatusNotImplemented, apiError{Message: "runtime module registration is not configured"})
		return
	}
	body, ok := s.readJSONBody(w, r, false)
	if !ok {
		return
	}
	reg, err := s.opts.DecodeModule(body)
	if err != nil {
		s.fail(w, r, err, http.StatusBadRequest)
		return
	}
	s.regMu.Lock()
	if s.opts.MaxRuntimeModules != nil {
		if limit, n := s.opts.MaxRuntimeModules(), runtimeCount(s.e.Registrations()); n >= limit {
			s.regMu.Unlock()
			writeError(w, http.StatusConflict, apiError{Code: "module_limit", Message: fmt.Sprintf(
				"%d modules are registered at runtime, the most allowed (http.max_runtime_modules): delete one first", n)})
			return
		}
	}
	index := len(s.e.Registrations()) // the new module's index in the engine's validation paths
	if err := s.e.Register(reg); err != nil {
		s.regMu.Unlock()
		s.fail(w, r, relativePaths(err, index), http.StatusInternalServerError)
		return
	}
	name := reg.Spec.Name
	if s.opts.Registered != nil {
		if err := s.opts.Registered(reg, body); err != nil {
			// Not persisted: withdraw the registration, so that the engine does not run a
			// module that a restart would lose (it applies at a tick boundary, so at
			// most the boundaries passed while persisting saw it).
			derr := s.e.Deregister(name)
			s.regMu.Unlock()
			if derr != nil {
				err = fmt.Errorf("%w; and it could not be withdrawn: %w", err, derr)
			}
			s.fail(w, r, &HTTPError{Status: http.StatusInternalServerError, Code: "not_persisted",
				Err: fmt.Errorf("module %q was not registered: the registration could not be persisted: %w", name, err)},
				http.StatusInternalServerError)
			return
		}
	}
	reset := s.resetOwnBreaker(reg)
	warnings := s.registrationWarnings(name)
	s.regMu.Unlock()
	w.Header().Set("Location", "/modules/"+url.PathEscape(name))
	if m, ok := s.e.Module(name); ok {
		writeJSON(w, http.StatusCreated, registeredView{moduleView: s.viewModule(m, s.e.Config(), s.e.Clock().Now(), nil),
			BreakerReset: reset, Warnings: warnings})
		return
	}
	// Deregistered or replaced in between: acknowledge what was done.
	writeJSON(w, http.StatusCreated, map[string]any{"name": name, "pending": true})
}

// registeredView is the answer of POST /modules: the module, and the breaker state that
// the registration cleared.
type registeredView struct {
	moduleView
	// BreakerReset is set when a breaker of the module's name was not closed: left by an
	// earlier registration of the same name (a remote module that restarted), it was
	// reset, so that the new registration starts closed.
	BreakerReset *breakerResetView `json:"breaker_reset,omitempty"`
	// Warnings are the findings about the module that do not stop it from running, as
	// cycled validate prints them for a file: a read of a key nobody writes, or of one
	// written by the same or a later tier. Paths are relative to the request body.
	Warnings tiers.Problems `json:"warnings,omitempty"`
}

// registrationWarnings returns the validation warnings about the named module, in the
// configuration that now includes it. Called with regMu held.
func (s *server) registrationWarnings(name string) tiers.Problems {
	cfg := s.e.Config()
	regs := s.e.Registrations()
	tc := tiers.Config{Tiers: cfg.Tiers, Breakers: cfg.Breakers, Modules: make([]tiers.ModuleSpec, len(regs))}
	if tc.Tiers == nil {
		tc.Tiers = tiers.SeedTiers()
	}
	index := -1
	for i, r := range regs {
		tc.Modules[i] = r.Spec
		if r.Spec.Name == name {
			index = i
		}
	}
	if index < 0 {
		return nil
	}
	_, ps := tiers.Validate(tc)
	prefix := fmt.Sprintf("modules[%d].", index)
	var out tiers.Problems
	for _, p := range ps.Warnings() {
		if rel, ok := strings.CutPrefix(p.Path, prefix); ok {
			p.Path = rel
			out = append(out, p)
			s.log.Warn("registered module: "+p.Message, zap.String("module", name), zap.String("field", rel))
		}
	}
	return out
}

// breakerResetView is what a registration's breaker reset cleared.
type breakerResetView struct {
	Name                string `json:"name"`
	From                string `json:"from"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
}

// resetOwnBreaker closes the breaker that carries a new registration's name, if one is
// left open or half-open by an earlier registration of that name: the module registered
// now (typically a remote process that restarted) is not the one that failed, and must not
// wait out the old cooldown (docs/decisions.md, "Reloads and runtime
// registrations"). A named breaker shared with other modules guards a downstream, not this
// module, and keeps its state. Called with regMu held.
func (s *server) resetOwnBreaker(reg cycle.Registration) *breakerResetView {
	if reg.Spec.Breaker != "" {
		return nil
	}
	for _, b := range s.e.Breakers() {
		if b.Name != reg.Spec.Name || b.State == breaker.Closed {
			continue
		}
		if err := s.e.ResetBreaker(b.Name); err != nil {
			return nil
		}
		s.log.Info("registration reset the breaker left by an earlier registration",
			zap.String("module", reg.Spec.Name), zap.String("from", b.State.String()))
		return &breakerResetView{Name: b.Name, From: b.State.String(), ConsecutiveFailures: b.ConsecutiveFailures}
	}
	return nil
}

// relativePaths rewrites the paths of a registration's validation problems from the
// engine's "modules[index].tier" to the request body's "tier". Problems about other
// modules (or paths from a concurrent registration that shifted the index) are kept as is.
func relativePaths(err error, index int) error {
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	prefix := fmt.Sprintf("modules[%d]", index)
	ps := make(tiers.Problems, len(ve.Problems))
	for i, p := range ve.Problems {
		switch {
		case p.Path == prefix:
			p.Path = ""
		case strings.HasPrefix(p.Path, prefix+"."):
			p.Path = strings.TrimPrefix(p.Path, prefix+".")
		}
		ps[i] = p
	}
	return fmt.Errorf("register: %w", &tiers.ValidationError{Problems: ps})
}

// deleteModule serves DELETE /modules/{name} (admin): 204; the module stops at the next
// tick boundary. Only runtime registrations can be removed (409 for configured modules),
// and one in the safety tier only with allow_safety_removal=true (409 safety_removal).
func (s *server) deleteModule(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	allow, ok := allowSafetyRemoval(w, r)
	if !ok {
		return
	}
	var opts []cycle.ChangeOption
	if allow {
		opts = append(opts, cycle.AllowSafetyRemoval(nil))
	}
	s.regMu.Lock()
	err := s.e.Deregister(name, opts...)
	if err == nil && s.opts.Deregistered != nil {
		s.opts.Deregistered(name)
	}
	if errors.Is(err, cycle.ErrNotFound) && s.opts.ForgetSaved != nil {
		// Saved by an earlier run but not restored: deleting it is how an operator stops
		// the daemon retrying it at every start.
		found, ferr := s.opts.ForgetSaved(name)
		switch {
		case ferr != nil:
			err = fmt.Errorf("forget the saved registration of %q: %w", name, ferr)
		case found:
			err = nil
		}
	}
	s.regMu.Unlock()
	if err != nil {
		if errors.Is(err, cycle.ErrNotRuntime) {
			writeError(w, http.StatusConflict, apiError{Code: "not_runtime", Message: fmt.Sprintf(
				"module %q comes from the configuration file; remove it there and reload (POST /config/reload)", name)})
			return
		}
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// postFaults serves POST /modules/{name}/faults (admin).
func (s *server) postFaults(w http.ResponseWriter, r *http.Request) {
	if s.opts.Faults == nil {
		writeError(w, http.StatusNotImplemented, apiError{Message: "fault injection is not configured"})
		return
	}
	name := chi.URLParam(r, "name")
	if _, ok := s.e.Module(name); !ok {
		writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: fmt.Sprintf("no module %q", name)})
		return
	}
	body, ok := s.readJSONBody(w, r, true)
	if !ok {
		return
	}
	res, err := s.opts.Faults(name, body)
	if err != nil {
		s.fail(w, r, err, http.StatusBadRequest)
		return
	}
	if res == nil {
		res = map[string]any{"module": name, "applied": true}
	}
	writeJSON(w, http.StatusOK, res)
}

// blackboardKey returns the {key} of /blackboard/{key}, unescaped (keys may contain '/').
func blackboardKey(r *http.Request) string {
	k := chi.URLParam(r, "*")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(k); err == nil {
			k = u
		}
	}
	return k
}

// runtimeCount returns how many of regs were registered at runtime.
func runtimeCount(regs []cycle.Registration) int {
	n := 0
	for _, r := range regs {
		if r.Origin == cycle.FromRuntime {
			n++
		}
	}
	return n
}
