package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// timeoutError is a net.Error; timeout says whether it timed out.
type timeoutError struct{ timeout bool }

func (e timeoutError) Error() string   { return fmt.Sprintf("net op (timeout=%v)", e.timeout) }
func (e timeoutError) Timeout() bool   { return e.timeout }
func (e timeoutError) Temporary() bool { return e.timeout }

var _ net.Error = timeoutError{}

func TestClassify(t *testing.T) {
	base := errors.New("boom")
	connRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, KindNone},

		{"Transient", Transient(base), KindTransient},
		{"Permanent", Permanent(base), KindContract},
		{"Validation", Validation(base), KindValidation},
		{"Control", Control(base), KindControl},
		{"Downstream", Downstream(base), KindDownstream},
		{"Internal", Internal(base), KindInternal},
		{"Wrap canceled", Wrap(KindCanceled, base), KindCanceled},
		{"Error with nil Err", &Error{Kind: KindDownstream}, KindDownstream},

		{"wrapped %w", fmt.Errorf("tier 1: %w", Transient(base)), KindTransient},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", Validation(base))), KindValidation},
		{"%v loses the mark", fmt.Errorf("flattened: %v", Transient(base)), KindInternal},
		{"outer mark wins over inner mark", Permanent(fmt.Errorf("x: %w", Transient(base))), KindContract},
		{"mark overrides deadline", Permanent(context.DeadlineExceeded), KindContract},
		{"mark overrides canceled", Transient(context.Canceled), KindTransient},

		{"join: first marked wins", errors.Join(Transient(base), Permanent(base)), KindTransient},
		{"join: order matters", errors.Join(Permanent(base), Transient(base)), KindContract},
		{"join: unmarked first is skipped", errors.Join(base, Downstream(base)), KindDownstream},
		{"join: depth first", errors.Join(fmt.Errorf("a: %w", Validation(base)), Transient(base)), KindValidation},
		{"join: nested join depth first", errors.Join(errors.Join(base, Control(base)), Transient(base)), KindControl},
		{"join: marks beat sentinels", errors.Join(context.Canceled, Downstream(base)), KindDownstream},
		{"multi %w: first marked wins", fmt.Errorf("%w and %w", Downstream(base), Transient(base)), KindDownstream},

		{"context.DeadlineExceeded", context.DeadlineExceeded, KindTransient},
		{"wrapped DeadlineExceeded", fmt.Errorf("call: %w", context.DeadlineExceeded), KindTransient},
		{"context.Canceled", context.Canceled, KindCanceled},
		{"wrapped Canceled", fmt.Errorf("call: %w", context.Canceled), KindCanceled},
		{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded, KindTransient},
		{"ECONNREFUSED in *net.OpError", connRefused, KindTransient},
		{"wrapped ECONNREFUSED", fmt.Errorf("remote: %w", connRefused), KindTransient},
		{"ECONNRESET", fmt.Errorf("read: %w", syscall.ECONNRESET), KindTransient},
		{"EPIPE", fmt.Errorf("write: %w", syscall.EPIPE), KindTransient},
		{"net.Error Timeout", timeoutError{timeout: true}, KindTransient},
		{"wrapped net.Error Timeout", fmt.Errorf("get: %w", timeoutError{timeout: true}), KindTransient},
		{"net.Error without Timeout", timeoutError{timeout: false}, KindInternal},

		{"PanicError", &PanicError{Value: "oops"}, KindInternal},
		{"PanicError of an error", &PanicError{Value: base}, KindInternal},
		{"PanicError wrapping a marked error", &PanicError{Value: Transient(base)}, KindInternal},
		{"PanicError wrapping Canceled", &PanicError{Value: context.Canceled}, KindInternal},
		{"wrapped PanicError", fmt.Errorf("module x: %w", &PanicError{Value: Validation(base)}), KindInternal},
		{"PanicError inside a marked error", Transient(&PanicError{Value: 1}), KindInternal},
		{"join: PanicError anywhere", errors.Join(Transient(base), &PanicError{Value: 1}), KindInternal},

		{"unknown", base, KindInternal},
		{"io.EOF", io.EOF, KindInternal},
		{"wrapped unknown", fmt.Errorf("x: %w", base), KindInternal},
		{"empty join of unknowns", errors.Join(base, io.EOF), KindInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			// Without a cancelled caller context, ClassifyIn agrees with Classify, except
			// that an unmarked Canceled is then the callee's own: internal.
			want := tt.want
			if _, marked := errors.AsType[*Error](tt.err); want == KindCanceled && !marked {
				want = KindInternal
			}
			if got := ClassifyIn(context.Background(), tt.err); got != want {
				t.Errorf("ClassifyIn(Background, %v) = %v, want %v", tt.err, got, want)
			}
		})
	}
}

