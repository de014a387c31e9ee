package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/cycled/cycled/faultsummary"
)

// encode returns the JSON of sum, from the cache when sum is the cached summary. Pollers
// of the latest summary and stream subscribers share one encoding per tick.
func (s *server) encode(sum *faultsummary.Summary) ([]byte, error) {
	if c := s.enc.Load(); c != nil && c.s == sum {
		return c.body, nil
	}
	s.encMu.Lock()
	defer s.encMu.Unlock()
	if c := s.enc.Load(); c != nil && c.s == sum {
		return c.body, nil
	}
	b, err := sum.MarshalJSON() // json.Marshal would re-scan the compact output: same bytes, twice the work
	if err != nil {
		return nil, fmt.Errorf("encode summary of tick %d: %w", sum.TickID, err)
	}
	// Cache only the newest: an older summary (GET /ticks/{id}) must not evict it.
	if c := s.enc.Load(); c == nil || c.s.TickID <= sum.TickID {
		c := s.newEncoding(sum, b)
		b = c.body
		s.enc.Store(c)
		s.opts.Cache.put(sum.TickID, false, b) // for when it is no longer the latest
	}
	return b, nil
}

// etag returns the entity tag of a tick: the process's boot id and the tick id, so that a
// tag from before a restart (ids start again at 1) never matches.
func (s *server) etag(id uint64) string { return `"` + s.eventID(id) + `"` }

// eventID is the tick's id in ETags and on the stream: "<boot>-<tick>".
func (s *server) eventID(id uint64) string { return s.boot + "-" + strconv.FormatUint(id, 10) }

// parseEventID returns the tick id of an id made by eventID in this process.
func (s *server) parseEventID(v string) (uint64, bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
	v = strings.Trim(v, `"`)
	boot, id, ok := strings.Cut(v, "-")
	if !ok || boot != s.boot {
		return 0, false
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}

// notModified reports whether an If-None-Match header matches the tag (weak comparison).
func notModified(header, tag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}

// writeSummary answers a summary with its ETag, or 304 when If-None-Match matches.
func (s *server) writeSummary(w http.ResponseWriter, r *http.Request, status int, sum *faultsummary.Summary) {
	tag := s.etag(sum.TickID)
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("Cache-Control", "no-cache")
	if r.Method != http.MethodPost && notModified(r.Header.Get("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b, err := s.summaryJSON(sum)
	if err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	s.writeBody(w, r, status, sum.TickID, b)
}

// getLatest serves GET /ticks/latest.
//
// Without wait it answers the latest summary (503 before the first tick). With
// wait=DURATION (Go syntax like "5s", or plain seconds; capped at MaxWait) it long-polls:
// it answers as soon as a tick newer than after=ID exists — the latest summary, not
// necessarily tick after+1. Without after, the tick named by a matching If-None-Match, or
// else the latest at the time of the request, is the one to beat. An after above the
// latest tick id waits like any other: it names a tick still to come (docs/decisions.md,
// "Long-polls", covers a client that saw an earlier process).
// When the wait ends
// without a newer tick the answer is the latest summary (304 if If-None-Match matches it),
// or 503 if there is still none.
func (s *server) getLatest(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := parseWait(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: err.Error(), Field: "wait"})
			return
		}
		wait = d
	}
	hist := s.e.History()
	latest := hist.Latest()
	paced := true
	if wait > 0 {
		waitedFor := false
		var after uint64
		switch v := q.Get("after"); {
		case v != "":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: "after must be a tick id", Field: "after"})
				return
			}
			after = n
		default:
			if id, ok := s.parseEventID(r.Header.Get("If-None-Match")); ok {
				after = id
			} else if latest != nil {
				after = latest.TickID
			}
		}
		if latest == nil || latest.TickID <= after {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
			ctx, cancel := context.WithTimeout(r.Context(), wait)
			_, err := hist.Wait(ctx, after)
			cancel()
			if err != nil && r.Context().Err() != nil {
				return // the client left
			}
			latest = hist.Latest()
			waitedFor = true
		}
		// A long-poll answered with a tick newer than any answered on its connection is
		// not paced (see ReadLimit).
		paced = latest == nil || latest.TickID <= after || !newForConn(r, latest.TickID, waitedFor)
	} else if q.Get("after") != "" {
		writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: "after needs wait", Field: "after"})
		return
	}
	if paced && s.opts.ReadLimiter != nil && !s.opts.ReadLimiter.admit(w, r) {
		return
	}
	if latest == nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "no_tick_yet", Message: "no tick has completed yet"})
		return
	}
	s.writeSummary(w, r, http.StatusOK, latest)
}

