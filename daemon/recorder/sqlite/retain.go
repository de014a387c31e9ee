package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"go.uber.org/zap"
)

const (
	// retainChunk is the most ticks one retention transaction deletes, so that no
	// deletion holds the database long.
	retainChunk = 512
	// retainRounds bounds the chunks of one retention pass; the rest waits for the next.
	retainRounds = 64
)

// retain enforces the retention bounds: the oldest ticks (with their lines and the
// events before them) beyond KeepTicks, older than KeepFor, or while the database uses
// more than MaxBytes. The newest tick is always kept.
func (r *Recorder) retain(ctx context.Context) {
	if err := r.retainCountAge(ctx); err != nil {
		r.log.Warn("recorder: retention failed", zap.String("path", r.path), zap.Error(err))
		return
	}
	if err := r.retainSize(ctx); err != nil {
		r.log.Warn("recorder: size retention failed", zap.String("path", r.path), zap.Error(err))
	}
}

func (r *Recorder) retainCountAge(ctx context.Context) error {
	var cut uint64
	if k := r.opts.KeepTicks; k > 0 && r.count > k {
		var id int64
		err := r.db.QueryRowContext(ctx, `SELECT id FROM ticks ORDER BY id LIMIT 1 OFFSET ?`, r.count-k-1).Scan(&id)
		if err != nil && err != sql.ErrNoRows {
			return fmt.Errorf("count bound: %w", err)
		}
		cut = uint64(id)
	}
	if d := r.opts.KeepFor; d > 0 {
		old := r.opts.Now().Add(-d).UnixNano()
		var id sql.NullInt64
		if err := r.db.QueryRowContext(ctx, `SELECT max(id) FROM ticks WHERE started_at < ?`, old).Scan(&id); err != nil {
			return fmt.Errorf("age bound: %w", err)
		}
		cut = max(cut, uint64(id.Int64))
		if _, err := r.db.ExecContext(ctx, `DELETE FROM events WHERE id IN
			(SELECT id FROM events WHERE at < ? ORDER BY id LIMIT ?)`, old, retainChunk*8); err != nil {
			return fmt.Errorf("age bound of events: %w", err)
		}
	}
	if cut == 0 {
		return nil
	}
	for range retainRounds {
		more, err := r.deleteChunk(ctx, cut)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// deleteChunk deletes, in one short transaction, the oldest ticks up to id cut (at most
// retainChunk of them), their lines and the events before them; more reports that ticks
// up to cut remain.
func (r *Recorder) deleteChunk(ctx context.Context, cut uint64) (more bool, err error) {
	var lo, newest sql.NullInt64
	if err := r.db.QueryRowContext(ctx, `SELECT min(id), max(id) FROM ticks`).Scan(&lo, &newest); err != nil {
		return false, err
	}
	if !lo.Valid || uint64(lo.Int64) > cut {
		return false, nil
	}
	cut = min(cut, uint64(newest.Int64)-1) // the newest tick stays: ids continue after it
	hi := min(cut, uint64(lo.Int64)+retainChunk-1)
	if hi < uint64(lo.Int64) {
		return false, nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, `DELETE FROM ticks WHERE id <= ?`, int64(hi))
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM lines WHERE tick_id <= ?`, int64(hi)); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE tick_id <= ?`, int64(hi)); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	r.count -= int(n)
	return hi < cut, nil
}

// usedBytes returns the bytes of the database's pages in use (the file less its free
// pages).
func usedBytes(ctx context.Context, q querier) (int64, error) {
	var pages, free, size int64
	if err := q.QueryRowContext(ctx, `SELECT * FROM pragma_page_count, pragma_freelist_count, pragma_page_size`).
		Scan(&pages, &free, &size); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

// retainSize deletes the oldest ticks while the database uses more than MaxBytes, then
// gives the free pages back to the file system.
func (r *Recorder) retainSize(ctx context.Context) error {
	if r.opts.MaxBytes <= 0 {
		return nil
	}
	deleted := false
	for range retainRounds {
		used, err := usedBytes(ctx, r.db)
		if err != nil {
			return err
		}
		if used <= r.opts.MaxBytes || r.count <= 1 {
			break
		}
		var lo int64
		if err := r.db.QueryRowContext(ctx, `SELECT min(id) FROM ticks`).Scan(&lo); err != nil {
			return err
		}
		// Delete a share of the ticks proportional to the excess, at least a few.
		share := max(8, min(retainChunk, int(float64(r.count)*float64(used-r.opts.MaxBytes)/float64(used))+1))
		if _, err := r.deleteChunk(ctx, uint64(lo)+uint64(share)-1); err != nil {
			return err
		}
		deleted = true
	}
	if deleted {
		if _, err := r.db.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
			return err
		}
	}
	return nil
}
