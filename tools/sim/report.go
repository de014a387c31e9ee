package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ReportSchema names the JSON form of a Report.
const ReportSchema = "cycled.sim_report/v1"

// Report is what a simulation shows a person: how each tier used its budget, what each
// module did, how breakers opened, emergency episodes, overruns, and degraded keys.
type Report struct {
	Schema            string             `json:"schema"`
	Scenario          string             `json:"scenario,omitempty"`
	Ticks             int                `json:"ticks"`
	Start             time.Time          `json:"start"`
	End               time.Time          `json:"end"`
	VirtualSeconds    float64            `json:"virtual_seconds"`
	TickP50Ms         float64            `json:"tick_p50_ms"`
	TickP99Ms         float64            `json:"tick_p99_ms"`
	TickMaxMs         float64            `json:"tick_max_ms"`
	Overruns          int                `json:"overruns"`
	SkippedGridPoints int                `json:"skipped_grid_points"`
	Severity          map[string]int     `json:"severity"`
	Finish            map[string]int     `json:"finish"`
	Tiers             []TierReport       `json:"tiers"`
	Modules           []ModuleReport     `json:"modules"`
	Breakers          []BreakerReport    `json:"breakers"`
	Emergencies       []EmergencyEpisode `json:"emergencies"`
	Keys              []KeyReport        `json:"keys"`
}

// TierReport is one tier's budget use: elapsed ÷ budget per tick it ran.
type TierReport struct {
	Name         string         `json:"name"`
	BudgetMs     float64        `json:"budget_ms"`
	Ran          int            `json:"ran"`
	Skipped      int            `json:"skipped"`
	UseP50       float64        `json:"use_p50"`
	UseP99       float64        `json:"use_p99"`
	UseMax       float64        `json:"use_max"`
	ElapsedP50Ms float64        `json:"elapsed_p50_ms"`
	ElapsedP99Ms float64        `json:"elapsed_p99_ms"`
	ElapsedMaxMs float64        `json:"elapsed_max_ms"`
	Retries      int            `json:"retries"`
	Exhaustions  int            `json:"exhaustions"`
	Statuses     map[string]int `json:"statuses"`
}

// ModuleReport is one module's status counts and latency.
type ModuleReport struct {
	Name         string         `json:"name"`
	Tier         string         `json:"tier"`
	Statuses     map[string]int `json:"statuses"`
	Attempts     int            `json:"attempts"`
	Retries      int            `json:"retries"`
	LatencyP50Ms float64        `json:"latency_p50_ms"`
	LatencyP99Ms float64        `json:"latency_p99_ms"`
	LatencyMaxMs float64        `json:"latency_max_ms"`
	FaultKinds   map[string]int `json:"fault_kinds,omitempty"`
}

// BreakerReport is how often a breaker opened and how long it stayed open (until it went
// half-open or was reset; a breaker open at the end counts until the end).
type BreakerReport struct {
	Name        string  `json:"name"`
	Openings    int     `json:"openings"`
	OpenMs      float64 `json:"open_ms"`
	LongestOpen float64 `json:"longest_open_ms"`
}

// EmergencyEpisode is one stretch of emergency mode.
type EmergencyEpisode struct {
	StartTick uint64 `json:"start_tick"`
	EndTick   uint64 `json:"end_tick,omitempty"` // the first tick out of it; 0: still active at the end
	Ticks     int    `json:"ticks"`
	Reason    string `json:"reason"`
}

