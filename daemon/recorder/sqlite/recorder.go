// Package recorder is the flight recorder: it keeps every tick summary and every event of
// the cycle (breaker transitions, emergency entered and left, configuration applied,
// operator actions) in a SQLite database in the state directory, within retention bounds,
// and reads them back for the API, replay and operators.
//
// The engine does not know the recorder: the recorder observes it through its hooks
// (Hooks) and stamps the next summary with its own report (Annotate). Recording never
// blocks a tick: the hooks put records in a bounded queue; a single writer goroutine
// takes them in batches, at most one commit every Options.Flush; when the disk cannot
// keep up, the oldest queued records are dropped, counted (Dropped), and the next
// summary says so (recorder.dropped). A failing database is logged once, counted, and
// the cycle keeps ticking.
//
// Tick ids never repeat for a state directory: every commit reserves LeaseTicks ids past
// the newest tick it has seen, a new process starts after the reservation (after a clean
// Close, right after the last tick), and the engine is given no id past what is durably
// reserved (the Recorder is its Gate): when the reservation cannot be written, ticks stop
// until it can. See docs/decisions.md, "Flight recorder".
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/cycled/cycled/daemon/recorder"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
)

// Defaults of Options.
const (
	// DefaultFlush is Options.Flush when zero.
	DefaultFlush = 100 * time.Millisecond
	// DefaultQueue is Options.Queue when zero: records waiting for the writer.
	DefaultQueue = 4096
	// LeaseTicks is how many ids past the newest tick seen each commit reserves, so that
	// a process killed before its last ticks were written does not hand their ids out
	// again after a restart.
	LeaseTicks = 1024
	// retainEvery is how often the writer enforces retention.
	retainEvery = time.Second
)

// Options configures a Recorder. Dir is required.
type Options struct {
	// Dir is the state directory; the database is Dir/recorder.db.
	Dir string
	// Flush is the shortest time between two commits (default DefaultFlush).
	Flush time.Duration
	// KeepTicks, KeepFor and MaxBytes bound what is kept (0: no bound of that kind).
	KeepTicks int
	KeepFor   time.Duration
	MaxBytes  int64
	// Queue is how many records may wait for the writer (default DefaultQueue).
	Queue int
	// Logger receives the recorder's warnings. Nil: zap.NewNop().
	Logger *zap.Logger
	// Now is the clock of event times and of retention by age. Nil: time.Now.
	Now func() time.Time

	// beforeCommit, when set (tests), runs before every commit; an error fails it.
	beforeCommit func() error
}

// Recorder records summaries and events. Its methods are safe for concurrent use.
type Recorder struct {
	opts  Options
	log   *zap.Logger
	db    *sql.DB
	path  string
	runID string
	first uint64 // the first tick id this process may use
	*Reader

	q       queue
	dropped atomic.Uint64 // records dropped, in all
	unsaid  atomic.Uint64 // records dropped since the last annotated summary
	errs    atomic.Uint64 // failed commits
	failing atomic.Bool
	lastID  atomic.Uint64 // newest tick id queued
	// reserved is the highest tick id durably reserved: the lease last committed. No tick
	// takes a larger id (Admit).
	reserved atomic.Uint64
	// exhausted is set while a tick was refused for want of reserved ids.
	exhausted atomic.Bool
	retainMu  sync.Mutex // serialises retention with the commits that count ticks
	count     int        // guarded by retainMu; ticks in the database

	engine engineRef // the engine whose rules are recorded (Watch); nil: none
	// The rules recorded last, and how many rules events were recorded: most are deltas
	// against the one before (see Rules).
	rulesMu   sync.Mutex
	lastRules map[string]recorder.ModuleRules // guarded by rulesMu
	rulesN    int                             // guarded by rulesMu

	commitMu sync.Mutex
	commitCh chan struct{} // guarded by commitMu; closed when the writer's next pass ends

	stop     chan struct{}
	done     chan struct{}
	closeErr error
	once     sync.Once
}

