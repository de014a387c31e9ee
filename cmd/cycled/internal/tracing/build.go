package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cycled/cycled/faultsummary"
)

// The spans' attribute keys.
const (
	attrTick       = attribute.Key("cycled.tick.id")
	attrRun        = attribute.Key("cycled.run_id")
	attrGeneration = attribute.Key("cycled.generation")
	attrSeverity   = attribute.Key("cycled.severity")
	attrFinish     = attribute.Key("cycled.finish")
	attrStartLag   = attribute.Key("cycled.start_lag_ms")
	attrOverrun    = attribute.Key("cycled.overrun")
	attrEmergency  = attribute.Key("cycled.emergency")
	attrTier       = attribute.Key("cycled.tier")
	attrTierStatus = attribute.Key("cycled.tier.status")
	attrBudget     = attribute.Key("cycled.tier.budget_ms")
	attrExhausted  = attribute.Key("cycled.tier.budget_exhausted")
	attrModule     = attribute.Key("cycled.module")
	attrStatus     = attribute.Key("cycled.status")
	attrAttempts   = attribute.Key("cycled.attempts")
	attrAttempt    = attribute.Key("cycled.attempt")
	attrFaultKind  = attribute.Key("cycled.fault_kind")
	attrSource     = attribute.Key("cycled.served.source")
	attrStale      = attribute.Key("cycled.served.stale")
	attrExpired    = attribute.Key("cycled.served.expired")
	attrDerived    = attribute.Key("cycled.served.derived_from_stale")
	attrCircuit    = attribute.Key("cycled.circuit_state")
	attrReason     = attribute.Key("cycled.reason")
)

// build makes the spans of the tick s: the tick's, then one per tier that ran (the tiers
// run one after the other: each starts where the one before ended), then one per module
// line of those tiers, from its tier's start for its latency.
func (t *Tracer) build(s *faultsummary.Summary) {
	tid := t.traceID(s.TickID)
	tickCtx, tick := t.tr.Start(withIDs(context.Background(), tid, spanID(tid, 't', "")), "tick",
		trace.WithTimestamp(s.StartedAt), trace.WithAttributes(
			attrTick.Int64(int64(s.TickID)), attrRun.String(s.RunID), attrGeneration.Int64(int64(s.Generation)),
			attrSeverity.String(string(s.OverallSeverity)), attrFinish.String(string(s.Finish)),
			attrStartLag.Float64(s.StartLagMs), attrOverrun.Bool(s.Overrun), attrEmergency.Bool(s.EmergencyMode)))
	if s.EmergencyMode {
		tick.AddEvent("emergency", trace.WithTimestamp(s.StartedAt), trace.WithAttributes(
			attrReason.String(s.Emergency.Reason), attribute.Bool("cycled.latched", s.Emergency.Latched),
			attribute.Int64("cycled.since_tick", int64(s.Emergency.SinceTick))))
		tick.SetStatus(codes.Error, "emergency mode: "+s.Emergency.Reason)
	} else if s.OverallSeverity == faultsummary.Critical {
		tick.SetStatus(codes.Error, "critical")
	}
	tiers := t.tierSpans(tickCtx, tid, s)
	var m faultsummary.Module
	for i := range s.NumModules() {
		s.ModuleInto(i, &m)
		if m.TierIndex < 0 || m.TierIndex >= len(tiers) || tiers[m.TierIndex].ctx == nil ||
			(m.Status.Nominal() && !m.Status.Ran()) { // not due, or its tier skipped: nothing to show
			continue
		}
		t.moduleSpan(tiers[m.TierIndex], tid, &m)
	}
	for _, ts := range tiers {
		if ts.span != nil {
			ts.span.End(trace.WithTimestamp(ts.end))
		}
	}
	tick.End(trace.WithTimestamp(s.FinishedAt))
}

// tierSpan is a tier's span while its modules' spans are made.
type tierSpan struct {
	ctx        context.Context // nil: the tier did not run
	span       trace.Span
	start, end time.Time
}

// tierSpans starts the spans of the tiers that ran, by tier index.
func (t *Tracer) tierSpans(tickCtx context.Context, tid trace.TraceID, s *faultsummary.Summary) []tierSpan {
	out := make([]tierSpan, len(s.Tiers))
	at := s.StartedAt
	for _, tl := range s.Tiers {
		if tl.Status == faultsummary.TierSkipped || tl.Index < 0 || tl.Index >= len(out) {
			continue
		}
		end := at.Add(millis(tl.ElapsedMs))
		ctx, sp := t.tr.Start(withIDs(tickCtx, tid, spanID(tid, 'r', tl.Name)), "tier "+tl.Name,
			trace.WithTimestamp(at), trace.WithAttributes(attrTier.String(tl.Name), attrTierStatus.String(string(tl.Status)),
				attrBudget.Float64(tl.BudgetMs), attrExhausted.Bool(tl.BudgetExhausted)))
		if tl.Status == faultsummary.TierFailed {
			sp.SetStatus(codes.Error, "tier failed: "+tl.Reason)
		}
		out[tl.Index] = tierSpan{ctx: ctx, span: sp, start: at, end: end}
		at = end
	}
	return out
}

// moduleSpan makes the span of module line m in its tier's span ts. The attributes that
// hold their usual value on a healthy line (no fault kind, nothing stale, expired or
// derived from stale, a closed circuit) are set only when they do not: most lines of
// most ticks are healthy, and every attribute is memory the exporter converts and sends.
func (t *Tracer) moduleSpan(ts tierSpan, tid trace.TraceID, m *faultsummary.Module) {
	var buf [10]attribute.KeyValue
	attrs := append(buf[:0], attrModule.String(m.Name), attrStatus.String(string(m.Status)),
		attrAttempts.Int(m.Attempts), attrSource.String(m.Served.Source.String()))
	if m.FaultKind != "" {
		attrs = append(attrs, attrFaultKind.String(m.FaultKind))
	}
	if m.Served.Stale {
		attrs = append(attrs, attrStale.Bool(true))
	}
	if m.Served.Expired {
		attrs = append(attrs, attrExpired.Bool(true))
	}
	if m.Served.DerivedFromStale {
		attrs = append(attrs, attrDerived.Bool(true))
	}
	if m.CircuitState != "" && m.CircuitState != "closed" {
		attrs = append(attrs, attrCircuit.String(m.CircuitState))
	}
	_, sp := t.tr.Start(withIDs(ts.ctx, tid, spanID(tid, 'm', m.Name)), "module "+m.Name,
		trace.WithTimestamp(ts.start), trace.WithAttributes(attrs...))
	for a := 1; m.Attempts > 1 && a <= m.Attempts; a++ {
		// The summary keeps how many attempts ran, not when: each is an event at the
		// start. A single attempt is the span itself.
		sp.AddEvent("attempt "+strconv.Itoa(a), trace.WithTimestamp(ts.start), trace.WithAttributes(attrAttempt.Int(a)))
	}
	if m.Status.Failing() && m.Status.Ran() { // a run that failed; a refusal is not an error of the span
		sp.SetStatus(codes.Error, m.Error)
	}
	sp.End(trace.WithTimestamp(ts.start.Add(millis(m.LatencyMs))))
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
