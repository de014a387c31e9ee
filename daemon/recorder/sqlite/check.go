package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/cycled/cycled/daemon/recorder"
	"os"
)

func filepathStat(path string) (os.FileInfo, error) { return os.Stat(path) }

// Check runs PRAGMA integrity_check and counts what the database holds.
func (rd *Reader) Check(ctx context.Context) (recorder.Report, error) {
	rp := recorder.Report{Path: rd.path}
	rows, err := rd.db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return rp, fmt.Errorf("recorder: integrity check of %s: %w", rd.path, err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return rp, err
		}
		rp.Integrity = append(rp.Integrity, s)
	}
	rows.Close()
	var first, last sql.NullInt64
	err = rd.db.QueryRowContext(ctx, `SELECT count(*), min(id), max(id), (SELECT count(*) FROM lines),
		(SELECT count(*) FROM events) FROM ticks`).Scan(&rp.Ticks, &first, &last, &rp.Lines, &rp.Events)
	if err != nil {
		return rp, fmt.Errorf("recorder: count %s: %w", rd.path, err)
	}
	rp.FirstTick, rp.LastTick = uint64(first.Int64), uint64(last.Int64)
	if rp.UsedBytes, err = usedBytes(ctx, rd.db); err != nil {
		return rp, err
	}
	lease, err := metaGet(ctx, rd.db, "lease")
	if err != nil {
		return rp, err
	}
	rp.NextTickID = max(rp.LastTick, lease) + 1
	if fi, err := os.Stat(rd.path); err == nil {
		rp.FileBytes = fi.Size()
	}
	if fi, err := os.Stat(rd.path + "-wal"); err == nil {
		rp.WALBytes = fi.Size()
	}
	return rp, nil
}

// Vacuum rebuilds the database in dir to its smallest size. It needs the daemon stopped
// (or it waits for the writer's lock and then fails).
func Vacuum(ctx context.Context, dir string) (before, after int64, err error) {
	db, path, err := openDB(ctx, dir, false)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	before = size()
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return before, 0, fmt.Errorf("recorder: checkpoint %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM`); err != nil {
		return before, 0, fmt.Errorf("recorder: vacuum %s: %w", path, err)
	}
	return before, size(), nil
}