// Open opens (creating it if needed) the database in opts.Dir and starts the writer. An
// unwritable directory or database is an error naming the path.
func Open(ctx context.Context, opts Options) (*Recorder, error) {
	if opts.Dir == "" {
		return nil, errors.New("recorder: no state directory")
	}
	opts = opts.withDefaults()
	db, path, err := openDB(ctx, opts.Dir, true)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // the writer's; readers have their own pool
	r := &Recorder{opts: opts, log: opts.Logger, db: db, path: path, runID: newRunID(),
		stop: make(chan struct{}), done: make(chan struct{}), commitCh: make(chan struct{})}
	r.q.init(opts.Queue)
	if r.first, err = firstTick(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("recorder: read %s: %w", path, err)
	}
	// The lease of this run's first ids is on disk before the engine can publish a tick.
	if err := metaPutMax(ctx, db, "lease", r.first-1+LeaseTicks); err != nil {
		db.Close()
		return nil, fmt.Errorf("recorder: cannot write the database %s: %w", path, err)
	}
	r.reserved.Store(r.first - 1 + LeaseTicks)
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM ticks`).Scan(&r.count); err != nil {
		db.Close()
		return nil, fmt.Errorf("recorder: read %s: %w", path, err)
	}
	if r.Reader, err = openReader(ctx, path); err != nil {
		db.Close()
		return nil, err
	}
	// The start is written at once too: every run is in the database, even one killed at
	// its first tick.
	if err := r.write([]record{{ev: &eventRec{at: opts.Now(), tick: r.first, kind: recorder.KindStart,
		data: map[string]any{"run_id": r.runID, "first_tick": r.first}}}}, false); err != nil {
		r.Reader.Close()
		db.Close()
		return nil, fmt.Errorf("recorder: cannot write the database %s: %w", path, err)
	}
	go r.run()
	return r, nil
}

func (o Options) withDefaults() Options {
	if o.Flush <= 0 {
		o.Flush = DefaultFlush
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// firstTick returns the id after both the newest recorded tick and the reserved ids.
func firstTick(ctx context.Context, db *sql.DB) (uint64, error) {
	var last sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(id) FROM ticks`).Scan(&last); err != nil {
		return 0, err
	}
	lease, err := metaGet(ctx, db, "lease")
	if err != nil {
		return 0, err
	}
	return max(uint64(last.Int64), lease) + 1, nil
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Path returns the database's path.
func (r *Recorder) Path() string { return r.path }

// RunID returns the id of this process's run, stamped on its summaries and events.
func (r *Recorder) RunID() string { return r.runID }

// FirstTick returns the id the engine's first tick must take (cycle.Identity.FirstTick).
func (r *Recorder) FirstTick() uint64 { return r.first }

// Identity returns the engine identity that makes ids continue after the recorded ones
// and stamps the recorder's report on every summary.
func (r *Recorder) Identity() cycle.Identity {
	return cycle.Identity{FirstTick: r.first, RunID: r.runID, Annotate: r.Annotate}
}

// Admit is the recorder's cycle.Gate: it admits a tick whose id is durably reserved, and
// refuses one past the reservation, which the writer could not extend (a full or failing
// disk): a tick id published beyond it could be handed out again after a kill. The first
// refusal is logged and wakes the writer, which retries the reservation at every pass;
// the first admission after it is logged too. It does not block.
func (r *Recorder) Admit(_ time.Time, next uint64) (id, epoch uint64, ok bool) {
	if next <= r.reserved.Load() {
		if r.exhausted.Load() && r.exhausted.Swap(false) {
			r.log.Info("recorder: tick ids reserved again; ticks resume", zap.Uint64("tick_id", next),
				zap.Uint64("reserved", r.reserved.Load()))
		}
		return next, 0, true
	}
	if !r.exhausted.Swap(true) {
		r.log.Error("recorder: no tick id is reserved past the last one and the reservation cannot be written: "+
			"no tick starts until it can (free space in state_dir)", zap.String("path", r.path),
			zap.Uint64("reserved", r.reserved.Load()))
	}
	select {
	case r.q.wake <- struct{}{}:
	default:
	}
	return 0, 0, false
}

