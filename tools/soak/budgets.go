package main

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Retry-budget counts.
//
// A retry budget counts first attempts and the retries it allows; the daemon exports the
// lifetime counts (cycled_retry_budget_first_attempts_total, _retries_total) and every
// summary shows each module's attempts. The soak follows both: the counts of the summaries
// through tick n, and the daemon's counts read between two ticks it knows (before: the
// latest tick before the scrape; after: the latest tick after it, so that the tick in
// progress during the scrape is at most after+1). The daemon's first attempts must lie
// between the summaries' through before and through after+1, and its retries must be at
// least the summaries' through before: every retry made was allowed by its budget. They
// may be more: a retry is allowed before its backoff, and a run whose deadline passes
// during the backoff does not make it. The first attempts may also differ by at most the
// abandoned lines: a run abandoned at its tier's deadline around the start of its first
// attempt shows the attempt count its module's previous run left, which may say one
// first attempt where none was made, or none (a module's very first run) where one was
// (docs/decisions.md).

// budgetCounts are a budget's first attempts and retries, and (in the summaries) its
// modules' lines abandoned at the deadline.
type budgetCounts struct{ firsts, retries, abandoned int64 }

// budgetTally accumulates the summaries' counts per budget, per tick.
type budgetTally struct {
	budgetOf map[string]string                  // module → budget, for the configuration in force
	cum      map[string]map[uint64]budgetCounts // budget → tick id → counts through that tick
	total    map[string]budgetCounts
}

func newBudgetTally() *budgetTally {
	return &budgetTally{budgetOf: map[string]string{}, cum: map[string]map[uint64]budgetCounts{}, total: map[string]budgetCounts{}}
}

// configure records which budget each module of cfg counts against.
func (b *budgetTally) configure(cfg check.Config) {
	clear(b.budgetOf)
	for _, m := range cfg.Modules {
		if m.RetryBudget != "" {
			b.budgetOf[m.Name] = m.RetryBudget
		}
	}
	for _, rb := range cfg.RetryBudgets {
		if _, ok := b.cum[rb.Name]; !ok {
			b.cum[rb.Name] = map[uint64]budgetCounts{}
		}
	}
}

// add counts summary s.
func (b *budgetTally) add(s *faultsummary.Summary) {
	for _, m := range s.Modules() {
		name := b.budgetOf[m.Name]
		if name == "" {
			continue
		}
		t := b.total[name]
		if m.Status == faultsummary.StatusTimedOut && strings.HasPrefix(m.Error, "still running at the tier deadline") {
			t.abandoned++
		}
		if m.Attempts > 0 {
			t.firsts++
			t.retries += int64(m.Attempts - 1)
		}
		b.total[name] = t
	}
	for name, c := range b.cum {
		c[s.TickID] = b.total[name]
	}
}

// through returns budget name's counts through tick id, and whether the tally has it.
func (b *budgetTally) through(name string, id uint64) (budgetCounts, bool) {
	c, ok := b.cum[name][id]
	return c, ok
}

// budgetScrape is the daemon's counts per budget at one scrape, between two ticks.
type budgetScrape struct {
	before, after uint64
	counts        map[string]budgetCounts
}

// scrapeBudgets reads the retry-budget counters of a /metrics body (nil if it does not
// parse).
func scrapeBudgets(body []byte) map[string]budgetCounts {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	out := map[string]budgetCounts{}
	add := func(family string, set func(c *budgetCounts, v int64)) {
		for _, m := range fams[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "budget" {
					c := out[l.GetValue()]
					set(&c, int64(m.GetCounter().GetValue()+m.GetUntyped().GetValue())) // typed or not
					out[l.GetValue()] = c
				}
			}
		}
	}
	add("cycled_retry_budget_first_attempts_total", func(c *budgetCounts, v int64) { c.firsts = v })
	add("cycled_retry_budget_retries_total", func(c *budgetCounts, v int64) { c.retries = v })
	return out
}

// budgetMismatches compares the scrapes with the tally and describes every scrape whose
// counts the summaries contradict.
func budgetMismatches(tally *budgetTally, scrapes []budgetScrape) []string {
	var out []string
	for _, sc := range scrapes {
		for _, name := range slices.Sorted(maps.Keys(sc.counts)) {
			got := sc.counts[name]
			lo, ok1 := tally.through(name, sc.before)
			hi, ok2 := tally.through(name, sc.after+1)
			if !ok1 || !ok2 {
				continue // a tick the tally does not have (the end of the soak)
			}
			if got.firsts < lo.firsts-lo.abandoned || got.firsts > hi.firsts+hi.abandoned || got.retries < lo.retries {
				out = append(out, fmt.Sprintf("budget %q between ticks %d and %d: the daemon counts %d first attempts and %d retries allowed; the summaries %d–%d first attempts (%d lines abandoned) and at least %d retries made",
					name, sc.before, sc.after, got.firsts, got.retries, lo.firsts, hi.firsts, lo.abandoned, lo.retries))
			}
		}
	}
	return out
}
