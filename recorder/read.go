package recorder

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cycled/cycled/faultsummary"
)

// ErrNotFound is returned when a tick is not in the database.
var ErrNotFound = errors.New("not recorded")

// Reader reads a recorder database; it may run beside the writer (WAL) or alone (replay,
// check). Its methods are safe for concurrent use.
type Reader struct {
	db   *sql.DB
	path string
}

// OpenReader opens the database in the state directory dir for reading. A directory
// without a database is an error wrapping ErrNoDatabase.
func OpenReader(ctx context.Context, dir string) (*Reader, error) {
	path := filepath.Join(dir, FileName)
	if _, err := filepathStat(path); err != nil {
		return nil, fmt.Errorf("recorder: %s: %w (%w)", path, ErrNoDatabase, err)
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
		return nil, fmt.Errorf("tick %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("recorder: read tick %d: %w", id, err)
	}
	return decompress(z, id)
}

// Filter selects ticks. Zero fields select everything.
type Filter struct {
	// Severity keeps the ticks of this overall severity.
	Severity faultsummary.Severity
	// Module keeps the ticks in which this module's line was not nominal (see Nominal),
	// with Status if set.
	Module string
	// Status keeps the ticks with a line of this status (of Module if set). A nominal
	// status (ok, not_due) is not recorded per line and is refused by Validate.
	Status faultsummary.Status
	// Since and Until keep the ticks started in [Since, Until).
	Since, Until time.Time
}

// Validate reports a filter that cannot be answered, naming the query parameter.
func (f Filter) Validate() (field string, err error) {
	switch f.Severity {
	case "", faultsummary.OK, faultsummary.Degraded, faultsummary.Critical:
	default:
		return "severity", fmt.Errorf("unknown severity %q (want ok, degraded or critical)", f.Severity)
	}
	switch f.Status {
	case "", faultsummary.StatusRetried, faultsummary.StatusFailed, faultsummary.StatusTimedOut, faultsummary.StatusBusy,
		faultsummary.StatusOpen, faultsummary.StatusProbeOK, faultsummary.StatusProbeFailed, faultsummary.StatusSkipped:
	case faultsummary.StatusRejected: // issue 37, resilience additions
	case faultsummary.StatusOK, faultsummary.StatusNotDue:
		return "status", fmt.Errorf("status %q is nominal: only lines that are not nominal can be searched", f.Status)
	default:
		return "status", fmt.Errorf("unknown status %q", f.Status)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return "until", errors.New("until must be after since")
	}
	return "", nil
}

// Empty reports whether f selects every tick.
func (f Filter) Empty() bool { return f == Filter{} }

// Match reports whether the summary s passes the filter, by the same rules as the
// database's query (for summaries still in memory).
func (f Filter) Match(s *faultsummary.Summary) bool {
	if f.Severity != "" && s.OverallSeverity != f.Severity {
		return false
	}
	if !f.Since.IsZero() && s.StartedAt.Before(f.Since) || !f.Until.IsZero() && !s.StartedAt.Before(f.Until) {
		return false
	}
	if f.Module == "" && f.Status == "" {
		return true
	}
	var m faultsummary.Module
	for i, n := 0, s.NumModules(); i < n; i++ {
		if s.PlainAt(i) {
			continue
		}
		s.ModuleInto(i, &m)
		if Nominal(s, &m) || f.Module != "" && m.Name != f.Module || f.Status != "" && m.Status != f.Status {
			continue
		}
		return true
	}
	return false
}

// where returns the SQL condition of f on the ticks table and its arguments.
func (f Filter) where() (string, []any) {
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

// Query selects recorded ticks: those passing Filter with ids in (After, Before), newest
// first (oldest first with Ascending), at most Limit (0: no limit).
type Query struct {
	Filter
	Before, After uint64 // 0: no bound
	Limit         int
	Ascending     bool
}

// Tick is a recorded summary.
type Tick struct {
	ID   uint64
	JSON []byte
}

// Ticks returns the recorded ticks q selects.
func (rd *Reader) Ticks(ctx context.Context, q Query) ([]Tick, error) {
	cond, args := q.where()
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
	var out []Tick
	for rows.Next() {
		var t Tick
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

// Event is a recorded event, as GET /events answers it.
type Event struct {
	ID     uint64          `json:"id"`
	At     time.Time       `json:"at"`
	TickID uint64          `json:"tick_id"`
	RunID  string          `json:"run_id"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

// EventQuery selects events: ids above After, of Kind if set, in tick ids [FromTick,
// ToTick] when set, oldest first, at most Limit (0: no limit).
type EventQuery struct {
	After            uint64
	Kind             string
	FromTick, ToTick uint64
	Limit            int
}

// Events returns the recorded events q selects.
func (rd *Reader) Events(ctx context.Context, q EventQuery) ([]Event, error) {
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
	out := []Event{}
	for rows.Next() {
		var e Event
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

// Line is a recorded module line that was not nominal, with the outcome inputs a replay
// of the tick's decisions needs.
type Line struct {
	TickID    uint64  `json:"tick_id"`
	Name      string  `json:"name"`
	Tier      string  `json:"tier"`
	Status    string  `json:"status"`
	FaultKind string  `json:"fault_kind"`
	Attempts  int     `json:"attempts"`
	LatencyMs float64 `json:"latency_ms"`
	Abandoned bool    `json:"abandoned"`
	Error     string  `json:"error"`
}

// Lines returns the recorded lines of the ticks from..to (inclusive), by tick then name.
func (rd *Reader) Lines(ctx context.Context, from, to uint64) ([]Line, error) {
	rows, err := rd.db.QueryContext(ctx, `SELECT tick_id, name, tier, status, fault_kind, attempts, latency_ms, abandoned, error
		FROM lines WHERE tick_id BETWEEN ? AND ? ORDER BY tick_id, name`, int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("recorder: list lines: %w", err)
	}
	defer rows.Close()
	var out []Line
	for rows.Next() {
		var l Line
		var tick int64
		if err := rows.Scan(&tick, &l.Name, &l.Tier, &l.Status, &l.FaultKind, &l.Attempts, &l.LatencyMs, &l.Abandoned, &l.Error); err != nil {
			return nil, fmt.Errorf("recorder: list lines: %w", err)
		}
		l.TickID = uint64(tick)
		out = append(out, l)
	}
	return out, rows.Err()
}

// TickMeta is a recorded tick's indexed columns.
type TickMeta struct {
	ID         uint64                `json:"tick_id"`
	StartedAt  time.Time             `json:"started_at"`
	Severity   faultsummary.Severity `json:"severity"`
	Finish     faultsummary.Finish   `json:"finish"`
	Emergency  bool                  `json:"emergency"`
	RunID      string                `json:"run_id"`
	Generation uint64                `json:"generation"`
}

// Metas returns the indexed columns of the ticks with ids in [from, to] (0: no bound),
// oldest first, at most limit of them.
func (rd *Reader) Metas(ctx context.Context, from, to uint64, limit int) ([]TickMeta, error) {
	if to == 0 {
		to = 1<<63 - 1
	}
	rows, err := rd.db.QueryContext(ctx, `SELECT id, started_at, severity, finish, emergency, run_id, generation
		FROM ticks WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ?`, int64(from), int64(to), limit)
	if err != nil {
		return nil, fmt.Errorf("recorder: list ticks: %w", err)
	}
	defer rows.Close()
	var out []TickMeta
	for rows.Next() {
		var m TickMeta
		var id, at, gen int64
		if err := rows.Scan(&id, &at, &m.Severity, &m.Finish, &m.Emergency, &m.RunID, &gen); err != nil {
			return nil, fmt.Errorf("recorder: list ticks: %w", err)
		}
		m.ID, m.StartedAt, m.Generation = uint64(id), time.Unix(0, at).UTC(), uint64(gen)
		out = append(out, m)
	}
	return out, rows.Err()
}