func TestWrapNil(t *testing.T) {
	for _, f := range []func(error) error{Transient, Permanent, Validation, Control, Downstream, Internal} {
		if err := f(nil); err != nil {
			t.Errorf("constructor(nil) = %v, want nil", err)
		}
	}
	if err := Wrap(KindTransient, nil); err != nil {
		t.Errorf("Wrap(transient, nil) = %v, want nil", err)
	}
}

func TestErrorMessageAndUnwrap(t *testing.T) {
	base := errors.New("boom")
	err := Transient(base)
	if err.Error() != "boom" {
		t.Errorf("Error() = %q, want the wrapped message", err.Error())
	}
	if !errors.Is(err, base) {
		t.Error("errors.Is does not see through a marked error")
	}
	if got := (&Error{Kind: KindDownstream}).Error(); got != "downstream fault" {
		t.Errorf("Error() without Err = %q", got)
	}
	var fe *Error
	if !errors.As(fmt.Errorf("x: %w", err), &fe) || fe.Kind != KindTransient || fe.Err != base {
		t.Errorf("errors.As = %+v", fe)
	}

	p := &PanicError{Value: base, Stack: []byte("stack")}
	if p.Error() != "panic: boom" {
		t.Errorf("PanicError.Error() = %q", p.Error())
	}
	if !errors.Is(p, base) {
		t.Error("errors.Is does not see through a PanicError of an error")
	}
	if (&PanicError{Value: 42}).Unwrap() != nil {
		t.Error("PanicError of a non-error unwraps to non-nil")
	}
	if got := (&PanicError{Value: 42}).Error(); got != "panic: 42" {
		t.Errorf("PanicError.Error() = %q", got)
	}
}