// KeyReport is how a key was served when not live: stale (last-known-good), expired, or
// nothing, and its longest stretch not served live.
type KeyReport struct {
	Key           string  `json:"key"`
	StaleTicks    int     `json:"stale_ticks"`
	ExpiredTicks  int     `json:"expired_ticks"`
	NoneTicks     int     `json:"none_ticks"`
	LongestTicks  int     `json:"longest_ticks"`
	LongestSpanMs float64 `json:"longest_span_ms"`
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

// report builds the Report of what c collected.
func (c *collector) report(sc *Scenario) *Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &Report{Schema: ReportSchema, Scenario: sc.Name, Ticks: c.ticks, Start: c.start, End: c.last,
		VirtualSeconds: round(c.last.Sub(c.start).Seconds()), Overruns: c.overruns, SkippedGridPoints: c.skipped,
		Severity: c.severity, Finish: c.finish, Emergencies: c.episodes,
		TickP50Ms: round(quantile(c.wall, 0.5)), TickP99Ms: round(quantile(c.wall, 0.99)), TickMaxMs: round(quantile(c.wall, 1)),
		Tiers: []TierReport{}, Modules: []ModuleReport{}, Breakers: []BreakerReport{}, Keys: []KeyReport{}}
	if r.Emergencies == nil {
		r.Emergencies = []EmergencyEpisode{}
	}
	for _, t := range c.tiers {
		r.Tiers = append(r.Tiers, TierReport{Name: t.name, BudgetMs: t.budgetMs, Ran: len(t.elapsed), Skipped: t.skipped,
			UseP50: round(quantile(t.use, 0.5)), UseP99: round(quantile(t.use, 0.99)), UseMax: round(quantile(t.use, 1)),
			ElapsedP50Ms: round(quantile(t.elapsed, 0.5)), ElapsedP99Ms: round(quantile(t.elapsed, 0.99)),
			ElapsedMaxMs: round(quantile(t.elapsed, 1)), Retries: t.retries, Exhaustions: t.exhaustions, Statuses: t.statuses})
	}
	for _, m := range c.mods {
		r.Modules = append(r.Modules, ModuleReport{Name: m.name, Tier: m.tier, Statuses: m.statuses, Attempts: m.attempts,
			Retries: m.retries, LatencyP50Ms: round(m.lat.quantile(0.5)), LatencyP99Ms: round(m.lat.quantile(0.99)),
			LatencyMaxMs: round(m.lat.max), FaultKinds: m.kinds})
	}
	for _, name := range slices.Sorted(maps.Keys(c.brk)) {
		b := c.brk[name]
		open, longest := b.open, b.longest
		if !b.openAt.IsZero() && c.last.After(b.openAt) {
			open += c.last.Sub(b.openAt)
			longest = max(longest, c.last.Sub(b.openAt))
		}
		r.Breakers = append(r.Breakers, BreakerReport{Name: name, Openings: b.openings, OpenMs: ms(open), LongestOpen: ms(longest)})
	}
	for _, key := range slices.Sorted(maps.Keys(c.keys)) {
		k := c.keys[key]
		if k.stale+k.expired+k.none == 0 {
			continue
		}
		r.Keys = append(r.Keys, KeyReport{Key: key, StaleTicks: k.stale, ExpiredTicks: k.expired, NoneTicks: k.none,
			LongestTicks: k.longest, LongestSpanMs: ms(k.longestDur)})
	}
	return r
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for a person to read.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	name := r.Scenario
	if name == "" {
		name = "(no scenario)"
	}
	fmt.Fprintf(&b, "Simulation %s: %d ticks, %.3fs of virtual time from %s\n", name, r.Ticks, r.VirtualSeconds, r.Start.Format(time.RFC3339))
	fmt.Fprintf(&b, "Tick duration p50 %.3fms, p99 %.3fms, max %.3fms\n", r.TickP50Ms, r.TickP99Ms, r.TickMaxMs)
	fmt.Fprintf(&b, "Overruns %d, skipped grid points %d; severity %s; finish %s\n\n", r.Overruns, r.SkippedGridPoints,
		counts(r.Severity), counts(r.Finish))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tBUDGET\tRAN\tSKIPPED\tUSE p50\tp99\tmax\tRETRIES\tEXHAUSTED")
	for _, t := range r.Tiers {
		fmt.Fprintf(tw, "%s\t%gms\t%d\t%d\t%.2f\t%.2f\t%.2f\t%d\t%d\n", t.Name, t.BudgetMs, t.Ran, t.Skipped, t.UseP50, t.UseP99, t.UseMax, t.Retries, t.Exhaustions)
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tTIER\tLATENCY p50\tp99\tmax\tRETRIES\tSTATUSES")
	for _, m := range r.Modules {
		fmt.Fprintf(tw, "%s\t%s\t%.3fms\t%.3fms\t%.3fms\t%d\t%s\n", m.Name, m.Tier, m.LatencyP50Ms, m.LatencyP99Ms, m.LatencyMaxMs, m.Retries, counts(m.Statuses))
	}
	tw.Flush()
	r.writeEvents(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) writeEvents(b *strings.Builder) {
	b.WriteString("\nBreakers:\n")
	if len(r.Breakers) == 0 {
		b.WriteString("  none moved\n")
	}
	for _, br := range r.Breakers {
		fmt.Fprintf(b, "  %s: opened %d times, open %.3fs in all, longest %.3fs\n", br.Name, br.Openings, br.OpenMs/1000, br.LongestOpen/1000)
	}
	b.WriteString("\nEmergency episodes:\n")
	if len(r.Emergencies) == 0 {
		b.WriteString("  none\n")
	}
	for _, e := range r.Emergencies {
		end := "still active at the end"
		if e.EndTick > 0 {
			end = fmt.Sprintf("left at tick %d", e.EndTick)
		}
		fmt.Fprintf(b, "  from tick %d, %d ticks, %s: %s\n", e.StartTick, e.Ticks, end, e.Reason)
	}
	b.WriteString("\nKeys not served live:\n")
	if len(r.Keys) == 0 {
		b.WriteString("  none\n")
	}
	for _, k := range r.Keys {
		fmt.Fprintf(b, "  %s: stale %d ticks, expired %d, nothing %d; longest %d ticks (%.3fs)\n", k.Key, k.StaleTicks,
			k.ExpiredTicks, k.NoneTicks, k.LongestTicks, k.LongestSpanMs/1000)
	}
}

// counts writes a count map as "a 3, b 1", by name.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
