package advise

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cycled/cycled/config"
)

func sortProposals(ps []Proposal) {
	slices.SortFunc(ps, func(a, b Proposal) int { return strings.Compare(a.Path, b.Path) })
}

// The first line of a patch: advice, or the best found of an objective not met.
const (
	patchHeader     = "# cycled advise: merge into the configuration (tiers by name, breakers by key)\n"
	bestFoundHeader = "# cycled advise: the best found; it does NOT meet the objective (not advice)\n"
)

// patch is the YAML that turns from into to: tiers merged by name, breakers by key.
func patch(from, to *config.Config) string {
	var b strings.Builder
	var tiers []string
	for i, t := range to.Tiers {
		f := from.Tiers[i]
		var kv []string
		if t.Budget != f.Budget {
			kv = append(kv, "budget: "+t.Budget.String())
		}
		if t.MaxAttempts != f.MaxAttempts {
			kv = append(kv, fmt.Sprintf("max_attempts: %d", t.MaxAttempts))
		}
		if len(kv) > 0 {
			tiers = append(tiers, fmt.Sprintf("  - name: %s\n    %s\n", t.Name, strings.Join(kv, "\n    ")))
		}
	}
	var breakers []string
	for _, name := range slices.Sorted(maps.Keys(to.Breakers)) {
		if c := to.Breakers[name].Cooldown; c != from.Breakers[name].Cooldown {
			breakers = append(breakers, fmt.Sprintf("  %s:\n    cooldown: %s\n", name, c))
		}
	}
	if len(tiers)+len(breakers) == 0 {
		return ""
	}
	b.WriteString(patchHeader)
	if len(tiers) > 0 {
		b.WriteString("tiers:\n" + strings.Join(tiers, ""))
	}
	if len(breakers) > 0 {
		b.WriteString("breakers:\n" + strings.Join(breakers, ""))
	}
	return b.String()
}

// budgetWarnings says when the tiers' budgets add up to more than the period.
func budgetWarnings(c *config.Config) []string {
	var sum time.Duration
	for _, t := range c.Tiers {
		sum += t.Budget
	}
	if p := c.Cycle.Period; p > 0 && sum > p {
		return []string{fmt.Sprintf("the tiers' budgets add up to %s, more than the period %s: a tick that uses them all overruns", sum, p)}
	}
	return nil
}

// WriteJSON writes a as indented JSON.
func (a *Advice) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(a)
}

// WriteText writes a for a person: the objective, the proposals, the patch, and before
// and after side by side. An objective not met is said first; the best found, if kept,
// follows under its own heading and is never called advice.
func (a *Advice) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Objective: %s\n\n", a.Objective)
	switch {
	case !a.Met:
		b.WriteString("Objective NOT met: no budget, max_attempts or cooldown change that re-simulation could check meets it. Nothing is advised.\n")
	case len(a.Proposals) == 0:
		b.WriteString("No change proposed: the configuration meets the objective in the simulation.\n")
	}
	writeChanges(&b, a.Proposals, a.Patch, "Patch")
	if bf := a.BestFound; bf != nil {
		b.WriteString("\nBest found, NOT advice (it does not meet the objective):\n")
		writeChanges(&b, bf.Proposals, bf.Patch, "Its patch")
		for _, w := range bf.Warnings {
			fmt.Fprintf(&b, "\nwarning (best found): %s\n", w)
		}
	}
	for _, w := range a.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s\n", w)
	}
	switch {
	case a.BestFound != nil:
		b.WriteString("\nBefore and with the best found (re-simulated, same scenario and seed); objective NOT met:\n")
	case len(a.Proposals) == 0:
		met := "met"
		if !a.Met {
			met = "NOT met"
		}
		fmt.Fprintf(&b, "\nThe simulation (objective %s; nothing changed, so before and after are the same):\n", met)
	default:
		b.WriteString("\nBefore and after (re-simulated, same scenario and seed); objective met after:\n")
	}
	a.sideBySide(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeChanges writes proposals and their patch under the heading patchHeading.
func writeChanges(b *strings.Builder, ps []Proposal, patch, patchHeading string) {
	for _, p := range ps {
		fmt.Fprintf(b, "- %s: %s -> %s\n    why: %s\n    effect: %s\n", p.Path, p.From, p.To, p.Why, p.Effect)
	}
	if patch != "" {
		fmt.Fprintf(b, "\n%s:\n%s", patchHeading, patch)
	}
}

func (a *Advice) sideBySide(b *strings.Builder) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tBUDGET\t\tEXHAUSTED\t\tUSE p99\t\tRETRIES\t")
	fmt.Fprintln(tw, "\tbefore\tafter\tbefore\tafter\tbefore\tafter\tbefore\tafter")
	for i, t := range a.Before.Tiers {
		n := a.After.Tiers[min(i, len(a.After.Tiers)-1)]
		fmt.Fprintf(tw, "%s\t%gms\t%gms\t%d\t%d\t%.2f\t%.2f\t%d\t%d\n", t.Name, t.BudgetMs, n.BudgetMs, t.Exhaustions, n.Exhaustions,
			t.UseP99, n.UseP99, t.Retries, n.Retries)
	}
	fmt.Fprintf(tw, "tick p99\t%.3fms\t%.3fms\t\t\t\t\t\t\n", a.Before.TickP99Ms, a.After.TickP99Ms)
	fmt.Fprintf(tw, "overruns\t%d\t%d\t\t\t\t\t\t\n", a.Before.Overruns, a.After.Overruns)
	tw.Flush()
}
