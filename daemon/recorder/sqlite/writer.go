package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/cycled/cycled/daemon/recorder"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cycled/cycled/faultsummary"
)

// record is one queued item: a summary or an event.
type record struct {
	sum *faultsummary.Summary // published summaries are immutable: encoded by the writer
	ev  *eventRec
}

type eventRec struct {
	at   time.Time
	tick uint64
	kind string
	data any
}

// queue is a bounded FIFO that drops its oldest record when full, so that pushing never
// waits for the writer.
type queue struct {
	mu   sync.Mutex
	buf  []record // guarded by mu; a ring
	head int      // guarded by mu
	n    int      // guarded by mu
	wake chan struct{}
}

func (q *queue) init(n int) {
	q.buf = make([]record, n)
	q.wake = make(chan struct{}, 1)
}

// push appends rec and returns how many records it dropped to make room (0 or 1).
func (q *queue) push(rec record) (dropped uint64) {
	q.mu.Lock()
	if q.n == len(q.buf) {
		q.buf[q.head] = record{}
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		dropped = 1
	}
	q.buf[(q.head+q.n)%len(q.buf)] = rec
	q.n++
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return dropped
}

// drain moves every queued record to dst.
func (q *queue) drain(dst []record) []record {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; q.n > 0; q.n-- {
		dst = append(dst, q.buf[q.head])
		q.buf[q.head] = record{}
		q.head = (q.head + 1) % len(q.buf)
	}
	return dst
}

// run is the writer: one batch per wake-up, at most one commit per Flush, retention
// between batches, and a last batch at Close.
func (r *Recorder) run() {
	defer close(r.done)
	var batch []record
	var last, retained time.Time
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-r.q.wake:
		case <-r.stop:
			r.finish(batch)
			return
		}
		if wait := r.opts.Flush - time.Since(last); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-r.stop:
				timer.Stop()
				r.finish(batch)
				return
			}
		}
		batch = r.q.drain(batch[:0])
		last = time.Now()
		r.retainMu.Lock()
		r.commit(batch, false)
		if time.Since(retained) >= retainEvery {
			r.retain(context.Background())
			retained = time.Now()
		}
		r.retainMu.Unlock()
		clear(batch)
		r.passed()
	}
}

// finish writes the last batch.
func (r *Recorder) finish(batch []record) {
	r.retainMu.Lock()
	defer r.retainMu.Unlock()
	r.commit(r.q.drain(batch[:0]), true)
	r.passed()
}

// commit writes batch in one transaction. A failure drops the batch (counted) and is
// logged once until a commit succeeds again.
func (r *Recorder) commit(batch []record, final bool) {
	if len(batch) == 0 && !final {
		if r.exhausted.Load() {
			r.extendLease() // ticks wait for it: no batch will come
		}
		return
	}
	err := r.write(batch, final)
	if err != nil && !final {
		r.extendLease() // the batch is lost; the reservation alone is a far smaller write
	}
	if err != nil {
		n := uint64(len(batch))
		r.errs.Add(1)
		r.dropped.Add(n)
		r.unsaid.Add(n)
		if !r.failing.Swap(true) {
			r.log.Error("recorder: cannot write the database; records are dropped until it can",
				zap.String("path", r.path), zap.Int("records", len(batch)), zap.Error(err))
		}
		return
	}
	if r.failing.Swap(false) {
		r.log.Info("recorder: writing the database again", zap.String("path", r.path),
			zap.Uint64("failed_commits", r.errs.Load()))
	}
}

func (r *Recorder) write(batch []record, final bool) error {
	if f := r.opts.beforeCommit; f != nil {
		if err := f(); err != nil {
			return err
		}
	}
	ctx := context.Background()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	w, err := newBatchWriter(ctx, tx, r.runID)
	if err != nil {
		return err
	}
	defer w.close()
	for _, rec := range batch {
		if rec.sum != nil {
			err = w.tick(rec.sum)
		} else {
			err = w.event(rec.ev)
		}
		if err != nil {
			return err
		}
	}
	lease, err := r.lease(ctx, tx, final)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	r.setReserved(lease, final)
	r.count += w.ticks
	return nil
}

// extendLease writes the reservation alone, LeaseTicks past the newest tick queued.
func (r *Recorder) extendLease() {
	lease := r.newest() + LeaseTicks
	if f := r.opts.beforeCommit; f != nil && f() != nil {
		return
	}
	if metaPutMax(context.Background(), r.db, "lease", lease) == nil {
		r.setReserved(lease, false)
	}
}

