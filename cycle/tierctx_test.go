package cycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cycled/cycled/fault"
)

type ctxKey struct{}

// A tier's context reads like a context.WithDeadline's: its deadline (or the tick's, if
// earlier), DeadlineExceeded once the engine expires it — for contexts derived from it
// too —, Canceled at the tier's end, the tick's own error and cause when the tick is
// cancelled first, and the tick's values.
func TestTierCtx(t *testing.T) {
	base := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		tickDeadline time.Time // zero: none
		act          func(tc *tierCtx, cancelTick context.CancelFunc)
		wantErr      error
		wantKind     fault.Kind // ClassifyIn(tc, a plain error) once done: KindCanceled only when cancelled, not timed out
		wantDeadline time.Time
	}{
		{name: "expired by the engine", act: func(tc *tierCtx, _ context.CancelFunc) { tc.expire() },
			wantErr: context.DeadlineExceeded, wantKind: fault.KindInternal, wantDeadline: base},
		{name: "stopped at the tier's end", act: func(tc *tierCtx, _ context.CancelFunc) { tc.stop() },
			wantErr: context.Canceled, wantKind: fault.KindCanceled, wantDeadline: base},
		{name: "stopped, then expired: the first wins", act: func(tc *tierCtx, _ context.CancelFunc) { tc.stop(); tc.expire() },
			wantErr: context.Canceled, wantKind: fault.KindCanceled, wantDeadline: base},
		{name: "the tick cancelled", act: func(_ *tierCtx, cancelTick context.CancelFunc) { cancelTick() },
			wantErr: context.Canceled, wantKind: fault.KindCanceled, wantDeadline: base},
		{name: "expired, then the tick cancelled", act: func(tc *tierCtx, cancelTick context.CancelFunc) { tc.expire(); cancelTick() },
			wantErr: context.DeadlineExceeded, wantKind: fault.KindInternal, wantDeadline: base},
		{name: "the tick's earlier deadline", tickDeadline: base.Add(-time.Hour),
			act: func(tc *tierCtx, _ context.CancelFunc) {}, wantErr: context.DeadlineExceeded,
			wantKind: fault.KindInternal, wantDeadline: base.Add(-time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			tick, cancelTick := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
			defer cancelTick()
			if !c.tickDeadline.IsZero() {
				var cancel context.CancelFunc
				tick, cancel = context.WithDeadline(tick, c.tickDeadline)
				defer cancel()
			}
			tc := newTierCtx(tick, base)
			if d, ok := tc.Deadline(); !ok || !d.Equal(c.wantDeadline) {
				t.Fatalf("Deadline %v %v, want %v", d, ok, c.wantDeadline)
			}
			if tc.Value(ctxKey{}) != "v" {
				t.Fatal("the tick's values are not visible")
			}
			child, cancelChild := context.WithTimeout(tc, time.Hour) // a module's own sub-context
			defer cancelChild()
			if c.tickDeadline.IsZero() && (tc.Err() != nil || child.Err() != nil) {
				t.Fatalf("done before anything happened: %v, %v", tc.Err(), child.Err())
			}
			c.act(tc, cancelTick)
			// A derived context is cancelled by a goroutine of its own (AfterFunc): wait
			// for it, with a bound only for a failure to report.
			for _, x := range []struct {
				what string
				ctx  context.Context
			}{{"the tier's context", tc}, {"a context derived from it (as under a context.WithDeadline)", child}} {
				select {
				case <-x.ctx.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s was not cancelled", x.what)
				}
				if err := x.ctx.Err(); err != c.wantErr {
					t.Fatalf("%s: Err %v, want %v", x.what, err, c.wantErr)
				}
			}
			if k := fault.ClassifyIn(tc, errors.New("module error")); k != c.wantKind {
				t.Fatalf("ClassifyIn %v, want %v", k, c.wantKind)
			}
		})
	}
}
