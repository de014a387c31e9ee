"""Code a user writes against the typed payloads: checked by mypy --strict in
test_types.py (not a test of its own), so that a wrong annotation in the SDK fails."""

from __future__ import annotations

from datetime import datetime

import cycled


def summary_fields(s: cycled.Summary) -> tuple[int, str, float, bool, datetime | None]:
    return s.tick_id, s.overall_severity, s.wall_ms, s.emergency.active, s.started_at


def served_source(s: cycled.Summary, name: str) -> str:
    line: cycled.ModuleLine | None = s.module(name)
    if line is None or line.served is None:
        return "none"
    return line.served.source


def tiers(s: cycled.Summary) -> list[tuple[str, float, bool]]:
    return [(t.name, t.budget_ms, t.budget_exhausted) for t in s.tiers]


def breaker_open(b: cycled.Breaker) -> bool:
    return b.state == "open" and b.settings.failure_threshold > 0 and b.opened_at is not None


def problems(e: cycled.ApiError) -> list[str]:
    return [p.field for p in e.problems]


async def follow(c: cycled.AsyncClient) -> int:
    page: cycled.TickPage = await c.ticks(severity="degraded", limit=5)
    n = page.next_before
    async for ev in c.stream():
        if ev.summary is not None:
            return ev.summary.tick_id + n
    return 0


def shed(s: cycled.Summary) -> list[str]:
    return s.shed.modules if s.shed is not None else []


def async_runs(s: cycled.Summary) -> list[int]:
    return [r.origin_tick for r in s.async_]
