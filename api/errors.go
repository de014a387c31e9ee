package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// HTTPError is an error that carries the answer the API gives for it. The callbacks of
// Options (Reload, DecodeModule, Faults) may return one, possibly wrapped, to choose the
// status, code and field of the JSON error.
type HTTPError struct {
	// Status is the HTTP status (e.g. http.StatusConflict).
	Status int
	// Code is the machine-readable error code ("conflict", …). Empty: derived from Status.
	Code string
	// Field names the offending input field, if any (the first, when there are several).
	Field string
	// Problems lists every finding with its field, when there are several; answered as
	// "problems" beside Field.
	Problems tiers.Problems
	// Err is the cause; its message is the error's message.
	Err error
}

// Error returns the cause's message.
func (e *HTTPError) Error() string {
	if e.Err == nil {
		return http.StatusText(e.Status)
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *HTTPError) Unwrap() error { return e.Err }

// DecodeStrict decodes exactly one JSON value from body into v, rejecting unknown fields
// and trailing data. Its errors are answered with 400 (and the field, when known) by the
// API; it is meant for the DecodeModule and Faults callbacks.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("decode: empty body: %w", io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode: %w", errTrailingData)
	}
	return nil
}

var errTrailingData = errors.New("unexpected data after the JSON value")

// apiError is the body of every error answer, under the "error" key.
type apiError struct {
	Code     string         `json:"code"`
	Message  string         `json:"message"`
	Field    string         `json:"field"`
	Problems tiers.Problems `json:"problems,omitempty"`
}

type errorBody struct {
	Error apiError `json:"error"`
}

// writeError writes the JSON error answer.
func writeError(w http.ResponseWriter, status int, e apiError) {
	if e.Code == "" {
		e.Code = codeFor(status)
	}
	writeJSON(w, status, errorBody{Error: e})
}

// codeFor returns the default code of a status.
func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "body_too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusUnprocessableEntity:
		return "invalid"
	case http.StatusNotImplemented:
		return "not_implemented"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 500 {
		return "internal"
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}

// classify maps err to its answer; def is the status of an error nothing else claims.
func classify(err error, def int) (int, apiError) {
	msg := err.Error()
	var he *HTTPError
	var mbe *http.MaxBytesError
	var ve *tiers.ValidationError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &he):
		st := he.Status
		if st == 0 {
			st = def
		}
		return st, apiError{Code: he.Code, Message: msg, Field: he.Field, Problems: he.Problems}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, apiError{Code: "body_too_large",
			Message: fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)}
	case errors.As(err, &ve):
		e := apiError{Code: "invalid", Message: msg, Problems: ve.Problems}
		if len(ve.Problems) > 0 {
			e.Field = ve.Problems[0].Path
		}
		return http.StatusUnprocessableEntity, e
	case errors.Is(err, config.ErrSyntax), errors.Is(err, config.ErrRead):
		// A configuration file that is not YAML, or that cannot be read (missing, a
		// directory, too large): the reload is rejected, the config stays.
		return http.StatusUnprocessableEntity, apiError{Code: "invalid", Message: msg}
	case errors.Is(err, cycle.ErrNotFound):
		return http.StatusNotFound, apiError{Code: "not_found", Message: msg}
	case errors.Is(err, cycle.ErrDuplicate):
		return http.StatusConflict, apiError{Code: "duplicate", Message: msg}
	case errors.Is(err, cycle.ErrSafetyRemoval):
		return http.StatusConflict, apiError{Code: "safety_removal", Message: msg}
	case errors.Is(err, cycle.ErrNotRuntime):
		return http.StatusConflict, apiError{Code: "not_runtime", Message: msg}
	case errors.Is(err, cycle.ErrNotStepMode):
		return http.StatusConflict, apiError{Code: "not_step_mode", Message: msg}
	case errors.Is(err, errors.ErrUnsupported), errors.Is(err, modules.ErrNotInjectable):
		return http.StatusConflict, apiError{Code: "unsupported", Message: msg}
	case errors.Is(err, cycle.ErrClosed):
		return http.StatusServiceUnavailable, apiError{Code: "closed", Message: msg}
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errTrailingData):
		return http.StatusBadRequest, apiError{Code: "malformed_json", Message: msg}
	case errors.As(err, &te):
		return http.StatusBadRequest, apiError{Code: "bad_type", Message: msg, Field: te.Field}
	}
	if f, ok := unknownField(msg); ok {
		return http.StatusBadRequest, apiError{Code: "unknown_field", Message: msg, Field: f}
	}
	return def, apiError{Code: codeFor(def), Message: msg}
}

// unknownField extracts the field of encoding/json's `json: unknown field "x"` error, which
// has no type of its own.
func unknownField(msg string) (string, bool) {
	const marker = `json: unknown field "`
	i := strings.Index(msg, marker)
	if i < 0 {
		return "", false
	}
	rest := msg[i+len(marker):]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

// fail writes the answer for err and logs server errors.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error, def int) {
	status, e := classify(err, def)
	if status >= 500 && status != http.StatusNotImplemented && status != http.StatusServiceUnavailable {
		s.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	}
	writeError(w, status, e)
}

// writeJSON writes v as JSON with a trailing newline. An encoding failure is answered
// with a 500 JSON error instead.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: apiError{Code: "internal", Message: "encoding the answer: " + err.Error()}})
	}
	writeRaw(w, status, b)
}

// writeRaw writes an already encoded JSON body with a trailing newline.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
}
