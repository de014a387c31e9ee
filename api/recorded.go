package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/faultsummary"
)

// MaxListLimit caps GET /ticks?limit= when a recorder extends the history.
const MaxListLimit = 1000

// summaryJSON returns the JSON of sum: the latest summary's cached encoding, else the
// cache's copy by tick id, else a new encoding (kept by id unless sum is compacted: a
// whole copy, from the latest or the recorder, is better than a compacted one).
func (s *server) summaryJSON(sum *faultsummary.Summary) ([]byte, error) {
	if c := s.enc.Load(); c != nil && c.s == sum {
		return c.body, nil
	}
	if b, ok := s.opts.Cache.get(sum.TickID, false); ok {
		return b, nil
	}
	b, err := s.encode(sum)
	if err == nil && !sum.Compacted {
		s.opts.Cache.put(sum.TickID, false, b)
	}
	return b, err
}

// writeBody answers the JSON b of tick id, gzip-compressed when the client accepts it;
// the compressed form is made once per tick id (cached beside the JSON). The latest
// summary is answered in one write from its encoding.
func (s *server) writeBody(w http.ResponseWriter, r *http.Request, status int, id uint64, b []byte) {
	h := w.Header()
	h.Set("Vary", "Accept-Encoding")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	c := s.enc.Load()
	if c != nil && c.s.TickID != id {
		c = nil
	}
	if len(b) < gzipMin || !acceptsGzip(r) {
		h.Set("Content-Length", strconv.Itoa(len(b)+1))
		w.WriteHeader(status)
		if c != nil { // the same tick's JSON is the same bytes
			_, _ = w.Write(c.wire)
			return
		}
		_, _ = w.Write(b)
		_, _ = w.Write([]byte{'\n'})
		return
	}
	var z []byte
	if c != nil {
		c.gzOnce.Do(func() { c.gz = gzipBytes(c.wire) })
		z = c.gz
	} else {
		z, _ = s.opts.Cache.load(id, true, func() ([]byte, error) { return gzipBytes(append(b[:len(b):len(b)], '\n')), nil })
	}
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.Itoa(len(z)))
	w.WriteHeader(status)
	_, _ = w.Write(z)
}

// recordedTick returns the recorded JSON of tick id (through the cache, which reads the
// recorder once per id), or ok false when there is no recorder or it does not have it.
func (s *server) recordedTick(ctx context.Context, id uint64) (b []byte, ok bool, err error) {
	rec := s.opts.Recorder
	if rec == nil {
		return nil, false, nil
	}
	if b, ok := s.opts.Cache.get(id, false); ok {
		return b, true, nil
	}
	b, err = s.opts.Cache.load(id, false, func() ([]byte, error) { return rec.Tick(ctx, id) })
	if errors.Is(err, recorder.ErrNotFound) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// serveTick answers GET /ticks/{id}: from the cache, the in-memory history (a whole
// summary), the recorder, then a compacted summary of the history.
func (s *server) serveTick(w http.ResponseWriter, r *http.Request, id uint64) bool {
	if b, ok := s.opts.Cache.get(id, false); ok {
		s.writeTagged(w, r, id, b)
		return true
	}
	sum, inMem := s.e.History().Get(id)
	if inMem && !sum.Compacted {
		s.writeSummary(w, r, http.StatusOK, sum)
		return true
	}
	b, ok, err := s.recordedTick(r.Context(), id)
	if err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return true
	}
	if ok {
		s.writeTagged(w, r, id, b)
		return true
	}
	if inMem {
		s.writeSummary(w, r, http.StatusOK, sum)
		return true
	}
	return false
}

