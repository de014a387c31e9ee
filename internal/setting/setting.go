// Package setting is the error a policy package's Check reports for each of its settings
// out of bounds, named as the configuration file names it, so that the configuration
// reports it under its own path ("breakers.db.failure_threshold: must be >= 1") while the
// rule lives in the package whose settings it bounds.
package setting

import (
	"errors"
	"fmt"
)

// Error is one setting out of its bounds.
type Error struct {
	// Field names the setting as a configuration file does ("failure_threshold").
	Field string
	// Message says what it must be ("must be >= 1").
	Message string
}

// Error returns "field: message".
func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Errorf returns the Error of field, its message formatted.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Join returns the errors of es as one error, nil if there is none.
func Join(es []*Error) error {
	if len(es) == 0 {
		return nil
	}
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Each calls f with every Error that err holds (err itself, or those an errors.Join
// holds), in order; an error that is no Error is given as one with an empty Field.
func Each(err error, f func(field, message string)) {
	switch e := err.(type) {
	case nil:
	case *Error:
		f(e.Field, e.Message)
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			Each(x, f)
		}
	default:
		f("", err.Error())
	}
}

// Report gives each Error that err holds to add, its path the field's under prefix
// ("breakers.db" and "cooldown": "breakers.db.cooldown"; an empty field: prefix itself).
func Report(prefix string, err error, add func(path, format string, args ...any)) {
	Each(err, func(field, message string) {
		p := prefix
		if field != "" {
			p += "." + field
		}
		add(p, "%s", message)
	})
}

// Has reports whether err holds an Error of field.
func Has(err error, field string) bool {
	found := false
	Each(err, func(f, _ string) { found = found || f == field })
	return found
}