// Reserved returns the highest tick id durably reserved: no tick takes a larger one.
func (r *Recorder) Reserved() uint64 { return r.reserved.Load() }

// IDsExhausted returns an error while ticks are refused because no id past the last one
// is reserved (see Admit), nil otherwise.
func (r *Recorder) IDsExhausted() error {
	if !r.exhausted.Load() {
		return nil
	}
	return fmt.Errorf("no tick id is reserved past %d and the reservation in %s cannot be written: ticks are stopped until it can", r.reserved.Load(), r.path)
}

// Dropped returns how many records were dropped because the writer could not keep up
// or the database failed.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// WriteErrors returns how many commits failed.
func (r *Recorder) WriteErrors() uint64 { return r.errs.Load() }

// Annotate sets s.Recorder: the records dropped since the previous summary. It is the
// engine's annotation hook (cycle.Identity.Annotate) and does not block.
func (r *Recorder) Annotate(s *faultsummary.Summary) {
	s.Recorder = &faultsummary.RecorderStatus{Dropped: r.unsaid.Swap(0), DroppedTotal: r.dropped.Load(),
		Failing: r.failing.Load()}
}

// Hooks returns the engine hooks that record summaries, breaker transitions, emergency
// changes and applied configurations. They only queue.
func (r *Recorder) Hooks() cycle.Hooks {
	return cycle.Hooks{
		OnTick: func(s *faultsummary.Summary) {
			r.lastID.Store(s.TickID)
			r.push(record{sum: s})
		},
		OnBreaker: func(t breaker.Transition) {
			tick := r.currentTick()
			r.eventAt(recorder.KindBreaker, tick, cycle.BreakerEvent(t, tick))
		},
		OnEmergency: func(ev faultsummary.EmergencyEvent) {
			kind := recorder.KindEmergencyLeft
			if ev.Entered {
				kind = recorder.KindEmergencyEntered
			}
			r.eventAt(kind, ev.TickID, ev)
		},
		OnApply: func(gen uint64) {
			r.Event(recorder.KindApplied, map[string]uint64{"generation": gen})
			r.applied(gen)
		},
	}
}

// currentTick is the tick in progress, or the next one between ticks: the tick an event
// raised by the engine belongs to.
func (r *Recorder) currentTick() uint64 { return max(r.lastID.Load()+1, r.first) }

// Event queues an event of the given kind with data encoded as JSON, at the tick in
// progress (between ticks, the next one): replay shows it before that tick.
func (r *Recorder) Event(kind string, data any) { r.eventAt(kind, r.currentTick(), data) }

func (r *Recorder) eventAt(kind string, tick uint64, data any) {
	r.push(record{ev: &eventRec{at: r.opts.Now(), tick: tick, kind: kind, data: data}})
}

// Committed returns a channel that is closed when the writer's next pass ends: the records
// queued before the call are then committed, dropped after a failed commit, or still
// waiting for the flush interval. Callers that wait for a record poll their condition once
// per pass instead of on a timer.
func (r *Recorder) Committed() <-chan struct{} {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	return r.commitCh
}

// passed wakes the callers of Committed.
func (r *Recorder) passed() {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	close(r.commitCh)
	r.commitCh = make(chan struct{})
}

// LatestTick returns the id of the newest tick queued by this process (0: none yet).
func (r *Recorder) LatestTick() uint64 { return r.lastID.Load() }

func (r *Recorder) push(rec record) {
	if n := r.q.push(rec); n > 0 {
		r.dropped.Add(n)
		r.unsaid.Add(n)
	}
}

// Close writes what is queued, records the stop, and closes the database. It is safe to
// call more than once.
func (r *Recorder) Close() error {
	r.once.Do(func() {
		r.Event(recorder.KindStop, map[string]string{"run_id": r.runID})
		close(r.stop)
		<-r.done
		r.closeErr = errors.Join(r.closeErr, r.db.Close(), r.Reader.Close())
	})
	return r.closeErr
}
