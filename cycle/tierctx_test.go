package cycle

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/fault"
)

type ctxKey struct{}

// A tier's context reads like a context.WithDeadline's: its deadline (or the tick's, if
// earlier), DeadlineExceeded once the engine expires it — for contexts derived from it
// too —, Canceled at the tier's end, the tick's own error and cause when the tick is
// cancelled first, and the tick's values.
func TestTierCtx(t *testing.T) {
	for _, c := range []struct {
		name         string
		tickDeadline time.Duration // from the tier's deadline (an hour from the start); 0: none
		act          func(tc *tierCtx, cancelTick context.CancelFunc)
		wantErr      error
		wantKind     fault.Kind    // ClassifyIn(tc, a plain error) once done: KindCanceled only when cancelled, not timed out
		wantDeadline time.Duration // from the tier's deadline
	}{
		{name: "expired by the engine", act: func(tc *tierCtx, _ context.CancelFunc) { tc.expire() },
			wantErr: context.DeadlineExceeded, wantKind: fault.KindInternal},
		{name: "stopped at the tier's end", act: func(tc *tierCtx, _ context.CancelFunc) { tc.stop() },
			wantErr: context.Canceled, wantKind: fault.KindCanceled},
		{name: "stopped, then expired: the first wins", act: func(tc *tierCtx, _ context.CancelFunc) { tc.stop(); tc.expire() },
			wantErr: context.Canceled, wantKind: fault.KindCanceled},
		{name: "the tick cancelled", act: func(_ *tierCtx, cancelTick context.CancelFunc) { cancelTick() },
			wantErr: context.Canceled, wantKind: fault.KindCanceled},
		{name: "expired, then the tick cancelled", act: func(tc *tierCtx, cancelTick context.CancelFunc) { tc.expire(); cancelTick() },
			wantErr: context.DeadlineExceeded, wantKind: fault.KindInternal},
		{name: "the tick's earlier deadline, passed", tickDeadline: -2 * time.Hour,
			act: func(tc *tierCtx, _ context.CancelFunc) {}, wantErr: context.DeadlineExceeded,
			wantKind: fault.KindInternal, wantDeadline: -2 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Now().Add(time.Hour) // the tier's deadline
				tick, cancelTick := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
				defer cancelTick()
				if c.tickDeadline != 0 {
					var cancel context.CancelFunc
					tick, cancel = context.WithDeadline(tick, base.Add(c.tickDeadline))
					defer cancel()
				}
				tc := newTierCtx(tick, base)
				if d, ok := tc.Deadline(); !ok || !d.Equal(base.Add(c.wantDeadline)) {
					t.Fatalf("Deadline %v %v, want %v", d, ok, base.Add(c.wantDeadline))
				}
				if tc.Value(ctxKey{}) != "v" {
					t.Fatal("the tick's values are not visible")
				}
				child, cancelChild := context.WithTimeout(tc, time.Hour) // a module's own sub-context
				defer cancelChild()
				if c.tickDeadline == 0 && (tc.Err() != nil || child.Err() != nil) {
					t.Fatalf("done before anything happened: %v, %v", tc.Err(), child.Err())
				}
				c.act(tc, cancelTick)
				// A derived context is cancelled by a goroutine of its own (AfterFunc): wait
				// for it (virtual time: the bound only reports a failure).
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
		})
	}
}

// Under a tick's context that is never cancelled (context.Background) a tier's context
// answers Err without the context package until the engine expires or stops it, and then
// as under any other.
func TestTierCtxUnderBackground(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(*tierCtx)
		want error
	}{
		{"expired", (*tierCtx).expire, context.DeadlineExceeded},
		{"stopped", (*tierCtx).stop, context.Canceled},
	} {
		tc := newTierCtx(context.Background(), time.Now().Add(time.Hour))
		if !tc.solo || tc.Err() != nil {
			t.Fatalf("%s: before: solo %v, Err %v; want solo and nil", c.name, tc.solo, tc.Err())
		}
		c.end(tc)
		if err := tc.Err(); err != c.want {
			t.Fatalf("%s: Err = %v, want %v", c.name, err, c.want)
		}
		select {
		case <-tc.Done():
		default:
			t.Fatalf("%s: Done not closed", c.name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if tc := newTierCtx(ctx, time.Now().Add(time.Hour)); tc.solo {
		t.Fatal("a tier's context under a cancellable tick's is solo")
	}
}
