// Package check is the invariant checker of cycled: it reads a sequence of
// CycleFaultSummaries together with the engine's configuration and reports every summary
// that breaks the contract of the tick, emergency mode, the breakers and the summary
// (docs/architecture.md). The engine tests, the fuzz target of the engine, the daemon tests
// and the soak feed it every summary they see.
//
// The checker takes plain values (Config) and never imports the engine; the engine builds
// a Checker from its configuration (cycle.NewChecker, or cycle.CheckConfig and New). Feed
// it the summaries in tick order with Check, and read Violations or Err at the end:
//
//	c, err := cycle.NewChecker(cfg, regs)
//	…
//	for each summary s { c.Check(s) }
//	if err := c.Err(); err != nil { t.Fatal(err) }
//
// A sequence may start at any tick (a daemon's history): the first summary then only
// seeds the rules that compare a tick with earlier ones. A sequence that starts at tick 1
// is checked against the engine's initial state (nothing produced, every breaker closed,
// no emergency). Operator actions are external to the summaries: record them with
// ResetEmergency and ResetBreaker, and configuration changes with Reconfigure.
//
// # Rules
//
// Every violation names one of these rules (the Rule constants). "Failing" statuses are
// those faultsummary.Status.Failing names (the valid statuses that are not nominal); a
// line "produced" when its status is ok (without fault_kind control), retried or probe_ok. A line is "degraded" when its
// status is failing, or when it is skipped in a skipped tier (an emergency-only module
// outside emergency mode excepted).
//
//	rule                    invariant
//	tick_consecutive        each tick id is the previous one + 1 (after a gap, the next
//	                        summary seeds the state again, as a first one does)
//	schema                  schema is cycled.fault_summary/v1; finish, severity, tier and
//	                        module statuses, sources and circuit states are valid values;
//	                        emergency_mode == emergency.active; one line per module
//	config                  the tiers (index, name, budget_ms) and the module lines (tier,
//	                        breaker, served key) are those of the configuration
//	timing                  started_at ≤ finished_at, wall_ms and start_lag_ms agree with
//	                        the times, the tiers fit in wall_ms, ticks do not overlap
//	tier_budget             every tier's elapsed_ms and every module's latency_ms is at most
//	                        budget_ms + tolerance; a tier that abandoned a module ran to
//	                        its deadline
//	budget_violations       budget_violations lists exactly the tiers with
//	                        budget_exhausted; a tier with a timed_out module is exhausted;
//	                        a skipped tier is neither exhausted nor timed
//	skipped_tier            no module of a skipped tier ran (its status is skipped); in a
//	                        tier that ran, only an emergency-only module is skipped
//	finish                  finish is short_circuited when a module with the abort policy
//	                        did not succeed (failed, probe_failed, busy, timed_out, or open
//	                        counted as a failure), failed when a tier ≥ 1 failed, completed
//	                        otherwise; the tiers after the one that ended the tick are
//	                        skipped, and no other tier is skipped outside emergency mode
//	tier_status             a tier that ran is failed iff a fail_fast module failed
//	                        (failed/probe_failed not canceled, timed_out, busy, or open with
//	                        on_open fail or in the safety tier), else degraded iff a module
//	                        is not ok/retried/probe_ok/not_due/skipped, else ok
//	every                   in a tier that ran, a module is not_due iff tick_id % every ≠ 0
//	emergency_only          an emergency-only module is skipped iff emergency mode was off
//	                        when its tier ran (for the safety tier: after the previous tick)
//	retry_counts            retry_counts[m] == attempts − 1 for every line with
//	                        attempts > 1 (whatever its status), and no other entry
//	status_attempts         ok ⇒ 1 attempt; retried ⇒ more than 1; failed and probe_* ⇒ at
//	                        least 1 (failed as canceled: the tick's cancellation may have
//	                        kept it from starting); busy/open/skipped/not_due ⇒ no attempt and no
//	                        latency; never more attempts than configured
//	fault_kind              busy and timed_out are transient; failed and probe_failed carry
//	                        a fault kind (not control); retried, probe_ok, not_due and
//	                        skipped carry none; ok and open carry none or control
//	served_live             served.source is live iff the line produced
//	stale_tagging           a live value is not stale, expired, a fallback nor aged; a
//	                        last_good value is a fallback, stale iff the line is degraded
//	                        (a not_due module serves its last value untagged); nothing
//	                        served is neither stale nor a fallback
//	expired_serves_nothing  expired ⇒ source none
//	safety_fail_closed      a failing safety-tier module is never served from last_good
//	lastgood_ttl            with a fixed TTL: last_good ⇒ age_ms < TTL; expired ⇒ age_ms ≥
//	                        TTL (automatic TTLs are not checked)
//	lastgood_age            a fallback (last_good or expired) exists only if the module
//	                        produced a value before, and its age is the time from that
//	                        tick to this tick's start; a value once produced does not
//	                        vanish (none without expired), except behind the safety tier's
//	                        fail-closed rule
//	degraded_keys           degraded_keys holds "key" for every degraded line served from
//	                        last_good, "key (none)" for every degraded line with nothing to
//	                        serve and "key (expired)" for every degraded line whose value
//	                        expired; a line that is not degraded is not listed
//	emergency_enter         a safety failure (a safety-tier module without the abort policy
//	                        that failed as for tier_status) leaves emergency_mode on with 0
//	                        healthy ticks; emergency starts only on such a tick, with
//	                        since_tick = that tick, latched = latch and a reason; since_tick
//	                        and the reason do not change while it lasts
//	emergency_leave         a tick in which every due safety module succeeded is healthy; emergency ends exactly
//	                        on the recover_after-th consecutive healthy tick (healthy_ticks
//	                        counts them), never while latched; an operator reset
//	                        (ResetEmergency) unlatches and restarts the count, and with
//	                        latch on a safety failure after it latches again; ended_tick
//	                        is the tick it ended
//	emergency_skip          while in emergency mode the tiers of skip_tiers are skipped,
//	                        and outside it they are not skipped for that reason
//	severity                critical iff emergency mode, finish failed or a failed tier;
//	                        else degraded iff a degraded key, an open circuit, a budget
//	                        violation, a short-circuit, a module not ok/retried/probe_ok/
//	                        not_due/skipped or a tier not ok; else ok
//	circuit_lists           open_circuits and half_open_circuits are sorted, unique,
//	                        configured breakers, and agree with every line's circuit_state;
//	                        the lines of a shared breaker agree
//	breaker_admission       a module on its own breaker runs as ok/retried/failed only
//	                        while the breaker is closed, and is refused (open) or probed
//	                        (probe_*) only while it is open or half-open; a module on a
//	                        shared breaker is refused or probed only while the breaker is
//	                        open or half-open or an earlier tier of the tick failed on it
//	breaker_open            (own breaker) closed → open only on a tick with a counted
//	                        failure (failed/probe_failed of a trip_on kind without
//	                        cancellation, busy, an abandoned timed_out run; none under the
//	                        abort policy, nor of a safety module while the cycle is
//	                        starting or in the tick that ends startup) that
//	                        makes failure_threshold consecutive counted failures since the
//	                        last success; and it opens when they do
//	breaker_cooldown        (own breaker) open → half_open, and a probe, only once cooldown
//	                        has passed since it opened (bounded by the started_at and
//	                        finished_at of the ticks involved); a refusal only while it may
//	                        not have; never closed → half_open
//	breaker_close           (own breaker) → closed only on a successful probe that makes
//	                        half_open_successes of them in the half-open period; and it
//	                        closes when they do
//	breaker_reopen          (own breaker) half_open → open only on a failed probe of a
//	                        counted kind (or an abandoned or busy probe), and a counted
//	                        failed probe re-opens it
//	breaker_probes          per tier and breaker: at most half_open_probes failed probes,
//	                        and at most half_open_probes + half_open_successes − 1 probes
//	busy_outstanding        a module is busy only while a run abandoned at a deadline
//	                        (timed_out) may still be outstanding: after a run that returned
//	                        in time, the next admission cannot be busy
//	shed                    a line is shed only with shedding configured, is
//	                        listed in the summary's shed (and every listed line is shed,
//	                        not due or skipped), did not run, and is never a safety,
//	                        critical, emergency-only or at-or-above-the-floor module
//	starting                cycle_state starting only with a startup
//	                        configuration, never again once startup ended, with the
//	                        safety modules it waits for; no tier after the safety tier
//	                        runs and no emergency is raised or latched while starting;
//	                        emergency mode entered without a safety failure only with
//	                        the reason startup_timeout in the tick startup ended
//	async                   an asynchronous run is reported for an
//	                        asynchronous module only, in a tick after the one it started
//	                        after, ok or failed/timed_out with its error and failure count
//
// # What the summaries cannot show
//
// "No module with more than one outstanding run" is checked from the other side only
// (busy_outstanding): a summary does not say when an abandoned run returns, so a module
// that is timed_out on one tick and runs again on a later one may or may not have been
// started while its abandoned run was still going. The fuzz target of the engine checks
// that direction inside the modules themselves (a concurrency counter per module).
//
// A timed_out line is either a run abandoned at the deadline (it counts as a breaker
// failure and aborts with the abort policy) or a module the runners never started before
// the deadline (released, no abort); the summary does not tell them apart, so the rules
// accept either where they differ. Breaker transitions are followed exactly only for a
// module's own breaker: a shared breaker takes events from several modules whose order
// within a tier the summary does not give; it gets the admission, probe-count and
// circuit-list rules.
//
// A breaker half-opens lazily, when something reads its state after the cooldown (the
// engine's admission, GET /breakers, a metrics scrape), so open → half_open is accepted
// on a tick where the module did not run, once the cooldown has passed.
package check
