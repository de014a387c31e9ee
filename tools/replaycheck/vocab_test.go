package replaycheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
	"github.com/cycled/cycled/tools/replaycheck"
)

// vocabCase is one outcome of the decision core under one policy.
type vocabCase struct {
	o           decide.Outcome
	p           decide.Policy
	tierSkipped bool
}

func (c vocabCase) String() string {
	return fmt.Sprintf("outcome %+v policy %+v tier skipped %v", c.o, c.p, c.tierSkipped)
}

// outcomes enumerates every outcome the decision core can be given, under every policy:
// each refusal, and each way an admitted run ends (in time, abandoned, unstarted; failed or
// not; of each fault kind; a probe or not; after one attempt or several).
func outcomes() []vocabCase {
	var os []decide.Outcome
	// Every refusal that decides a status of its own (whatever its number), and those that
	// skip the module.
	for r := decide.NotRefused + 1; ; r++ {
		if o := (decide.Outcome{Refusal: r}); decide.StatusOf(o) != decide.Skipped ||
			r == decide.EmergencyOnly || r == decide.TierSkipped || r == decide.Stopped {
			os = append(os, o)
		}
		if r == 255 {
			break
		}
	}
	os = append(os, decide.Outcome{Refusal: decide.StillBusy, Overdue: 2 * decide.IgnoreGrace})
	for _, probe := range []bool{false, true} {
		for _, attempts := range []int{1, 3} {
			os = append(os, decide.Outcome{Attempts: attempts, Probe: probe},
				decide.Outcome{Late: decide.Abandoned, Attempts: attempts, Probe: probe})
			for _, k := range fault.Kinds() {
				os = append(os, decide.Outcome{Attempts: attempts, Kind: k, Failed: true, Probe: probe})
			}
		}
		for _, k := range []fault.Kind{fault.KindTransient, fault.KindCanceled} {
			os = append(os, decide.Outcome{Late: decide.Unstarted, Kind: k, Failed: true, Probe: probe})
		}
	}
	var cs []vocabCase
	for _, o := range os {
		for _, pol := range []tiers.Policy{tiers.Degrade, tiers.FailFast, tiers.Abort} {
			for _, onOpen := range []tiers.OnOpen{tiers.Bypass, tiers.Fail} {
				for _, safety := range []bool{false, true} {
					p := decide.Policy{Policy: pol, OnOpen: onOpen, OnReject: onOpen, Safety: safety}
					cs = append(cs, vocabCase{o: o, p: p, tierSkipped: o.Refusal == decide.TierSkipped})
				}
			}
		}
	}
	return cs
}

// lineOf returns the summary line the engine writes for verdict v on outcome o.
func lineOf(name string, c vocabCase, v decide.Verdict) faultsummary.Module {
	m := faultsummary.Module{Name: name, Tier: "t", Status: v.Status.Public(), Attempts: c.o.Attempts,
		Breaker: name, CircuitState: "closed",
		Served: faultsummary.Served{Key: name, Source: blackboard.LastGood, Stale: true}}
	if c.p.Safety {
		m.Tier = "safety"
	} else {
		m.TierIndex = 1
	}
	switch v.Serve {
	case decide.Live:
		m.Served = faultsummary.Served{Key: name, Source: blackboard.Live}
	case decide.Nothing:
		m.Served = faultsummary.Served{Key: name, Source: blackboard.None}
	case decide.Kept:
		m.Served.Stale = false
	}
	m.UsingFallback = m.Served.Source == blackboard.LastGood
	if v.Kind != fault.KindNone { // as the engine writes it: empty without a fault
		m.FaultKind = v.Kind.String()
	}
	if err := v.Cause.Err(); err != nil {
		m.Error = err.Error()
	} else if v.Cause == decide.CauseRun {
		m.Error = "the module's error"
	}
	return m
}