// writeTagged answers the JSON of tick id with its ETag (304 when If-None-Match matches).
func (s *server) writeTagged(w http.ResponseWriter, r *http.Request, id uint64, b []byte) {
	tag := s.etag(id)
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "no-cache")
	if notModified(r.Header.Get("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.writeBody(w, r, http.StatusOK, id, b)
}

// parseFilter reads the filters of GET /ticks: severity, module, status, since, until.
func parseFilter(r *http.Request) (recorder.Filter, *apiError) {
	q := r.URL.Query()
	f := recorder.Filter{Severity: faultsummary.Severity(q.Get("severity")), Module: q.Get("module"),
		Status: faultsummary.Status(q.Get("status"))}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, &apiError{Code: "bad_parameter", Message: p.name + " must be an RFC 3339 time", Field: p.name}
			}
			*p.t = t
		}
	}
	if field, err := f.Validate(); err != nil {
		return f, &apiError{Code: "bad_parameter", Message: err.Error(), Field: field}
	}
	return f, nil
}

// tickPage is the answer of GET /ticks, its summaries as encoded once.
type tickPage struct {
	Ticks      []json.RawMessage `json:"ticks"`
	Count      int               `json:"count"`
	NextBefore uint64            `json:"next_before"`
	HistoryCap int               `json:"history_cap"`
}

// listPage returns up to limit ticks below before passing f, newest first: those in
// memory, then the recorder's older ones. With a recorder, a filtered list scans only the
// newest summaries in memory (those kept whole, see faultsummary.KeepWhole) and asks the
// recorder for the rest, rather than rebuilding every compacted summary to test it.
func (s *server) listPage(ctx context.Context, f recorder.Filter, limit int, before uint64) (tickPage, error) {
	hist := s.e.History()
	rec := s.opts.Recorder
	p := tickPage{Ticks: []json.RawMessage{}, HistoryCap: hist.Cap()}
	n := limit
	if !f.Empty() {
		n = hist.Cap()
		if rec != nil {
			n = min(n, faultsummary.KeepWhole)
		}
	}
	var last uint64
	scanned := hist.List(n, before)
	for _, sum := range scanned {
		if len(p.Ticks) == limit {
			break
		}
		if !f.Match(sum) {
			continue
		}
		b, err := s.summaryJSON(sum)
		if err != nil {
			return p, err
		}
		p.Ticks, last = append(p.Ticks, b), sum.TickID
	}
	if rec != nil && len(p.Ticks) < limit {
		rb := before
		if len(scanned) > 0 {
			rb = scanned[len(scanned)-1].TickID
		} else if o := hist.Oldest(); o > 0 && (rb == 0 || o < rb) {
			rb = o
		}
		rows, err := rec.Ticks(ctx, recorder.Query{Filter: f, Before: rb, Limit: limit - len(p.Ticks)})
		if err != nil {
			return p, fmt.Errorf("list recorded ticks: %w", err)
		}
		for _, t := range rows {
			p.Ticks, last = append(p.Ticks, t.JSON), t.ID
		}
	}
	p.Count = len(p.Ticks)
	if p.Count == limit && last > 1 {
		p.NextBefore = last
	}
	return p, nil
}

// eventPage is the answer of GET /events.
type eventPage struct {
	Events []recorder.Event `json:"events"`
	Count  int              `json:"count"`
	// NextAfter is the after= of the next page: the id of the last event answered.
	NextAfter uint64 `json:"next_after"`
}

// listEvents serves GET /events?after=ID&kind=K&limit=N: recorded events with ids above
// after, oldest first (501 without a recorder).
func (s *server) listEvents(w http.ResponseWriter, r *http.Request) {
	rec := s.opts.Recorder
	if rec == nil {
		writeError(w, http.StatusNotImplemented, apiError{Code: "not_configured",
			Message: "events are kept by the flight recorder, which is off (recorder.enabled)"})
		return
	}
	q := r.URL.Query()
	eq := recorder.EventQuery{Kind: q.Get("kind"), Limit: DefaultListLimit}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: "after must be an event id", Field: "after"})
			return
		}
		eq.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, apiError{Code: "bad_parameter", Message: "limit must be a positive integer", Field: "limit"})
			return
		}
		eq.Limit = min(n, MaxListLimit)
	}
	evs, err := rec.Events(r.Context(), eq)
	if err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	p := eventPage{Events: evs, Count: len(evs), NextAfter: eq.After}
	if len(evs) > 0 {
		p.NextAfter = evs[len(evs)-1].ID
	}
	writeJSON(w, http.StatusOK, p)
}
