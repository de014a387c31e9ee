package cycle

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSafetyRemoval is wrapped by the error of a reload or a removal that would take
// modules out of the safety tier (the first tier) of the configuration last applied or
// pending, unless AllowSafetyRemoval was given: a truncated file or a mistaken DELETE must
// not disarm the cycle silently.
var ErrSafetyRemoval = errors.New("the change removes safety modules")

// SafetyRemovalError is a change refused because it removes the named modules from the
// safety tier; it wraps ErrSafetyRemoval.
type SafetyRemovalError struct {
	// Modules are the safety modules that the change would remove, in registration order.
	Modules []string
}

func (e *SafetyRemovalError) Error() string {
	return fmt.Sprintf("%s: %s (give allow_safety_removal to do so)", ErrSafetyRemoval, strings.Join(e.Modules, ", "))
}

// Unwrap returns ErrSafetyRemoval.
func (e *SafetyRemovalError) Unwrap() error { return ErrSafetyRemoval }

// ChangeOption qualifies a reload or a removal.
type ChangeOption func(*changeOptions)

type changeOptions struct {
	allowSafetyRemoval bool
	removed            *[]string
}

// AllowSafetyRemoval lets the change remove safety modules; the names of those it removes
// are stored in *removed (if not nil), for the log and the audit trail.
func AllowSafetyRemoval(removed *[]string) ChangeOption {
	return func(o *changeOptions) { o.allowSafetyRemoval, o.removed = true, removed }
}

// safetyModules returns the names of the modules that st runs in its first tier, in
// registration order.
func (st *state) safetyModules() []string {
	var out []string
	for _, name := range st.order {
		if ref, ok := st.regs[name]; ok && int(ref.plan) < len(st.plan.Modules) && st.plan.Modules[ref.plan].TierIndex == 0 {
			out = append(out, name)
		}
	}
	return out
}

// checkSafety refuses next when it lacks a safety module of cur, unless opts allow it.
func checkSafety(cur, next *state, opts []ChangeOption) error {
	var o changeOptions
	for _, op := range opts {
		op(&o)
	}
	keep := map[string]bool{}
	for _, n := range next.safetyModules() {
		keep[n] = true
	}
	var lost []string
	for _, n := range cur.safetyModules() {
		if !keep[n] {
			lost = append(lost, n)
		}
	}
	switch {
	case len(lost) == 0:
		return nil
	case !o.allowSafetyRemoval:
		return &SafetyRemovalError{Modules: lost}
	case o.removed != nil:
		*o.removed = lost
	}
	return nil
}
