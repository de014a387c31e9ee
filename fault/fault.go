package fault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
)

// Kind is the class of a fault. The zero value KindNone means "no fault".
type Kind uint8

// The fault kinds, in the order of the table in docs/architecture.md.
const (
	// KindNone is the kind of a nil error.
	KindNone Kind = iota
	// KindValidation: the module's input was invalid. Not retried.
	KindValidation
	// KindContract: permanent; bad config or a broken invariant. Not retried.
	KindContract
	// KindControl: an expected short-circuit (gated off, nothing to do); not a fault.
	KindControl
	// KindCanceled: the tick or the daemon was cancelled; not the module's fault.
	KindCanceled
	// KindTransient: timeout, I/O, 429/503, lock contention. Retried.
	KindTransient
	// KindDownstream: a remote answered 4xx (not 429) or unparsable output. Retried only by opt-in.
	KindDownstream
	// KindInternal: a panic or a bug in a module; also every unknown error.
	KindInternal
	numKinds
)

var kindNames = [numKinds]string{"none", "validation", "contract", "control", "canceled", "transient", "downstream", "internal"}

// String returns the lowercase name of k ("transient", …).
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// IsFault reports whether k counts as a fault at all (not KindNone, KindControl or KindCanceled).
func (k Kind) IsFault() bool {
	return k != KindNone && k != KindControl && k != KindCanceled && k < numKinds
}

// MarshalText encodes k as its lowercase name.
func (k Kind) MarshalText() ([]byte, error) {
	if k >= numKinds {
		return nil, fmt.Errorf("fault: invalid kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText parses a lowercase kind name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ParseKind parses a kind name as written in configuration ("transient"). "permanent" is
// accepted as an alias of "contract".
func ParseKind(s string) (Kind, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "permanent" {
		return KindContract, nil
	}
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return KindNone, fmt.Errorf("unknown fault kind %q (want one of %s)", s, strings.Join(kindNames[1:], ", "))
}

// Kinds returns every fault kind except KindNone, in table order.
func Kinds() []Kind {
	out := make([]Kind, 0, numKinds-1)
	for k := KindValidation; k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

// Error is an error marked with a fault kind. Use the constructors rather than building one.
type Error struct {
	// Kind is the fault kind the error was marked with.
	Kind Kind
	// Err is the underlying error.
	Err error
}

// Error returns the wrapped error's message.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Kind.String() + " fault"
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Wrap marks err with kind k. A nil err stays nil.
func Wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// Transient marks err as transient (retried within the budget).
func Transient(err error) error { return Wrap(KindTransient, err) }

// Permanent marks err as a contract fault: never retried.
func Permanent(err error) error { return Wrap(KindContract, err) }

// Validation marks err as a validation fault: the module's input was invalid.
func Validation(err error) error { return Wrap(KindValidation, err) }

// Control marks err as an expected short-circuit; it is not a fault.
func Control(err error) error { return Wrap(KindControl, err) }

// Downstream marks err as a downstream fault: a remote rejected the call or answered garbage.
func Downstream(err error) error { return Wrap(KindDownstream, err) }

// Internal marks err as an internal fault: a bug.
func Internal(err error) error { return Wrap(KindInternal, err) }

// PanicError is a panic recovered from a module. It classifies as KindInternal.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic, if captured.
	Stack []byte
}

// Error describes the panic value.
func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is sees through it.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

// Classify returns the kind of err. It is the one place where errors are classified:
//
//   - nil is KindNone;
//   - a recovered panic (*PanicError) anywhere in the chain is KindInternal;
//   - the first error marked by Wrap (or a constructor) found by errors.As, depth first
//     through wrapped and joined errors, gives its kind;
//   - context.DeadlineExceeded, os.ErrDeadlineExceeded, a net.Error that timed out,
//     ECONNREFUSED, ECONNRESET and EPIPE are KindTransient;
//   - context.Canceled is KindCanceled;
//   - anything else is KindInternal.
func Classify(err error) Kind {
	if err == nil {
		return KindNone
	}
	// errors.AsType rather than errors.As: As takes the address of a local, which then
	// escapes (two allocations per failed run, on the tick's path).
	if _, ok := errors.AsType[*PanicError](err); ok {
		return KindInternal
	}
	if fe, ok := errors.AsType[*Error](err); ok {
		return fe.Kind
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return KindTransient
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return KindTransient
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return KindTransient
	}
	return KindInternal
}

// ClassifyIn classifies err returned by work done under ctx. When ctx itself was
// cancelled (not timed out) the result is KindCanceled whatever err says, because a
// cancellation of the caller's own context is not the callee's fault. When ctx is still
// live, a context.Canceled in err that no Wrap marked is the callee's own (a sub-operation
// it cancelled), not the tick's or the daemon's: KindInternal, which a breaker counts,
// where KindCanceled would let a module fail every tick unnoticed.
func ClassifyIn(ctx context.Context, err error) Kind {
	if err == nil {
		return KindNone
	}
	if ctx != nil && errors.Is(ctx.Err(), context.Canceled) && errors.Is(context.Cause(ctx), context.Canceled) {
		return KindCanceled
	}
	k := Classify(err)
	if k == KindCanceled && ctx != nil && ctx.Err() == nil {
		if _, marked := errors.AsType[*Error](err); !marked {
			return KindInternal
		}
	}
	return k
}
