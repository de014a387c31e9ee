// Package recorder defines what the flight recorder keeps and how it is searched: the
// filters, queries and records that the API, replay and operators read, the event kinds,
// and the rule of which module lines are indexed. The store itself, on SQLite, lives in
// the module github.com/cycled/cycled/daemon/recorder/sqlite, so that programs that only
// read these types (the API, an embedding application) do not link a database.
package recorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// ErrNotFound is returned when a tick is not in the database.
var ErrNotFound = errors.New("not recorded")

// Filter selects ticks. Zero fields select everything.
type Filter struct {
	// Severity keeps the ticks of this overall severity.
	Severity faultsummary.Severity
	// Module keeps the ticks in which this module's line was indexed (see Indexed), with
	// Status if set.
	Module string
	// Status keeps the ticks with a line of this status (of Module if set). A status that
	// is not searchable (faultsummary.StatusInfo.Searchable: ok, not_due) is not indexed
	// and is refused by Validate.
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
	switch {
	case f.Status == "" || f.Status.Searchable():
	case f.Status.Valid():
		return "status", fmt.Errorf("status %q cannot be searched: the lines of %s are not recorded one by one",
			f.Status, strings.Join(unsearchable(), " and "))
	default:
		return "status", fmt.Errorf("unknown status %q", f.Status)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return "until", errors.New("until must be after since")
	}
	return "", nil
}

// unsearchable returns the names of the statuses a search cannot ask for.
func unsearchable() []string {
	var out []string
	for _, st := range faultsummary.Statuses() {
		if !st.Searchable {
			out = append(out, string(st.Name))
		}
	}
	return out
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
		if !Indexed(s, &m) || f.Module != "" && m.Name != f.Module || f.Status != "" && m.Status != f.Status {
			continue
		}
		return true
	}
	return false
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

// Line is a recorded module line that was indexed (see Indexed), with the outcome inputs a replay
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

// Indexed reports whether module line m of s is kept in the table of lines, which the
// searches read: a line of a searchable status (faultsummary.StatusInfo.Searchable; ok
// and not_due, the lines of nearly every tick, are not), except an emergency-only module
// skipped in a tick that completed outside emergency mode, which had nothing to do.
func Indexed(s *faultsummary.Summary, m *faultsummary.Module) bool {
	if m.Status == faultsummary.StatusSkipped {
		return s.EmergencyMode || s.Finish != faultsummary.Completed
	}
	return m.Status.Searchable()
}

// KindRules is the kind of the event that records what a replay of the decisions needs of
// the configuration: each module's effective error policy and on_open, and the emergency
// configuration. It is written when Watch is called and at every configuration applied.
const KindRules = "decision_rules"

// ModuleRules is one module's part of Rules.
type ModuleRules struct {
	Policy    tiers.Policy `json:"policy"` // the effective error policy
	OnOpen    tiers.OnOpen `json:"on_open"`
	TierIndex int          `json:"tier_index"`
}

// Rules is the data of a KindRules event: the configuration in force from the event's
// tick on, for the generation it names (0: the one in force when the recorder was
// attached).
//
// So that the event's size does not grow with every runtime registration, most events are
// deltas: Modules then holds only the modules added or changed since the previous rules
// event of the same run, and Removed those removed. The first event of a run, and every
// RulesFullEvery-th after it, holds every module. ApplyDelta rebuilds the whole.
type Rules struct {
	Generation   uint64                 `json:"generation"`
	Latch        bool                   `json:"latch"`
	RecoverAfter int                    `json:"recover_after"`
	Modules      map[string]ModuleRules `json:"modules"`
	Delta        bool                   `json:"delta,omitempty"`
	Removed      []string               `json:"removed,omitempty"`
}

// RulesFullEvery is how often a run's rules event holds every module rather than a delta,
// so that a reader whose retention dropped the run's first event recovers soon after.
const RulesFullEvery = 64

// ApplyDelta returns the whole rules that r describes, given prev, the whole rules of the
// previous event of the same run (nil: none known). A full event is returned as it is.
func (r Rules) ApplyDelta(prev map[string]ModuleRules) Rules {
	if !r.Delta {
		return r
	}
	mods := make(map[string]ModuleRules, len(prev)+len(r.Modules))
	maps.Copy(mods, prev)
	maps.Copy(mods, r.Modules)
	for _, name := range r.Removed {
		delete(mods, name)
	}
	r.Modules, r.Delta, r.Removed = mods, false, nil
	return r
}

