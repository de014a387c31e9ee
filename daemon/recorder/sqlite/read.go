package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cycled/cycled/daemon/recorder"
	"path/filepath"
	"strings"
	"time"
)

// Reader reads a recorder database; it may run beside the writer (WAL) or alone (replay,
// check). Its methods are safe for concurrent use.
type Reader struct {
	db   *sql.DB
	path string
}

// OpenReader opens the database in the state directory dir for reading. A directory
// without a database is an error wrapping ErrNoDatabase.
func OpenReader(ctx context.Context, dir string) (*Reader, error) {
	path := filepath.Join(dir, recorder.FileName)
	if _, err := filepathStat(path); err != nil {
		return nil, fmt.Errorf("recorder: %s: %w (%w)", path, recorder.ErrNoDatabase, err)
	}
	return openReader(ctx, path)
}

func openReader(ctx context.Context, path string) (*Reader, error) {
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("recorder: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("recorder: open %s: %w", path, err)
	}
	return &Reader{db: db, path: path}, nil
}

// Close closes the reader.
func (rd *Reader) Close() error { return rd.db.Close() }

// Tick returns the recorded JSON of tick id, or an error wrapping ErrNotFound.
func (rd *Reader) Tick(ctx context.Context, id uint64) ([]byte, error) {
	var z []byte
	err := rd.db.QueryRowContext(ctx, `SELECT summary FROM ticks WHERE id = ?`, int64(id)).Scan(&z)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("tick %d: %w", id, recorder.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("recorder: read tick %d: %w", id, err)
	}
	return decompress(z, id)
}

// where returns the SQL condition of f on the ticks table and its arguments.
func where(f recorder.Filter) (string, []any) {
	var conds []string
	var args []any
	if f.Severity != "" {
		conds, args = append(conds, "severity = ?"), append(args, string(f.Severity))
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "started_at >= ?"), append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		conds, args = append(conds, "started_at < ?"), append(args, f.Until.UnixNano())
	}
	switch {
	case f.Module != "" && f.Status != "":
		conds, args = append(conds, "id IN (SELECT tick_id FROM lines WHERE name = ? AND status = ?)"),
			append(args, f.Module, string(f.Status))
	case f.Module != "":
		conds, args = append(conds, "id IN (SELECT tick_id FROM lines WHERE name = ?)"), append(args, f.Module)
	case f.Status != "":
		conds, args = append(conds, "id IN (SELECT tick_id FROM lines WHERE status = ?)"), append(args, string(f.Status))
	}
	if len(conds) == 0 {
		return "1", nil
	}
	return strings.Join(conds, " AND "), args
}

// Ticks returns the recorded ticks q selects.
func (rd *Reader) Ticks(ctx context.Context, q recorder.Query) ([]recorder.Tick, error) {
	cond, args := where(q.Filter)
	sqlq := "SELECT id, summary FROM ticks WHERE " + cond
	if q.Before > 0 {
		sqlq, args = sqlq+" AND id < ?", append(args, int64(q.Before))
	}
	if q.After > 0 {
		sqlq, args = sqlq+" AND id > ?", append(args, int64(q.After))
	}
	if q.Ascending {
		sqlq += " ORDER BY id"
	} else {
		sqlq += " ORDER BY id DESC"
	}
	if q.Limit > 0 {
		sqlq, args = sqlq+" LIMIT ?", append(args, q.Limit)
	}
	rows, err := rd.db.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return nil, fmt.Errorf("recorder: list ticks: %w", err)
	}
	defer rows.Close()
	var out []recorder.Tick
	for rows.Next() {
		var t recorder.Tick
		var id int64
		var z []byte
		if err := rows.Scan(&id, &z); err != nil {
			return nil, fmt.Errorf("recorder: list ticks: %w", err)
		}
		t.ID = uint64(id)
		if t.JSON, err = decompress(z, t.ID); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Events returns the recorded events q selects.
func (rd *Reader) Events(ctx context.Context, q recorder.EventQuery) ([]recorder.Event, error) {
	sqlq := `SELECT id, at, tick_id, run_id, kind, data FROM events WHERE id > ?`
	args := []any{int64(q.After)}
	if q.Kind != "" {
		sqlq, args = sqlq+" AND kind = ?", append(args, q.Kind)
	}
	if q.FromTick > 0 {
		sqlq, args = sqlq+" AND tick_id >= ?", append(args, int64(q.FromTick))
	}
	if q.ToTick > 0 {
		sqlq, args = sqlq+" AND tick_id <= ?", append(args, int64(q.ToTick))
	}
	sqlq += " ORDER BY id"
	if q.Limit > 0 {
		sqlq, args = sqlq+" LIMIT ?", append(args, q.Limit)
	}
	rows, err := rd.db.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return nil, fmt.Errorf("recorder: list events: %w", err)
	}
	defer rows.Close()
	out := []recorder.Event{}
	for rows.Next() {
		var e recorder.Event
		var id, at, tick int64
		var data string
		if err := rows.Scan(&id, &at, &tick, &e.RunID, &e.Kind, &data); err != nil {
			return nil, fmt.Errorf("recorder: list events: %w", err)
		}
		e.ID, e.At, e.TickID, e.Data = uint64(id), time.Unix(0, at).UTC(), uint64(tick), json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Lines returns the recorded lines of the ticks from..to (inclusive), by tick then name.
func (rd *Reader) Lines(ctx context.Context, from, to uint64) ([]recorder.Line, error) {
	rows, err := rd.db.QueryContext(ctx, `SELECT tick_id, name, tier, status, fault_kind, attempts, latency_ms, abandoned, error
		FROM lines WHERE tick_id BETWEEN ? AND ? ORDER BY tick_id, name`, int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("recorder: list lines: %w", err)
	}
	defer rows.Close()
	var out []recorder.Line
	for rows.Next() {
		var l recorder.Line
		var tick int64
		if err := rows.Scan(&tick, &l.Name, &l.Tier, &l.Status, &l.FaultKind, &l.Attempts, &l.LatencyMs, &l.Abandoned, &l.Error); err != nil {
			return nil, fmt.Errorf("recorder: list lines: %w", err)
		}
		l.TickID = uint64(tick)
		out = append(out, l)
	}
	return out, rows.Err()
}

// Metas returns the indexed columns of the ticks with ids in [from, to] (0: no bound),
// oldest first, at most limit of them.
func (rd *Reader) Metas(ctx context.Context, from, to uint64, limit int) ([]recorder.TickMeta, error) {
	if to == 0 {
		to = 1<<63 - 1
	}
	rows, err := rd.db.QueryContext(ctx, `SELECT id, started_at, severity, finish, emergency, run_id, generation
		FROM ticks WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ?`, int64(from), int64(to), limit)
	if err != nil {
		return nil, fmt.Errorf("recorder: list ticks: %w", err)
	}
	defer rows.Close()
	var out []recorder.TickMeta
	for rows.Next() {
		var m recorder.TickMeta
		var id, at, gen int64
		if err := rows.Scan(&id, &at, &m.Severity, &m.Finish, &m.Emergency, &m.RunID, &gen); err != nil {
			return nil, fmt.Errorf("recorder: list ticks: %w", err)
		}
		m.ID, m.StartedAt, m.Generation = uint64(id), time.Unix(0, at).UTC(), uint64(gen)
		out = append(out, m)
	}
	return out, rows.Err()
}
