// Package faultsummary defines the CycleFaultSummary that every tick publishes (JSON schema
// cycled.fault_summary/v1, whose field names are fixed: docs/architecture.md), the bounded
// history of recent summaries, and the event hub through which summaries and state changes
// are streamed.
//
// Publishing never blocks the tick: the latest summary is an atomic pointer, and a
// subscriber that does not keep up skips ahead (its oldest undelivered events are dropped
// and counted).
//
// A summary's module lines are read through Summary.Modules, NumModules and ModuleAt: a
// producer may keep them in a compact form of its own (Lines), as the engine does, and
// they are then built only when read.
package faultsummary

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/cycled/cycled/blackboard"
)

// Schema is the value of the summary's schema field.
const Schema = "cycled.fault_summary/v1"

// Finish says how a tick ended.
type Finish string

// The ways a tick ends.
const (
	// Completed: every tier ran or was skipped by emergency mode.
	Completed Finish = "completed"
	// ShortCircuited: a module with the abort policy stopped the remaining tiers cleanly.
	ShortCircuited Finish = "short_circuited"
	// Failed: a tier ≥ 1 failed; the remaining tiers were skipped.
	Failed Finish = "failed"
)

// Severity is the overall health of a tick.
type Severity string

// The severities.
const (
	// OK: nothing degraded.
	OK Severity = "ok"
	// Degraded: some module failed, was skipped or was served from last-known-good.
	Degraded Severity = "degraded"
	// Critical: emergency mode is active or a tier failed.
	Critical Severity = "critical"
)

// Emergency is the emergency state carried by every summary.
type Emergency struct {
	// Active reports emergency mode.
	Active bool `json:"active"`
	// SinceTick is the tick in which the current (or last) emergency began; 0 if none ever.
	SinceTick uint64 `json:"since_tick"`
	// Reason says why the current (or last) emergency began; kept after recovery.
	Reason string `json:"reason"`
	// Latched reports a latched emergency waiting for an operator reset.
	Latched bool `json:"latched"`
	// HealthyTicks counts consecutive healthy safety ticks during an emergency.
	HealthyTicks int `json:"healthy_ticks"`
	// EndedTick is the tick in which the last emergency ended; 0 if none ended.
	EndedTick uint64 `json:"ended_tick,omitempty"`
}

// EmergencyEpisode is an emergency episode that has ended.
type EmergencyEpisode struct {
	// SinceTick is the tick in which the episode began.
	SinceTick uint64 `json:"since_tick"`
	// EndedTick is the tick in which it ended.
	EndedTick uint64 `json:"ended_tick"`
	// Reason says why it began.
	Reason string `json:"reason"`
}

// EmergencyStatus describes one emergency episode, the current one or, when none is
// active, the last one, and the episode before it. Unlike a summary's Emergency, whose
// EndedTick is the end of the last episode that ended whatever is active now, its
// EndedTick belongs to the episode it describes: absent while that episode lasts.
type EmergencyStatus struct {
	Emergency
	// Previous is the episode before the one described; nil if there was none.
	Previous *EmergencyEpisode `json:"previous,omitempty"`
}

// CycleStarting is the value of Summary.CycleState during startup.
const CycleStarting = "starting"

// StartupState is what a starting cycle waits for.
type StartupState struct {
	// Pending names the safety modules that have not succeeded once yet.
	Pending []string `json:"pending"`
	// TimeoutMs is the time startup may take before it enters emergency mode (0: none).
	TimeoutMs float64 `json:"timeout_ms"`
	// Failures counts, per safety module, the ticks of startup it failed in; while
	// starting these open no breaker.
	Failures map[string]int `json:"failures,omitempty"`
}

// ShedState is what load shedding sheds.
type ShedState struct {
	// Level is the number of steps shed (each step one more priority class).
	Level int `json:"level"`
	// Modules names the modules shed, in summary order.
	Modules []string `json:"modules"`
	// Reason says why the latest step was shed.
	Reason string `json:"reason"`
	// SinceTick is the tick in which shedding began.
	SinceTick uint64 `json:"since_tick"`
}

// AsyncRun is the end of one run of an asynchronous module.
type AsyncRun struct {
	// Name is the module's.
	Name string `json:"name"`
	// OriginTick is the tick after which the run started; its value is tagged with it.
	OriginTick uint64 `json:"origin_tick"`
	// Status is "ok" or "failed" ("timed_out" when it outlived its timeout).
	Status Status `json:"status"`
	// LatencyMs is how long it ran.
	LatencyMs float64 `json:"latency_ms"`
	// FaultKind and Error describe a failure.
	FaultKind string `json:"fault_kind,omitempty"`
	Error     string `json:"error,omitempty"`
	// Failures counts the module's consecutive failed runs, this one included.
	Failures int `json:"failures,omitempty"`
}

