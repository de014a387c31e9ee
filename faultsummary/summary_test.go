package faultsummary

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cycled/cycled/blackboard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

// fullSummary is a summary with every field set, as the engine would build it.
func fullSummary() *Summary {
	s := &Summary{
		TickID:      42,
		ScheduledAt: t0,
		StartedAt:   t0.Add(1500 * time.Microsecond),
		FinishedAt:  t0.Add(40*time.Millisecond + 7),
		StartLagMs:  1.5, WallMs: 38.5, Overrun: true, SkippedGridPoints: 2,
		Finish:        Failed,
		EmergencyMode: true,
		Emergency:     Emergency{Active: true, SinceTick: 40, Reason: "guard failed", Latched: true, HealthyTicks: 1, EndedTick: 12},
		Tiers: []Tier{
			{Index: 0, Name: "safety", BudgetMs: 50, ElapsedMs: 12.25, Status: TierFailed, BudgetExhausted: true, Reason: "guard"},
		},
		RetryCounts:      map[string]int{"lidar": 2},
		OpenCircuits:     []string{"camera"},
		HalfOpenCircuits: []string{"llm"},
		DegradedKeys:     []string{"lidar.result", "camera.result (expired)"},
		BudgetViolations: []string{"safety"},
	}
	s.SetModules([]Module{{
		Name: "lidar", Tier: "knowledge", TierIndex: 1, Status: StatusRetried, Attempts: 3, LatencyMs: 4.5,
		FaultKind: "transient", Error: "timeout", Breaker: "lidar", CircuitState: "closed", UsingFallback: true,
		Served: Served{Key: "lidar.result", Source: blackboard.LastGood, Stale: true, AgeMs: 250, DerivedFromStale: true,
			Value: map[string]int{"obstacles": 1}, Written: t0, WrittenTick: 41, Seq: 9},
	}})
	return s
}

// withModules returns s with the module lines ms.
func withModules(s Summary, ms []Module) Summary {
	s.SetModules(ms)
	return s
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return m
}

func requireKeys(t *testing.T, where string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: required field %q missing (have %v)", where, k, slices.Sorted(maps.Keys(m)))
		}
	}
}

// TestSummaryJSONRequiredFields checks every field name the contract fixes, on a summary with
// everything set and on an empty normalised one (where omitempty must not hide them).
func TestSummaryJSONRequiredFields(t *testing.T) {
	for name, s := range map[string]*Summary{"full": fullSummary(), "empty": {TickID: 1}} {
		t.Run(name, func(t *testing.T) {
			s.Normalize()
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, b)
			requireKeys(t, "summary", m, "schema", "tick_id", "scheduled_at", "started_at", "finished_at",
				"start_lag_ms", "wall_ms", "overrun", "finish", "emergency_mode", "emergency", "overall_severity",
				"tiers", "modules", "retry_counts", "open_circuits", "half_open_circuits", "degraded_keys", "budget_violations")
			if m["schema"] != "cycled.fault_summary/v1" {
				t.Errorf("schema = %v", m["schema"])
			}
			em, ok := m["emergency"].(map[string]any)
			if !ok {
				t.Fatalf("emergency = %#v, want an object", m["emergency"])
			}
			requireKeys(t, "emergency", em, "active", "since_tick", "reason", "latched")
			if name == "empty" {
				return
			}
			tier := m["tiers"].([]any)[0].(map[string]any)
			requireKeys(t, "tiers[0]", tier, "index", "name", "budget_ms", "elapsed_ms", "status", "budget_exhausted")
			mod := m["modules"].([]any)[0].(map[string]any)
			requireKeys(t, "modules[0]", mod, "name", "tier", "status", "attempts", "latency_ms", "fault_kind", "error",
				"circuit_state", "using_fallback", "served")
			served := mod["served"].(map[string]any)
			requireKeys(t, "modules[0].served", served, "key", "source", "stale", "expired", "age_ms")
			for _, internal := range []string{"Value", "value", "Written", "written", "WrittenTick", "Seq", "seq"} {
				if _, ok := served[internal]; ok {
					t.Errorf("served carries the internal field %q", internal)
				}
			}
		})
	}
}

