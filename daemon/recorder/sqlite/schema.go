package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/cycled/cycled/daemon/recorder"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver "sqlite"
)

// schema creates the tables. Summaries are JSON, compressed (gzip: a summary repeats
// its module names and field names, and a large cycle's summaries would otherwise write
// several times more to the disk), with the columns that reads filter on;
// lines holds only the module lines that are indexed (see recorder.Indexed), keyed by module so
// that "every tick where planner failed" is an index range; events are append-only.
const schema = `
CREATE TABLE IF NOT EXISTS ticks (
	id          INTEGER PRIMARY KEY,
	run_id      TEXT    NOT NULL,
	generation  INTEGER NOT NULL,
	started_at  INTEGER NOT NULL, -- Unix nanoseconds
	severity    TEXT    NOT NULL,
	finish      TEXT    NOT NULL,
	emergency   INTEGER NOT NULL,
	summary     BLOB    NOT NULL  -- gzip of the summary's JSON, as GET /ticks/{id} answers it
);
CREATE INDEX IF NOT EXISTS ticks_started ON ticks (started_at);
CREATE INDEX IF NOT EXISTS ticks_severity ON ticks (severity, id);
CREATE INDEX IF NOT EXISTS ticks_finish ON ticks (finish, id);
CREATE INDEX IF NOT EXISTS ticks_emergency ON ticks (emergency, id);
CREATE TABLE IF NOT EXISTS lines (
	name        TEXT    NOT NULL,
	tick_id     INTEGER NOT NULL,
	tier        TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	fault_kind  TEXT    NOT NULL,
	attempts    INTEGER NOT NULL,
	latency_ms  REAL    NOT NULL,
	abandoned   INTEGER NOT NULL, -- timed out: left running past its tier's deadline
	error       TEXT    NOT NULL,
	PRIMARY KEY (name, tick_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lines_tick ON lines (tick_id);
CREATE INDEX IF NOT EXISTS lines_status ON lines (status, tick_id);
CREATE TABLE IF NOT EXISTS events (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	at       INTEGER NOT NULL, -- Unix nanoseconds
	tick_id  INTEGER NOT NULL,
	run_id   TEXT    NOT NULL,
	kind     TEXT    NOT NULL,
	data     TEXT    NOT NULL  -- JSON
);
CREATE INDEX IF NOT EXISTS events_kind ON events (kind, id);
CREATE INDEX IF NOT EXISTS events_at ON events (at);
CREATE INDEX IF NOT EXISTS events_tick ON events (tick_id);
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
`

// dsn is the data source name of the database at path. WAL lets readers run beside the
// writer; synchronous=NORMAL keeps every committed transaction through a crash of the
// process (only a crash of the machine can lose the last ones); auto_vacuum=INCREMENTAL
// (effective when the file is created) lets retention give pages back to the file system.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	}
	q.Add("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// openDB opens (and with create, creates) the database in dir and checks that it can be
// written, naming the path in every error.
func openDB(ctx context.Context, dir string, create bool) (*sql.DB, string, error) {
	path := filepath.Join(dir, recorder.FileName)
	if create {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, path, fmt.Errorf("recorder: create state directory %s: %w", dir, err)
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, path, fmt.Errorf("recorder: %s: %w (%w)", path, recorder.ErrNoDatabase, err)
	}
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, path, fmt.Errorf("recorder: open %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, path, fmt.Errorf("recorder: cannot write the database %s: %w", path, err)
	}
	return db, path, nil
}

// metaGet reads an integer from the meta table (0 when absent).
func metaGet(ctx context.Context, q querier, key string) (uint64, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return uint64(v), err
}

// metaPutMax raises an integer of the meta table to v (it never lowers it).
func metaPutMax(ctx context.Context, q querier, key string, v uint64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`, key, int64(v))
	return err
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