// Tier is one tier's line in the summary.
type Tier struct {
	Index           int        `json:"index"`
	Name            string     `json:"name"`
	BudgetMs        float64    `json:"budget_ms"`
	ElapsedMs       float64    `json:"elapsed_ms"`
	Status          TierStatus `json:"status"`
	BudgetExhausted bool       `json:"budget_exhausted"`
	Reason          string     `json:"reason,omitempty"`
}

// Served is what the blackboard serves for a module's key after the tick.
type Served struct {
	Key              string            `json:"key"`
	Source           blackboard.Source `json:"source"`
	Stale            bool              `json:"stale"`
	Expired          bool              `json:"expired"`
	AgeMs            float64           `json:"age_ms"`
	DerivedFromStale bool              `json:"derived_from_stale"`
	// Value, Written, WrittenTick and Seq describe the served value for the blackboard
	// view; they are not part of the summary's JSON. In the engine's summaries Written of
	// a live value is its wall time, without a monotonic clock reading.
	Value       any       `json:"-"`
	Written     time.Time `json:"-"`
	WrittenTick uint64    `json:"-"`
	Seq         uint64    `json:"-"`
}

// Module is one module's line in the summary.
type Module struct {
	Name          string  `json:"name"`
	Tier          string  `json:"tier"`
	TierIndex     int     `json:"tier_index"`
	Status        Status  `json:"status"`
	Attempts      int     `json:"attempts"`
	LatencyMs     float64 `json:"latency_ms"`
	FaultKind     string  `json:"fault_kind"`
	Error         string  `json:"error"`
	Breaker       string  `json:"breaker"`
	CircuitState  string  `json:"circuit_state"`
	UsingFallback bool    `json:"using_fallback"`
	Served        Served  `json:"served"`
}

// RecorderStatus is what the flight recorder says in a summary.
type RecorderStatus struct {
	// Dropped counts the records (summaries and events) the recorder dropped since the
	// previous summary because the disk could not keep up.
	Dropped uint64 `json:"dropped"`
	// DroppedTotal counts every record dropped since the process started.
	DroppedTotal uint64 `json:"dropped_total"`
	// Failing reports that the last write to the database failed.
	Failing bool `json:"failing,omitempty"`
}

// Summary is the CycleFaultSummary of one tick.
type Summary struct {
	Schema            string         `json:"schema"`
	TickID            uint64         `json:"tick_id"`
	ScheduledAt       time.Time      `json:"scheduled_at"`
	StartedAt         time.Time      `json:"started_at"`
	FinishedAt        time.Time      `json:"finished_at"`
	StartLagMs        float64        `json:"start_lag_ms"`
	WallMs            float64        `json:"wall_ms"`
	Overrun           bool           `json:"overrun"`
	SkippedGridPoints int            `json:"skipped_grid_points"`
	Finish            Finish         `json:"finish"`
	EmergencyMode     bool           `json:"emergency_mode"`
	Emergency         Emergency      `json:"emergency"`
	OverallSeverity   Severity       `json:"overall_severity"`
	Tiers             []Tier         `json:"tiers"`
	RetryCounts       map[string]int `json:"retry_counts"`
	OpenCircuits      []string       `json:"open_circuits"`
	HalfOpenCircuits  []string       `json:"half_open_circuits"`
	DegradedKeys      []string       `json:"degraded_keys"`
	BudgetViolations  []string       `json:"budget_violations"`
	// Compacted marks a summary read back from the compact part of the history: its plain
	// successful module lines were rebuilt without their latency (see KeepWhole).
	Compacted bool `json:"compacted,omitempty"`
	// RunID identifies the process that ran the tick (one per start); empty when the
	// producer sets none.
	RunID string `json:"run_id,omitempty"`
	// Generation is the version of the configuration the tick ran with (it grows with
	// every reload and runtime registration).
	Generation uint64 `json:"generation,omitempty"`
	// Epoch is the active/standby group's leader epoch under which the tick started (the
	// election's revision); 0 when the daemon runs alone. It grows with every change of
	// active daemon, so a consumer can refuse a summary from an older epoch.
	Epoch uint64 `json:"epoch,omitempty"`
	// Recorder is the flight recorder's report, when one records the ticks.
	Recorder *RecorderStatus `json:"recorder,omitempty"`

	// RetryBudgetExhausted names the retry-amplification budgets (a tier's, by the tier's
	// name, or a named downstream's) that refused a retry in this tick.
	RetryBudgetExhausted []string `json:"retry_budget_exhausted,omitempty"`

	// CycleState is "starting" while the cycle waits for every safety module to succeed
	// once (see Startup); empty otherwise (the cycle runs, or emergency_mode says why not).
	CycleState string `json:"cycle_state,omitempty"`
	// Startup says what startup waits for, in the ticks of a cycle that is starting.
	Startup *StartupState `json:"startup,omitempty"`
	// Shed says which modules load shedding sheds in this tick and why; nil when none.
	Shed *ShedState `json:"shed,omitempty"`
	// Async lists the asynchronous modules whose runs ended since the previous tick.
	Async []AsyncRun `json:"async,omitempty"`

	lines  []Module // the whole module lines (SetModules, decoding, or materialised from src)
	src    Lines    // the lines in a producer's compact form (SetLines); nil: lines holds them
	mat    *lazy    // the materialisation of src, shared by copies of the summary
	packed *packing // set on the compact copy kept in a History
}