// Every outcome the decision core can produce goes the whole way and comes back with the
// same verdict: outcome → status → summary JSON → a real recorder's row → the search filter
// (in the database and in memory) → replay's outcome → the verdict. Every module status is
// produced by some outcome, and every status recorded one by one can be searched for.
func TestVocabularyRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rec, err := sqlite.Open(ctx, sqlite.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	cases := outcomes()
	verdicts := make([]decide.Verdict, len(cases))
	first := rec.FirstTick()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	on := rec.Hooks().OnTick
	for i, c := range cases {
		v := decide.Judge(c.o, c.p)
		verdicts[i] = v
		name := fmt.Sprintf("m%d", i)
		s := &faultsummary.Summary{TickID: first + uint64(i), StartedAt: at.Add(time.Duration(i) * time.Millisecond),
			Finish: faultsummary.Completed,
			Tiers: []faultsummary.Tier{{Index: 0, Name: "safety", Status: faultsummary.TierOK},
				{Index: 1, Name: "t", Status: faultsummary.TierOK}}}
		if c.tierSkipped {
			s.Finish = faultsummary.ShortCircuited
			for ti := range s.Tiers {
				s.Tiers[ti].Status = faultsummary.TierSkipped
			}
		}
		s.SetModules([]faultsummary.Module{lineOf(name, c, v)})
		s.Normalize()
		s.OverallSeverity = s.ComputeSeverity()
		rec.Annotate(s)
		on(s)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := sqlite.OpenReader(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rows, err := rd.Lines(ctx, first, first+uint64(len(cases)))
	if err != nil {
		t.Fatal(err)
	}
	rowOf := map[uint64]recorder.Line{}
	for _, r := range rows {
		rowOf[r.TickID] = r
	}
	produced := map[faultsummary.Status]bool{}
	for i, c := range cases {
		v, id, name := verdicts[i], first+uint64(i), fmt.Sprintf("m%d", i)
		status := v.Status.Public()
		produced[status] = true
		if !status.Valid() {
			t.Fatalf("%v: status %q is not in the status table", c, status)
		}
		// The summary as recorded and read back.
		b, err := rd.Tick(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var s faultsummary.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		m, ok := s.Module(name)
		if !ok || m.Status != status {
			t.Errorf("%v: read back as %+v, want status %s", c, m, status)
			continue
		}
		// The recorder's row, and the search by status and by module.
		row, kept := rowOf[id]
		if kept != recorder.Indexed(&s, &m) || kept && row.Status != string(status) {
			t.Errorf("%v: row %+v kept %v, want kept %v", c, row, kept, recorder.Indexed(&s, &m))
		}
		if kept && !status.Searchable() {
			t.Errorf("%v: status %s is recorded one by one but not searchable", c, status)
		}
		f := recorder.Filter{Module: name, Status: status}
		if field, err := f.Validate(); (err == nil) != status.Searchable() {
			t.Errorf("%v: search for status %s: %s: %v (searchable %v)", c, status, field, err, status.Searchable())
		} else if err == nil {
			got, err := rd.Ticks(ctx, recorder.Query{Filter: f})
			if err != nil {
				t.Fatal(err)
			}
			found := slices.ContainsFunc(got, func(t recorder.Tick) bool { return t.ID == id })
			if found != kept || f.Match(&s) != kept {
				t.Errorf("%v: search module=%s status=%s: found %v, in memory %v, want %v", c, name, status, found, f.Match(&s), kept)
			}
		}
		// Replay's inverse: the same verdict.
		back := replaycheck.OutcomeOf(&m, c.tierSkipped)
		if got := decide.Judge(back, c.p); got != v {
			t.Errorf("%v: replayed as %+v:\n got %+v\nwant %+v", c, back, got, v)
		}
	}
	for _, row := range faultsummary.Statuses() {
		if !produced[row.Name] && !row.Async {
			t.Errorf("status %s is produced by no outcome of the decision core", row.Name)
		}
	}
	// The statuses of an asynchronous module's run are the rows that say so.
	var async []faultsummary.Status
	for _, e := range []decide.AsyncEnd{{}, {Failed: true, Kind: fault.KindTransient}, {Failed: true, Kind: fault.KindControl},
		{TimedOut: true}} {
		st := decide.JudgeAsync(e).Status
		if !st.Info().Async {
			t.Errorf("asynchronous end %+v: status %s is not an asynchronous status", e, st.Public())
		}
		if !slices.Contains(async, st.Public()) {
			async = append(async, st.Public())
		}
	}
	for _, row := range faultsummary.Statuses() {
		if row.Async != slices.Contains(async, row.Name) {
			t.Errorf("status %s: Async %v, produced by an asynchronous run %v", row.Name, row.Async, !row.Async)
		}
	}
}