func TestClassifyIn(t *testing.T) {
	base := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -1)
	defer cancel2()
	// A child of a timed-out context carries the deadline as its error.
	expiredChild, cancel3 := context.WithCancel(expired)
	defer cancel3()
	// A context cancelled with a cause of its own (the engine abandoning an attempt) is not
	// the caller's plain cancellation: the error keeps its kind (retrybudget relies on it).
	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("tier abandoned"))
	// A cause that is a cancellation (signal.NotifyContext's cause matches
	// context.Canceled) is the caller's cancellation, e.g. the daemon's shutdown.
	shutdown, cancelShutdown := context.WithCancelCause(context.Background())
	cancelShutdown(fmt.Errorf("SIGTERM received: %w", context.Canceled))
	// A deadline with a custom cause is still a deadline.
	deadlineCause, cancel4 := context.WithTimeoutCause(context.Background(), -1, errors.New("tier budget spent"))
	defer cancel4()
	// A context cancelled because its deadline passed on another clock (the way a fake
	// clock implements deadlines): Err is Canceled but the cause is DeadlineExceeded.
	fakeDeadline, cancelFake := context.WithCancelCause(context.Background())
	cancelFake(context.DeadlineExceeded)

	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want Kind
	}{
		{"nil error, cancelled ctx", cancelled, nil, KindNone},
		{"nil ctx", nil, Transient(base), KindTransient},
		{"live ctx classifies normally", context.Background(), Validation(base), KindValidation},
		{"live ctx, the callee's own Canceled", context.Background(), fmt.Errorf("sub-call: %w", context.Canceled), KindInternal},
		{"live ctx, Canceled marked by Wrap", context.Background(), Wrap(KindCanceled, context.Canceled), KindCanceled},

		{"cancelled ctx, transient", cancelled, Transient(base), KindCanceled},
		{"cancelled ctx, permanent", cancelled, Permanent(base), KindCanceled},
		{"cancelled ctx, unknown", cancelled, base, KindCanceled},
		{"cancelled ctx, deadline", cancelled, context.DeadlineExceeded, KindCanceled},
		{"cancelled ctx, panic", cancelled, &PanicError{Value: 1}, KindCanceled},
		{"cancelled with a cause of its own", caused, Transient(base), KindTransient},
		{"cancelled with a cause of its own, unknown", caused, base, KindInternal},
		{"cancelled with a cause of its own, Canceled", caused, context.Canceled, KindCanceled},
		{"cancelled with a Canceled cause (shutdown)", shutdown, Transient(base), KindCanceled},

		{"deadline exceeded, ctx error", expired, context.DeadlineExceeded, KindTransient},
		{"deadline exceeded, wrapped ctx error", expired, fmt.Errorf("call: %w", expired.Err()), KindTransient},
		{"deadline exceeded, marked", expired, Downstream(base), KindDownstream},
		{"deadline exceeded, unknown", expired, base, KindInternal},
		{"child of an expired ctx", expiredChild, context.DeadlineExceeded, KindTransient},
		{"deadline with a custom cause", deadlineCause, context.DeadlineExceeded, KindTransient},
		{"fake-clock deadline (cause DeadlineExceeded)", fakeDeadline, context.Canceled, KindCanceled},
		{"fake-clock deadline, deadline error", fakeDeadline, context.DeadlineExceeded, KindTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyIn(tt.ctx, tt.err); got != tt.want {
				t.Errorf("ClassifyIn(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestKindStringAndIsFault(t *testing.T) {
	want := map[Kind]struct {
		name  string
		fault bool
	}{
		KindNone:       {"none", false},
		KindValidation: {"validation", true},
		KindContract:   {"contract", true},
		KindControl:    {"control", false},
		KindCanceled:   {"canceled", false},
		KindTransient:  {"transient", true},
		KindDownstream: {"downstream", true},
		KindInternal:   {"internal", true},
		Kind(200):      {"kind(200)", false},
	}
	for k, w := range want {
		if k.String() != w.name || k.IsFault() != w.fault {
			t.Errorf("Kind(%d): String %q IsFault %v, want %q %v", uint8(k), k.String(), k.IsFault(), w.name, w.fault)
		}
	}
	if got := Kinds(); !slices.Equal(got, []Kind{KindValidation, KindContract, KindControl, KindCanceled, KindTransient, KindDownstream, KindInternal}) {
		t.Errorf("Kinds() = %v", got)
	}
}

func TestKindTextRoundTrip(t *testing.T) {
	for k := KindNone; k < numKinds; k++ {
		t.Run(k.String(), func(t *testing.T) {
			b, err := k.MarshalText()
			if err != nil {
				t.Fatalf("MarshalText: %v", err)
			}
			if string(b) != k.String() {
				t.Errorf("MarshalText = %q, want %q", b, k.String())
			}
			var got Kind = 99
			if err := got.UnmarshalText(b); err != nil || got != k {
				t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, got, err, k)
			}
			if p, err := ParseKind(string(b)); err != nil || p != k {
				t.Errorf("ParseKind(%q) = %v, %v", b, p, err)
			}
			// Through encoding/json, which uses the text methods.
			j, err := json.Marshal(map[string]Kind{"k": k})
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]Kind
			if err := json.Unmarshal(j, &m); err != nil || m["k"] != k {
				t.Errorf("JSON round trip of %s = %v, %v", j, m["k"], err)
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		in      string
		want    Kind
		wantErr bool
	}{
		{"transient", KindTransient, false},
		{"permanent", KindContract, false},
		{"Permanent", KindContract, false},
		{"  TRANSIENT\n", KindTransient, false},
		{"contract", KindContract, false},
		{"none", KindNone, false},
		{"", KindNone, true},
		{"fatal", KindNone, true},
		{"kind(3)", KindNone, true},
	}
	for _, tt := range tests {
		got, err := ParseKind(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	_, err := ParseKind("fatal")
	if err == nil || !strings.Contains(err.Error(), `"fatal"`) || !strings.Contains(err.Error(), "transient") {
		t.Errorf("ParseKind error %v should name the input and the valid kinds", err)
	}

	var k = KindTransient
	if err := k.UnmarshalText([]byte("fatal")); err == nil || k != KindTransient {
		t.Errorf("UnmarshalText(fatal) = %v and changed the kind to %v", err, k)
	}
	var v Kind
	if err := v.UnmarshalText([]byte("permanent")); err != nil || v != KindContract {
		t.Errorf("UnmarshalText(permanent) = %v, %v", v, err)
	}
	if _, err := Kind(numKinds).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid kind succeeded")
	}
	if _, err := json.Marshal(Kind(200)); err == nil {
		t.Error("json.Marshal of an invalid kind succeeded")
	}
}

func TestSet(t *testing.T) {
	s := SetOf(KindTransient, KindDownstream)
	for k := KindNone; k < numKinds; k++ {
		want := k == KindTransient || k == KindDownstream
		if s.Has(k) != want {
			t.Errorf("SetOf(transient, downstream).Has(%v) = %v", k, s.Has(k))
		}
	}
	if s.Has(Kind(200)) || s.Has(numKinds) {
		t.Error("Has of an invalid kind is true")
	}
	if s.String() != "transient,downstream" {
		t.Errorf("String() = %q", s.String())
	}
	if !slices.Equal(s.Kinds(), []Kind{KindTransient, KindDownstream}) {
		t.Errorf("Kinds() = %v", s.Kinds())
	}
	if SetOf(KindDownstream, KindTransient, KindTransient) != s {
		t.Error("SetOf depends on order or duplicates")
	}

	var empty Set
	if !empty.Empty() || empty.String() != "" || len(empty.Kinds()) != 0 || SetOf() != empty {
		t.Errorf("zero Set: Empty %v String %q", empty.Empty(), empty.String())
	}
	if s.Empty() {
		t.Error("non-empty set reports Empty")
	}

	if AllFaults.String() != "validation,contract,transient,downstream,internal" {
		t.Errorf("AllFaults = %q", AllFaults.String())
	}
	for k := KindNone; k < numKinds; k++ {
		if AllFaults.Has(k) != k.IsFault() {
			t.Errorf("AllFaults.Has(%v) = %v, IsFault %v", k, AllFaults.Has(k), k.IsFault())
		}
	}
}

func TestParseSet(t *testing.T) {
	tests := []struct {
		in      []string
		want    Set
		wantErr string
	}{
		{nil, 0, ""},
		{[]string{}, 0, ""},
		{[]string{"transient", "downstream"}, SetOf(KindTransient, KindDownstream), ""},
		{[]string{"permanent", "contract"}, SetOf(KindContract), ""},
		{[]string{" Internal "}, SetOf(KindInternal), ""},
		{[]string{"transient", "bogus"}, 0, `[1]: unknown fault kind "bogus"`},
		{[]string{"none"}, 0, `[0]: "none" is not a fault kind`},
	}
	for _, tt := range tests {
		got, err := ParseSet(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != 0 {
				t.Errorf("ParseSet(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSet(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	// String and ParseSet round trip.
	for _, s := range []Set{0, AllFaults, SetOf(KindTransient), SetOf(KindControl, KindCanceled)} {
		var names []string
		if str := s.String(); str != "" {
			names = strings.Split(str, ",")
		}
		got, err := ParseSet(names)
		if err != nil || got != s {
			t.Errorf("ParseSet(String(%v)) = %v, %v", s, got, err)
		}
	}
}

func ExampleClassify() {
	base := errors.New("upstream said 503")
	for _, err := range []error{
		nil,
		Transient(base),
		fmt.Errorf("lidar: %w", Permanent(errors.New("bad calibration file"))),
		errors.Join(Validation(errors.New("empty frame")), Transient(base)),
		fmt.Errorf("fetch: %w", context.DeadlineExceeded),
		context.Canceled,
		&PanicError{Value: "index out of range"},
		errors.New("something unexpected"),
	} {
		k := Classify(err)
		fmt.Printf("%-10s fault=%v\n", k, k.IsFault())
	}
	// Output:
	// none       fault=false
	// transient  fault=true
	// contract   fault=true
	// validation fault=true
	// transient  fault=true
	// canceled   fault=false
	// internal   fault=true
	// internal   fault=true
}

func BenchmarkClassify(b *testing.B) {
	cases := []struct {
		name string
		err  error
	}{
		{"marked-wrapped", fmt.Errorf("tier knowledge: module lidar: %w", Transient(errors.New("503")))},
		{"plain", errors.New("something unexpected")},
		{"deadline-wrapped", fmt.Errorf("call: %w", context.DeadlineExceeded)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Classify(c.err)
			}
		})
	}
}
