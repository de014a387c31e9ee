package cycle

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// plainLine is faultsummary's definition of a line History may compact (KeepWhole).
func plainLine(m faultsummary.Module) bool {
	return m.Status == faultsummary.StatusOK && m.Attempts == 1 && m.FaultKind == "" && m.Error == "" &&
		m.CircuitState == "closed" && !m.UsingFallback && m.Served.Source == blackboard.Live &&
		!m.Served.Stale && !m.Served.Expired && !m.Served.DerivedFromStale && m.Served.AgeMs == 0
}

// The engine keeps a summary's lines compact (tickLines) and builds them when read. Every
// way of reading them must agree: Modules, ModuleAt, JSON, and the history's compact copy,
// which drops exactly the lines tickLines.Plain reports plain and rebuilds them from the
// roster. Modules here succeed, fail, retry, time out, are not due, open their breaker and
// read stale inputs, so that every kind of line is compacted at least once.
func TestCompactLinesReadBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%3 == 0 {
				return nil, fault.Transient(errBoom)
			}
			return in.TickID(), nil
		}}
		retried := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			if in.Attempt() == 1 && in.TickID()%2 == 0 {
				return nil, fault.Transient(errBoom)
			}
			return "v", nil
		}}
		slow := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%5 == 0 {
				time.Sleep(time.Second) // ignores its context: abandoned at the deadline
			}
			return 1, nil
		}}
		reader := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			v, _ := in.Get("flaky.result") // stale when flaky failed: the value is derived from stale
			return v.Value, nil
		}}
		regs := []Registration{
			reg("guard", "safety", ok(true)),
			reg("flaky", "knowledge", flaky),
			reg("retried", "knowledge", retried),
			reg("rare", "knowledge", ok(2), func(s *tiers.ModuleSpec) { s.Every = 4 }),
			reg("reader", "planning", reader, func(s *tiers.ModuleSpec) { s.Reads = []string{"flaky.result"} }),
			reg("slow", "planning", slow),
		}
		const ticks = faultsummary.KeepWhole + 12
		e := newEngine(t, Config{History: ticks}, regs)
		whole := make(map[uint64]*faultsummary.Summary)
		for range ticks {
			s := tick(t, e)
			whole[s.TickID] = s
		}
		compacted, plain := 0, 0
		for id := uint64(1); id <= ticks; id++ {
			w := whole[id]
			ms := w.Modules()
			if w.NumModules() != len(ms) || len(ms) != len(regs) {
				t.Fatalf("tick %d: NumModules %d, %d lines, want %d", id, w.NumModules(), len(ms), len(regs))
			}
			for i := range ms {
				if got := w.ModuleAt(i); !reflect.DeepEqual(got, ms[i]) {
					t.Fatalf("tick %d: ModuleAt(%d) = %+v, Modules()[%d] = %+v", id, i, got, i, ms[i])
				}
			}
			b, err := json.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			var back faultsummary.Summary
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			for i, m := range back.Modules() {
				want := ms[i]
				want.Served.Value, want.Served.Written, want.Served.WrittenTick, want.Served.Seq = nil, time.Time{}, 0, 0
				if !reflect.DeepEqual(m, want) {
					t.Fatalf("tick %d line %d from JSON:\n got %+v\nwant %+v", id, i, m, want)
				}
			}
			got, ok := e.History().Get(id)
			if !ok {
				t.Fatalf("tick %d not in the history", id)
			}
			if !got.Compacted {
				continue
			}
			compacted++
			for i, m := range got.Modules() {
				want := ms[i]
				if plainLine(want) {
					plain++
					// Rebuilt from the roster: no latency, value or write.
					want.LatencyMs, want.Served = 0, faultsummary.Served{Key: want.Served.Key, Source: blackboard.Live}
				}
				if !reflect.DeepEqual(m, want) {
					t.Fatalf("tick %d line %d from the compact copy:\n got %+v\nwant %+v", id, i, m, want)
				}
			}
		}
		if compacted != ticks-faultsummary.KeepWhole || plain == 0 {
			t.Fatalf("%d summaries compacted (want %d), %d plain lines in them", compacted, ticks-faultsummary.KeepWhole, plain)
		}
		// Every status of this cycle was seen in the whole summaries.
		seen := map[faultsummary.Status]bool{}
		derived := false
		for _, s := range whole {
			for _, m := range s.Modules() {
				seen[m.Status] = true
				derived = derived || m.Served.DerivedFromStale
			}
		}
		if !derived {
			t.Error("no value derived from stale input: the test does not cover it")
		}
		for _, st := range []faultsummary.Status{faultsummary.StatusOK, faultsummary.StatusFailed, faultsummary.StatusRetried,
			faultsummary.StatusTimedOut, faultsummary.StatusNotDue} {
			if !seen[st] {
				t.Errorf("no line with status %s: the test does not cover it", st)
			}
		}
		time.Sleep(2 * time.Second) // virtual: the abandoned run of slow returns
		synctest.Wait()
	})
}

// sameFacts compares every field of a line's record but its extras' index: a record that
// differs from another in any one field is not the same line (SameLine, which lets the
// history share a steady state's lines, relies on it).
func TestLineRecSameFacts(t *testing.T) {
	rt := reflect.TypeFor[lineRec]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		var a, b lineRec
		fv := reflect.ValueOf(&b).Elem().Field(i)
		fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem()
		if fv.CanInt() {
			fv.SetInt(1)
		} else {
			fv.SetUint(1)
		}
		if got, want := a.sameFacts(&b), f.Name == "ex"; got != want {
			t.Errorf("records differing in %s: sameFacts = %v, want %v", f.Name, got, want)
		}
	}
}

// SameNotPlain answers for the lines of two ticks only when each tick's lines that are
// not plain are all kept lines (keptN of n), neither tick saw a breaker move, and nothing
// kept changed between their ends (kver); else the compaction compares lines.
func TestSameNotPlain(t *testing.T) {
	st, other := &state{}, &state{}
	base := func() *tickLines { return &tickLines{st: st, keptN: 4, kver: 9, steady: true} }
	cases := []struct {
		name string
		edit func(cur, prev *tickLines)
		n    int
		want bool
	}{
		{"all kept, steady, same version", func(cur, prev *tickLines) {}, 4, true},
		{"a line not plain that is not kept", func(cur, prev *tickLines) {}, 5, false},
		{"the earlier tick had one not kept", func(cur, prev *tickLines) { prev.keptN = 3 }, 4, false},
		{"a breaker moved during the tick", func(cur, prev *tickLines) { cur.steady = false }, 4, false},
		{"a breaker moved during the earlier tick", func(cur, prev *tickLines) { prev.steady = false }, 4, false},
		{"what is kept changed in between", func(cur, prev *tickLines) { cur.kver = 10 }, 4, false},
		{"another configuration", func(cur, prev *tickLines) { prev.st = other }, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur, prev := base(), base()
			c.edit(cur, prev)
			if got := cur.SameNotPlain(prev, c.n); got != c.want {
				t.Fatalf("SameNotPlain = %v, want %v", got, c.want)
			}
		})
	}
	var lines faultsummary.Lines = base()
	if _, ok := lines.(faultsummary.SteadyLines); !ok {
		t.Fatal("tickLines does not answer faultsummary.SteadyLines")
	}
}