// TestSummaryJSONValues pins the encoding of the values: enums as their names, durations as
// float milliseconds, times as RFC 3339 with nanoseconds.
func TestSummaryJSONValues(t *testing.T) {
	s := fullSummary()
	s.OverallSeverity = s.ComputeSeverity()
	s.Normalize()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, b)
	for k, want := range map[string]any{
		"tick_id": 42.0, "start_lag_ms": 1.5, "wall_ms": 38.5, "overrun": true, "finish": "failed",
		"emergency_mode": true, "overall_severity": "critical",
		"scheduled_at": "2025-01-02T03:04:05.123456789Z",
		"started_at":   "2025-01-02T03:04:05.124956789Z",
		"finished_at":  "2025-01-02T03:04:05.163456796Z",
	} {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	for _, k := range []string{"scheduled_at", "started_at", "finished_at"} {
		got, err := time.Parse(time.RFC3339Nano, m[k].(string))
		if err != nil {
			t.Errorf("%s: %v", k, err)
		}
		want := map[string]time.Time{"scheduled_at": s.ScheduledAt, "started_at": s.StartedAt, "finished_at": s.FinishedAt}[k]
		if !got.Equal(want) {
			t.Errorf("%s = %v, want %v (nanoseconds lost?)", k, got, want)
		}
	}
	mod := m["modules"].([]any)[0].(map[string]any)
	served := mod["served"].(map[string]any)
	if mod["status"] != "retried" || mod["fault_kind"] != "transient" || mod["latency_ms"] != 4.5 ||
		served["source"] != "last_good" || served["age_ms"] != 250.0 || served["stale"] != true {
		t.Errorf("module line = %v", mod)
	}
	if tier := m["tiers"].([]any)[0].(map[string]any); tier["status"] != "failed" || tier["budget_exhausted"] != true || tier["budget_ms"] != 50.0 {
		t.Errorf("tier line = %v", tier)
	}
	if rc := m["retry_counts"].(map[string]any); len(rc) != 1 || rc["lidar"] != 2.0 {
		t.Errorf("retry_counts = %v", rc)
	}
	if dk := m["degraded_keys"].([]any); len(dk) != 2 || dk[1] != "camera.result (expired)" {
		t.Errorf("degraded_keys = %v", dk)
	}

	// The JSON decodes back into the same summary, except the fields it does not carry.
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want := *s
	ms := slices.Clone(s.Modules())
	ms[0].Served.Value, ms[0].Served.Written = nil, time.Time{}
	ms[0].Served.WrittenTick, ms[0].Served.Seq = 0, 0
	want.SetModules(ms)
	if !reflect.DeepEqual(back, want) {
		t.Errorf("round trip =\n%+v\nwant\n%+v", back, want)
	}
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestSummaryJSONSnakeCase walks every object of the JSON: field names are snake_case.
func TestSummaryJSONSnakeCase(t *testing.T) {
	s := fullSummary()
	s.Normalize()
	b, _ := json.Marshal(s)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if path != ".retry_counts" && !snake.MatchString(k) { // retry_counts is keyed by module name
					t.Errorf("field %s.%s is not snake_case", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	walk("", v)
}

// TestNormalizeEmptyCollections: a summary with nothing to report encodes [] and {}, not null.
func TestNormalizeEmptyCollections(t *testing.T) {
	s := &Summary{TickID: 1}
	raw, _ := json.Marshal(s)
	if !bytes.Contains(raw, []byte(`"open_circuits":null`)) {
		t.Fatalf("precondition: without Normalize nil slices encode as null: %s", raw)
	}
	s.Normalize()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("null")) {
		t.Errorf("normalised JSON carries null: %s", b)
	}
	for _, frag := range []string{`"tiers":[]`, `"modules":[]`, `"retry_counts":{}`, `"open_circuits":[]`,
		`"half_open_circuits":[]`, `"degraded_keys":[]`, `"budget_violations":[]`, `"schema":"cycled.fault_summary/v1"`} {
		if !bytes.Contains(b, []byte(frag)) {
			t.Errorf("JSON lacks %s: %s", frag, b)
		}
	}
	// Normalize keeps what is there and is idempotent.
	full := fullSummary()
	before := *full
	full.Normalize()
	full.Normalize()
	if !slices.Equal(full.OpenCircuits, before.OpenCircuits) || !slices.Equal(full.DegradedKeys, before.DegradedKeys) ||
		len(full.Tiers) != 1 || len(full.Modules()) != 1 || full.RetryCounts["lidar"] != 2 || full.Schema != Schema {
		t.Errorf("Normalize changed a full summary: %+v", full)
	}
}

func TestComputeSeverity(t *testing.T) {
	okTier := []Tier{{Name: "safety", Status: TierOK}, {Name: "knowledge", Status: TierOK}}
	tests := []struct {
		name string
		s    Summary
		want Severity
	}{
		{"nothing ran", Summary{Finish: Completed}, OK},
		{"all ok", withModules(Summary{Finish: Completed, Tiers: okTier}, []Module{{Status: StatusOK}, {Status: StatusRetried}, {Status: StatusProbeOK}, {Status: StatusNotDue}}), OK},
		{"emergency-only module skipped outside emergency", withModules(Summary{Finish: Completed, Tiers: okTier}, []Module{{Status: StatusSkipped}}), OK},
		{"emergency mode", Summary{Finish: Completed, EmergencyMode: true, Tiers: okTier}, Critical},
		{"tick failed", Summary{Finish: Failed, Tiers: okTier}, Critical},
		{"a tier failed", Summary{Finish: Completed, Tiers: []Tier{{Status: TierOK}, {Status: TierFailed}}}, Critical},
		{"emergency beats degraded", Summary{EmergencyMode: true, DegradedKeys: []string{"k"}}, Critical},
		{"short-circuited", Summary{Finish: ShortCircuited, Tiers: okTier}, Degraded},
		{"degraded key", Summary{Finish: Completed, Tiers: okTier, DegradedKeys: []string{"k (expired)"}}, Degraded},
		{"open circuit", Summary{Finish: Completed, Tiers: okTier, OpenCircuits: []string{"b"}}, Degraded},
		{"budget violation", Summary{Finish: Completed, Tiers: okTier, BudgetViolations: []string{"knowledge"}}, Degraded},
		{"degraded tier", Summary{Finish: Completed, Tiers: []Tier{{Status: TierOK}, {Status: TierDegraded}}}, Degraded},
		{"skipped tier", Summary{Finish: Completed, Tiers: []Tier{{Status: TierOK}, {Status: TierSkipped}}}, Degraded},
		{"half-open alone is ok", Summary{Finish: Completed, Tiers: okTier, HalfOpenCircuits: []string{"b"}}, OK},
	}
	for _, st := range []Status{StatusFailed, StatusTimedOut, StatusBusy, StatusOpen, StatusProbeFailed} {
		tests = append(tests, struct {
			name string
			s    Summary
			want Severity
		}{"module " + string(st), withModules(Summary{Finish: Completed, Tiers: okTier}, []Module{{Status: StatusOK}, {Status: st}}), Degraded})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.ComputeSeverity(); got != tt.want {
				t.Errorf("ComputeSeverity() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStatusProducedAndRan(t *testing.T) {
	tests := []struct {
		s             Status
		produced, ran bool
	}{
		{StatusOK, true, true},
		{StatusRetried, true, true},
		{StatusProbeOK, true, true},
		{StatusFailed, false, true},
		{StatusTimedOut, false, true},
		{StatusProbeFailed, false, true},
		{StatusBusy, false, false},
		{StatusOpen, false, false},
		{StatusSkipped, false, false},
		{StatusNotDue, false, false},
	}
	for _, tt := range tests {
		if tt.s.Produced() != tt.produced || tt.s.Ran() != tt.ran {
			t.Errorf("%s: Produced %v Ran %v, want %v %v", tt.s, tt.s.Produced(), tt.s.Ran(), tt.produced, tt.ran)
		}
	}
	// The status names are the ones docs/architecture.md lists.
	var names []string
	for _, tt := range tests {
		names = append(names, string(tt.s))
	}
	if got := strings.Join(names, " "); got != "ok retried probe_ok failed timed_out probe_failed busy open skipped not_due" {
		t.Errorf("status names = %s", got)
	}
}

func TestSummaryLookups(t *testing.T) {
	s := fullSummary()
	if m, ok := s.Module("lidar"); !ok || m.Attempts != 3 {
		t.Errorf("Module(lidar) = %+v, %v", m, ok)
	}
	if _, ok := s.Module("nope"); ok {
		t.Error("Module(nope) found")
	}
	if tr, ok := s.Tier("safety"); !ok || tr.BudgetMs != 50 {
		t.Errorf("Tier(safety) = %+v, %v", tr, ok)
	}
	if _, ok := s.Tier("nope"); ok {
		t.Error("Tier(nope) found")
	}
}

func TestEventJSON(t *testing.T) {
	b, err := json.Marshal(Event{Type: EventBreaker, Breaker: &BreakerEvent{Breaker: "llm", From: "closed", To: "open",
		Reason: "failure threshold reached", At: t0, TickID: 7}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"breaker","breaker":{"breaker":"llm","from":"closed","to":"open","reason":"failure threshold reached","at":"2025-01-02T03:04:05.123456789Z","tick_id":7}}`
	if string(b) != want {
		t.Errorf("breaker event = %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(Event{Type: EventEmergency, Emergency: &EmergencyEvent{Entered: true, TickID: 3, Reason: "guard", At: t0}})
	want = `{"type":"emergency","emergency":{"entered":true,"tick_id":3,"reason":"guard","latched":false,"at":"2025-01-02T03:04:05.123456789Z"}}`
	if string(b) != want {
		t.Errorf("emergency event = %s\nwant %s", b, want)
	}
	s := &Summary{TickID: 5}
	s.Normalize()
	b, _ = json.Marshal(Event{Type: EventTick, Summary: s})
	if m := decode(t, b); m["type"] != "tick" || m["summary"].(map[string]any)["tick_id"] != 5.0 || m["breaker"] != nil {
		t.Errorf("tick event = %s", b)
	}
}
