package sqlite

import (
	"context"
	"testing"
)

// retainNow waits for the writer to commit what is queued, then enforces retention.
func (r *Recorder) retainNow(t *testing.T) {
	t.Helper()
	id := r.lastID.Load()
	waitPass(t, r, func() bool { b, _ := r.Tick(context.Background(), id); return b != nil })
	r.retainMu.Lock()
	defer r.retainMu.Unlock()
	r.retain(context.Background())
}