// Lines is a summary's module lines kept by their producer in a compact form, turned into
// Module values only when they are read. The engine publishes its summaries this way: a
// tick of 5000 modules then allocates a few bytes per module instead of a 240-byte line
// with a dozen pointers, most of which repeat the module's identity tick after tick (the
// lines of a summary nobody reads are never built). A Lines must not change once the
// summary holding it is published; its methods may be called concurrently.
type Lines interface {
	// Len returns the number of module lines.
	Len() int
	// Line sets *m to line i.
	Line(i int, m *Module)
	// Status returns the status of line i.
	Status(i int) Status
	// Plain reports whether line i is a plain success, as History's compaction defines it
	// (see KeepWhole).
	Plain(i int) bool
	// Identity returns a comparable value that two Lines share only if their lines name the
	// same modules, tiers, breakers and keys in the same order (nil: unknown).
	Identity() any
}

// A producer's Lines may answer questions about all its lines at once, which the summary
// and the history then ask instead of reading the lines one by one: a tick of many
// modules asks them on the path that publishes it.
type (
	// NominalLines reports whether every line's status is nominal (Status.Nominal).
	NominalLines interface {
		AllNominal() bool
	}
	// PlainLines appends to dst the positions of the lines that are not plain
	// successes (see Lines.Plain), in order, and returns it.
	PlainLines interface {
		AppendNotPlain(dst []int32) []int32
	}
)

// lazy is the materialisation of a summary's Lines, made once on first read.
type lazy struct {
	once  sync.Once
	lines []Module
}

// SetModules sets the summary's module lines to ms, which the summary keeps (it does not
// copy them).
func (s *Summary) SetModules(ms []Module) {
	s.lines, s.src, s.mat = ms, nil, nil
}

// SetLines sets the summary's module lines to src, read on demand.
func (s *Summary) SetLines(src Lines) {
	s.lines, s.src, s.mat = nil, src, &lazy{}
}

// Modules returns the summary's module lines, in plan order (tier by tier, in registration
// order within a tier). The slice is the summary's own, shared by every caller: read it,
// do not modify it. For a summary published by the engine the lines are built on the first
// call; NumModules and ModuleAt read one line without building them all.
func (s *Summary) Modules() []Module {
	if s.src == nil {
		return s.lines
	}
	s.mat.once.Do(func() {
		ms := make([]Module, s.src.Len())
		for i := range ms {
			s.src.Line(i, &ms[i])
		}
		s.mat.lines = ms
	})
	return s.mat.lines
}

// NumModules returns the number of module lines.
func (s *Summary) NumModules() int {
	if s.src == nil {
		return len(s.lines)
	}
	return s.src.Len()
}

// ModuleAt returns module line i (0 ≤ i < NumModules). A caller that reads many lines
// one at a time reads them with ModuleInto: when a producer keeps the lines (SetLines),
// each line ModuleAt returns is built on the heap, 240 bytes a call.
func (s *Summary) ModuleAt(i int) Module {
	var m Module
	s.ModuleInto(i, &m)
	return m
}

// ModuleInto sets *m to module line i (0 ≤ i < NumModules). It allocates nothing: one
// Module can take every line in turn.
func (s *Summary) ModuleInto(i int, m *Module) {
	if s.src == nil {
		*m = s.lines[i]
		return
	}
	s.src.Line(i, m)
}

// moduleStatus returns the status of line i without building the line.
func (s *Summary) moduleStatus(i int) Status {
	if s.src == nil {
		return s.lines[i].Status
	}
	return s.src.Status(i)
}

