package peers

import (
	"context"
	"sync"
	"time"
)

// tickState is what peers A and B share around their modules: the tiers, the tick counter
// and summary ring, and the last-known-good map. The orchestration of a tier (a goroutine
// per module, a WaitGroup, a context.WithTimeout) is A's, and B reuses it: its helpers are
// here too.
type tickState struct {
	tiers []TierSpec
	n     int

	lgMu     sync.Mutex
	lastGood map[string]lgEntry // guarded by lgMu

	tickID uint64
	hist   []*Summary
	histN  int
}

func newTickState(spec Spec) tickState {
	return tickState{tiers: spec.Tiers, n: len(spec.Modules), lastGood: make(map[string]lgEntry, len(spec.Modules)),
		hist: make([]*Summary, max(spec.History, 16))}
}

// tick runs one tick, every tier in order through runTier, and keeps its summary.
func (ts *tickState) tick(runTier func(ti int, s *Summary)) {
	ts.tickID++
	s := &Summary{TickID: ts.tickID, Started: time.Now(), Tiers: make([]TierLine, len(ts.tiers)), Lines: make([]Line, 0, ts.n)}
	for ti := range ts.tiers {
		runTier(ti, s)
	}
	s.Finished = time.Now()
	ts.hist[ts.histN%len(ts.hist)] = s
	ts.histN++
}

// Last returns a view of the latest summary.
func (ts *tickState) Last() View {
	if ts.histN == 0 {
		return View{}
	}
	s := ts.hist[(ts.histN-1)%len(ts.hist)]
	return View{TickID: s.TickID, Tiers: s.Tiers, Lines: s.Lines}
}

// Close does nothing: abandoned goroutines end when their module returns.
func (ts *tickState) Close() {}

// fallbackLocked serves the last-known-good value of key on ln at now, or nothing once
// it is older than DefaultTTL, and lists the key as degraded. The caller holds lgMu.
func (ts *tickState) fallbackLocked(s *Summary, ln *Line, key string, now time.Time) {
	e, ok := ts.lastGood[key]
	if ok && now.Sub(e.at) < DefaultTTL {
		ln.Source, ln.Stale, ln.Age = SourceLastGood, true, now.Sub(e.at)
		s.DegradedKeys = append(s.DegradedKeys, key)
		return
	}
	ln.Source = SourceNone
	s.DegradedKeys = append(s.DegradedKeys, key+" (expired)")
}

// waitTier waits until every run of the tier has returned (wg) or the tier's context ends.
func waitTier(tctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-tctx.Done():
	}
}

// tierLine fills and returns tier ti's line of s, for a tier that ran from tStart to tEnd.
func tierLine(s *Summary, ti int, t *TierSpec, tStart, tEnd time.Time) *TierLine {
	tl := &s.Tiers[ti]
	tl.Name, tl.Elapsed, tl.Status = t.Name, tEnd.Sub(tStart), "ok"
	tl.BudgetExhausted = tl.Elapsed >= t.Budget
	return tl
}

// addLine appends ln to s, degrading its tier unless the module succeeded.
func addLine(s *Summary, tl *TierLine, ln Line) {
	if ln.Status != StatusOK && ln.Status != StatusRetried {
		tl.Status = "degraded"
	}
	s.Lines = append(s.Lines, ln)
}