// Delta returns full as a delta against prev, the whole rules of the run's previous event.
func Delta(prev map[string]ModuleRules, full Rules) Rules {
	d := full
	d.Delta, d.Modules = true, map[string]ModuleRules{}
	for name, m := range full.Modules {
		if old, ok := prev[name]; !ok || old != m {
			d.Modules[name] = m
		}
	}
	for name := range prev {
		if _, ok := full.Modules[name]; !ok {
			d.Removed = append(d.Removed, name)
		}
	}
	slices.Sort(d.Removed)
	return d
}

// RulesOf returns the rules of engine e's configuration in force, as generation gen.
func RulesOf(e *cycle.Engine, gen uint64) Rules {
	cfg := e.Config()
	r := Rules{Generation: gen, Latch: cfg.Emergency.Latch, RecoverAfter: cfg.Emergency.RecoverAfter,
		Modules: make(map[string]ModuleRules)}
	for _, m := range e.Modules() {
		if !m.Pending {
			r.Modules[m.Spec.Name] = ModuleRules{Policy: m.Policy, OnOpen: m.Spec.OnOpen, TierIndex: m.TierIndex}
		}
	}
	return r
}

// Report is what Check finds.
type Report struct {
	Path       string   `json:"path"`
	Integrity  []string `json:"integrity"` // "ok", or SQLite's findings
	Ticks      int64    `json:"ticks"`
	FirstTick  uint64   `json:"first_tick"`
	LastTick   uint64   `json:"last_tick"`
	Lines      int64    `json:"lines"`
	Events     int64    `json:"events"`
	FileBytes  int64    `json:"file_bytes"`
	UsedBytes  int64    `json:"used_bytes"`
	WALBytes   int64    `json:"wal_bytes"`
	NextTickID uint64   `json:"next_tick_id"` // the id a restart takes
}

// OK reports whether the integrity check found nothing.
func (rp Report) OK() bool { return len(rp.Integrity) == 1 && rp.Integrity[0] == "ok" }

// String is the report as a person reads it.
func (rp Report) String() string {
	return fmt.Sprintf("%s\n  integrity: %s\n  ticks: %d (%d..%d), next id %d\n  indexed lines: %d, events: %d\n  size: %d bytes in use, file %d bytes, WAL %d bytes\n",
		rp.Path, strings.Join(rp.Integrity, "; "), rp.Ticks, rp.FirstTick, rp.LastTick, rp.NextTickID,
		rp.Lines, rp.Events, rp.UsedBytes, rp.FileBytes, rp.WALBytes)
}

// FileName is the database's file name in the state directory.
const FileName = "recorder.db"

// ErrNoDatabase is returned by OpenReader when the state directory holds no recorder
// database.
var ErrNoDatabase = errors.New("no recorder database")

// The kinds of the events the daemon records: those the recorder writes itself (its
// hooks, its start and stop; KindRules), and those the daemon adds.
const (
	KindBreaker          = string(faultsummary.EventBreaker)
	KindEmergencyEntered = "emergency_entered"
	KindEmergencyLeft    = "emergency_left"
	KindApplied          = "config_applied"
	KindStart            = "recorder_started"
	KindStop             = "recorder_stopped"
	KindModuleRegistered = "module_registered" // a runtime registration
	KindModuleRemoved    = "module_removed"    // a runtime removal
	KindAdmin            = "admin"             // an operator's action on an admin route
	KindEmergencyReset   = "emergency_reset"   // an operator's reset, beside entered and left
	KindConfigReload     = "config_reload"     // a reload attempt, applied or refused
)

// EventKinds returns every kind of recorded event, the one list (the HTTP description's
// enum is compared with it).
func EventKinds() []string {
	return []string{KindBreaker, KindEmergencyEntered, KindEmergencyLeft, KindApplied, KindRules, KindStart, KindStop,
		KindModuleRegistered, KindModuleRemoved, KindAdmin, KindEmergencyReset, KindConfigReload}
}