// setReserved records that lease is on disk. Past a final lease (the newest tick, at a
// clean stop) no id is reserved any more.
func (r *Recorder) setReserved(lease uint64, final bool) {
	if final {
		r.reserved.Store(lease)
		return
	}
	for {
		cur := r.reserved.Load()
		if lease <= cur || r.reserved.CompareAndSwap(cur, lease) {
			return
		}
	}
}

// newest is the newest tick id queued, or the one before the first while none is.
func (r *Recorder) newest() uint64 { return max(r.lastID.Load(), r.first-1) }

// lease reserves the ids a restart must not use: LeaseTicks past the newest tick queued,
// or at a clean stop exactly the newest (every tick is then written).
func (r *Recorder) lease(ctx context.Context, tx *sql.Tx, final bool) (uint64, error) {
	newest := r.newest()
	var err error
	lease := newest + LeaseTicks
	if final {
		lease = newest
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta (key, value) VALUES ('lease', ?)`, int64(newest))
	} else {
		err = metaPutMax(ctx, tx, "lease", lease)
	}
	if err != nil {
		return 0, fmt.Errorf("lease: %w", err)
	}
	return lease, nil
}

// batchWriter holds the prepared statements of one transaction.
type batchWriter struct {
	ctx                  context.Context
	runID                string
	tickSt, lineSt, evSt *sql.Stmt
	ticks                int
	line                 faultsummary.Module
	z                    compressor
}

func newBatchWriter(ctx context.Context, tx *sql.Tx, runID string) (*batchWriter, error) {
	w := &batchWriter{ctx: ctx, runID: runID}
	var err error
	if w.tickSt, err = tx.PrepareContext(ctx, `INSERT OR IGNORE INTO ticks
		(id, run_id, generation, started_at, severity, finish, emergency, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if w.lineSt, err = tx.PrepareContext(ctx, `INSERT OR IGNORE INTO lines
		(name, tick_id, tier, status, fault_kind, attempts, latency_ms, abandoned, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		w.close()
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if w.evSt, err = tx.PrepareContext(ctx, `INSERT INTO events (at, tick_id, run_id, kind, data) VALUES (?, ?, ?, ?, ?)`); err != nil {
		w.close()
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return w, nil
}

func (w *batchWriter) close() {
	for _, st := range []*sql.Stmt{w.tickSt, w.lineSt, w.evSt} {
		if st != nil {
			st.Close()
		}
	}
}

// tick writes a summary and its lines that are indexed (see recorder.Indexed).
func (w *batchWriter) tick(s *faultsummary.Summary) error {
	// MarshalJSON directly: json.Marshal would re-scan and compact its (already compact)
	// output, which cost as much as the encoding itself.
	body, err := s.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode tick %d: %w", s.TickID, err)
	}
	res, err := w.tickSt.ExecContext(w.ctx, int64(s.TickID), s.RunID, int64(s.Generation), s.StartedAt.UnixNano(),
		string(s.OverallSeverity), string(s.Finish), s.EmergencyMode, w.z.compress(body))
	if err != nil {
		return fmt.Errorf("insert tick %d: %w", s.TickID, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		w.ticks++
	}
	m := &w.line
	for i, n := 0, s.NumModules(); i < n; i++ {
		if s.PlainAt(i) {
			continue
		}
		s.ModuleInto(i, m)
		if !recorder.Indexed(s, m) {
			continue
		}
		if _, err := w.lineSt.ExecContext(w.ctx, m.Name, int64(s.TickID), m.Tier, string(m.Status), m.FaultKind,
			m.Attempts, m.LatencyMs, m.Status == faultsummary.StatusTimedOut, m.Error); err != nil {
			return fmt.Errorf("insert line %s of tick %d: %w", m.Name, s.TickID, err)
		}
	}
	return nil
}

func (w *batchWriter) event(e *eventRec) error {
	data, err := json.Marshal(e.data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.kind, err)
	}
	if _, err := w.evSt.ExecContext(w.ctx, e.at.UnixNano(), int64(e.tick), w.runID, e.kind, string(data)); err != nil {
		return fmt.Errorf("insert %s event: %w", e.kind, err)
	}
	return nil
}