// PlainAt reports whether module line i is a plain success: status ok after one attempt,
// a live value, a closed circuit, no fault (the lines History keeps only as a roster, see
// KeepWhole). It builds no line when a producer keeps them.
func (s *Summary) PlainAt(i int) bool {
	if s.src == nil {
		return plain(&s.lines[i])
	}
	return s.src.Plain(i)
}

// LatencyLines is implemented by Lines that can tell a line's latency without building
// the line; LatencyAt uses it when the producer's lines have it.
type LatencyLines interface {
	// Latency returns the latency of line i (0 for a module that did not run).
	Latency(i int) time.Duration
}

// Latencies returns the latencies of the summary's module lines: the producer's lines
// themselves when they implement LatencyLines (no line is built), else a reader of each
// line's LatencyMs. A caller reading every line's latency asks for it once per summary.
func (s *Summary) Latencies() LatencyLines {
	if ll, ok := s.src.(LatencyLines); ok {
		return ll
	}
	return lineLatencies{s}
}

// lineLatencies reads the latencies of a summary's whole lines.
type lineLatencies struct{ s *Summary }

// Latency returns line i's LatencyMs as a duration.
func (l lineLatencies) Latency(i int) time.Duration {
	var m Module
	l.s.ModuleInto(i, &m)
	return time.Duration(m.LatencyMs * float64(time.Millisecond))
}

// LinesIdentity returns the identity its producer gives the summary's lines (see
// Lines.Identity): two summaries with the same non-nil identity have lines that name the
// same modules, tiers, breakers and keys in the same order. It is nil for lines set whole
// (SetModules) or decoded.
func (s *Summary) LinesIdentity() any {
	if s.src == nil {
		return nil
	}
	return s.src.Identity()
}

// wireSummary is the summary as encoded: its fields and its module lines.
type wireSummary struct {
	*summaryFields
	Modules []Module `json:"modules"`
}

type summaryFields Summary // the summary without its methods (no recursion into MarshalJSON)

// MarshalJSON encodes the summary with its module lines (schema cycled.fault_summary/v1).
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireSummary{summaryFields: (*summaryFields)(&s), Modules: s.Modules()})
}

// UnmarshalJSON decodes a summary encoded by MarshalJSON.
func (s *Summary) UnmarshalJSON(b []byte) error {
	w := wireSummary{summaryFields: (*summaryFields)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s.SetModules(w.Modules)
	return nil
}

// Module returns the line of the named module.
func (s *Summary) Module(name string) (Module, bool) {
	for _, m := range s.Modules() {
		if m.Name == name {
			return m, true
		}
	}
	return Module{}, false
}

// Tier returns the line of the named tier.
func (s *Summary) Tier(name string) (Tier, bool) {
	for _, t := range s.Tiers {
		if t.Name == name {
			return t, true
		}
	}
	return Tier{}, false
}

// ComputeSeverity returns critical in emergency mode or when a tier failed, degraded when
// any module did not succeed (or any key is degraded), ok otherwise.
func (s *Summary) ComputeSeverity() Severity {
	if s.EmergencyMode || s.Finish == Failed {
		return Critical
	}
	for _, t := range s.Tiers {
		if t.Status == TierFailed {
			return Critical
		}
	}
	if len(s.DegradedKeys) > 0 || len(s.OpenCircuits) > 0 || len(s.BudgetViolations) > 0 || s.Finish == ShortCircuited {
		return Degraded
	}
	if nl, ok := s.src.(NominalLines); ok {
		if !nl.AllNominal() {
			return Degraded
		}
	} else {
		for i, n := 0, s.NumModules(); i < n; i++ {
			if !s.moduleStatus(i).Nominal() {
				return Degraded
			}
		}
	}
	for _, t := range s.Tiers {
		if t.Status != TierOK {
			return Degraded
		}
	}
	return OK
}

// Normalize fills the schema and replaces nil slices and maps by empty ones so that the
// JSON carries [] and {} rather than null.
func (s *Summary) Normalize() {
	s.Schema = Schema
	if s.Tiers == nil {
		s.Tiers = []Tier{}
	}
	if s.src == nil && s.lines == nil {
		s.lines = []Module{}
	}
	if s.RetryCounts == nil {
		s.RetryCounts = map[string]int{}
	}
	if s.OpenCircuits == nil {
		s.OpenCircuits = []string{}
	}
	if s.HalfOpenCircuits == nil {
		s.HalfOpenCircuits = []string{}
	}
	if s.DegradedKeys == nil {
		s.DegradedKeys = []string{}
	}
	if s.BudgetViolations == nil {
		s.BudgetViolations = []string{}
	}
}