// parseWait parses a wait: a Go duration or a number of seconds, not negative (nor NaN).
// A wait above MaxWait is MaxWait, also a number of seconds too large for a
// time.Duration, or +Inf.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil && !errors.Is(ferr, strconv.ErrRange) { // out of range: ±Inf or 0
			return 0, fmt.Errorf("wait must be a duration such as 5s: %w", err)
		}
		switch {
		case math.IsNaN(f):
			return 0, errors.New("wait must be a duration such as 5s or a number of seconds, not NaN")
		case f < 0:
			return 0, errors.New("wait must not be negative")
		case f >= MaxWait.Seconds():
			return MaxWait, nil
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, errors.New("wait must not be negative")
	}
	return min(d, MaxWait), nil
}

// listTicks serves GET /ticks?limit=N&before=ID: up to N summaries (default
// DefaultListLimit, at most the history's capacity, or MaxListLimit with a recorder) with
// tick ids below ID, newest first, from memory and then from the recorder. Filters:
// severity=, module=NAME (ticks where its line was indexed, see recorder.Indexed),
// status=, since= and until= (RFC 3339, on started_at).
func (s *server) listTicks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	hist := s.e.History()
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: "limit must be a positive integer", Field: "limit"})
			return
		}
		limit = n
	}
	if s.opts.Recorder != nil {
		limit = min(limit, max(hist.Cap(), MaxListLimit))
	} else {
		limit = min(limit, hist.Cap())
	}
	var before uint64
	v := q.Get("before")
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: "before must be a tick id", Field: "before"})
			return
		}
		before = n
	}
	f, ferr := parseFilter(r)
	if ferr != nil {
		writeError(w, http.StatusBadRequest, *ferr)
		return
	}
	page := tickPage{Ticks: []json.RawMessage{}, HistoryCap: hist.Cap()}
	if v == "" || before > 1 { // ids start at 1: nothing is below 1 (and List reads 0 as "no bound")
		var err error
		if page, err = s.listPage(r.Context(), f, limit, before); err != nil {
			s.fail(w, r, err, http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, http.StatusOK, page)
}

// getTick serves GET /ticks/{id}: from memory, then from the recorder.
func (s *server) getTick(w http.ResponseWriter, r *http.Request) {
	v := chi.URLParam(r, "id")
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: fmt.Sprintf("tick id %q is not a number", v), Field: "id"})
		return
	}
	if s.serveTick(w, r, id) {
		return
	}
	msg := fmt.Sprintf("tick %d is not in the history (it keeps the last %d ticks", id, s.e.History().Cap())
	if s.opts.Recorder != nil {
		msg = fmt.Sprintf("tick %d is neither in the history nor recorded (the recorder's retention may have removed it", id)
	}
	if l := s.e.History().Latest(); l != nil {
		msg += fmt.Sprintf("; the latest is %d", l.TickID)
	}
	writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: msg + ")"})
}

// postTick serves POST /ticks (admin): in step mode it runs one tick and answers its
// summary; otherwise 409. A client that disconnects does not cancel the tick.
func (s *server) postTick(w http.ResponseWriter, r *http.Request) {
	if !s.e.StepMode() {
		writeError(w, http.StatusConflict, apiError{Code: "not_step_mode",
			Message: "the scheduler runs on a period; POST /ticks needs step mode (cycle.period: 0)"})
		return
	}
	sum, err := s.e.Tick(context.WithoutCancel(r.Context()))
	if err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	s.writeSummary(w, r, http.StatusOK, sum)
}
