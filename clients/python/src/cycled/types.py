"""Typed views of the daemon's JSON: tick summaries, module inputs, stream events.

Every type keeps the JSON it was made from in ``raw``, so fields the daemon adds later
are still reachable without a new SDK.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any, Mapping

__all__ = [
    "Input",
    "Call",
    "Served",
    "ModuleResult",
    "TierResult",
    "EmergencyState",
    "Summary",
    "Event",
    "parse_time",
]


def parse_time(value: str | None) -> datetime | None:
    """Parses an RFC 3339 time with up to nanoseconds (Python keeps microseconds)."""
    if not value:
        return None
    s = value.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        digits = 0
        while digits < len(rest) and rest[digits].isdigit():
            digits += 1
        s = head + "." + rest[:digits][:6].ljust(6, "0") + rest[digits:]
    return datetime.fromisoformat(s)


def _get(d: Mapping[str, Any], key: str, default: Any) -> Any:
    v = d.get(key)
    return default if v is None else v


@dataclasses.dataclass(frozen=True)
class Input:
    """One key a module reads, as the daemon served it this tick, with its provenance.

    ``source`` is ``live`` (written this tick), ``last_good`` (a last-known-good value
    standing in: ``stale`` is true and ``age_ms`` says how old) or ``none`` (nothing to
    serve; ``expired`` when a value outlived its TTL, ``value`` is None).
    """

    key: str
    value: Any = None
    module: str = ""
    tick_id: int = 0
    source: str = "none"
    stale: bool = False
    expired: bool = False
    age_ms: float = 0.0
    derived_from_stale: bool = False
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, key: str, d: Mapping[str, Any]) -> "Input":
        """Builds an Input from an entry of a request's ``inputs``."""
        return cls(
            key=_get(d, "key", key),
            value=d.get("value"),
            module=_get(d, "module", ""),
            tick_id=int(_get(d, "tick_id", 0)),
            source=_get(d, "source", "none"),
            stale=bool(d.get("stale", False)),
            expired=bool(d.get("expired", False)),
            age_ms=float(_get(d, "age_ms", 0.0)),
            derived_from_stale=bool(d.get("derived_from_stale", False)),
            raw=dict(d),
        )

    @property
    def live(self) -> bool:
        """Whether the value was written in this tick."""
        return self.source == "live"

    @property
    def present(self) -> bool:
        """Whether a value is served at all (live or last-known-good)."""
        return self.source != "none"


@dataclasses.dataclass
class Call:
    """One attempt of a module in one tick: what the function receives.

    ``deadline`` is when the daemon stops waiting (the tier's deadline or the module's
    timeout); ``timeout`` is the time that was left when the request arrived, in seconds,
    and ``remaining()`` the time left now. An ``async`` module function is cancelled at
    the deadline; a plain one should check ``remaining()`` and give up in time (its late
    answer is discarded by the daemon).
    """

    tick_id: int
    module: str
    tier: int
    attempt: int
    deadline: datetime | None
    timeout: float
    inputs: dict[str, Input]
    idempotency_key: str = ""
    run_id: str = ""
    epoch: int = 0  # X-Cycled-Epoch: the group's epoch of the daemon asking (0: none)
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    _expires: float = dataclasses.field(default=0.0, repr=False)  # time.monotonic() at the deadline

    def remaining(self) -> float:
        """Seconds left until the deadline (0 once it has passed)."""
        import time

        return max(0.0, self._expires - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed: the daemon no longer waits for this attempt."""
        return self.remaining() <= 0

    def value(self, key: str, default: Any = None) -> Any:
        """The value of an input key, or default when nothing is served."""
        i = self.inputs.get(key)
        return default if i is None or i.value is None else i.value


@dataclasses.dataclass(frozen=True)
class Served:
    """What a module's key served after a tick: the value's provenance."""

    key: str
    source: str
    stale: bool
    expired: bool
    age_ms: float
    derived_from_stale: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Served":
        """Builds a Served from a summary line's ``served``."""
        return cls(
            key=_get(d, "key", ""),
            source=_get(d, "source", "none"),
            stale=bool(d.get("stale", False)),
            expired=bool(d.get("expired", False)),
            age_ms=float(_get(d, "age_ms", 0.0)),
            derived_from_stale=bool(d.get("derived_from_stale", False)),
        )


@dataclasses.dataclass(frozen=True)
class ModuleResult:
    """One module's line in a tick summary."""

    name: str
    tier: str
    status: str
    attempts: int
    latency_ms: float
    fault_kind: str
    error: str
    circuit_state: str
    using_fallback: bool
    served: Served | None
    breaker: str = ""
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ModuleResult":
        """Builds a ModuleResult from a summary's ``modules`` entry."""
        served = d.get("served")
        return cls(
            name=_get(d, "name", ""),
            tier=_get(d, "tier", ""),
            status=_get(d, "status", ""),
            attempts=int(_get(d, "attempts", 0)),
            latency_ms=float(_get(d, "latency_ms", 0.0)),
            fault_kind=_get(d, "fault_kind", ""),
            error=_get(d, "error", ""),
            circuit_state=_get(d, "circuit_state", ""),
            using_fallback=bool(d.get("using_fallback", False)),
            served=Served.from_dict(served) if isinstance(served, Mapping) else None,
            breaker=_get(d, "breaker", ""),
            raw=dict(d),
        )


@dataclasses.dataclass(frozen=True)
class TierResult:
    """One tier's line in a tick summary."""

    index: int
    name: str
    budget_ms: float
    elapsed_ms: float
    status: str
    budget_exhausted: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TierResult":
        """Builds a TierResult from a summary's ``tiers`` entry."""
        return cls(
            index=int(_get(d, "index", 0)),
            name=_get(d, "name", ""),
            budget_ms=float(_get(d, "budget_ms", 0.0)),
            elapsed_ms=float(_get(d, "elapsed_ms", 0.0)),
            status=_get(d, "status", ""),
            budget_exhausted=bool(d.get("budget_exhausted", False)),
        )


@dataclasses.dataclass(frozen=True)
class EmergencyState:
    """The emergency state machine as a summary (or GET /emergency) reports it."""

    active: bool
    since_tick: int
    reason: str
    latched: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EmergencyState":
        """Builds an EmergencyState from a summary's ``emergency``."""
        return cls(
            active=bool(d.get("active", False)),
            since_tick=int(_get(d, "since_tick", 0)),
            reason=_get(d, "reason", ""),
            latched=bool(d.get("latched", False)),
        )


@dataclasses.dataclass(frozen=True)
class Summary:
    """A CycleFaultSummary (``schema: cycled.fault_summary/v1``): what one tick did."""

    schema: str
    tick_id: int
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    start_lag_ms: float
    wall_ms: float
    overrun: bool
    finish: str
    emergency_mode: bool
    emergency: EmergencyState
    overall_severity: str
    tiers: list[TierResult]
    modules: list[ModuleResult]
    retry_counts: dict[str, int]
    open_circuits: list[str]
    half_open_circuits: list[str]
    degraded_keys: list[str]
    budget_violations: list[str]
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    epoch: int = 0  # the active/standby group's epoch (0: a daemon running alone)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Summary":
        """Builds a Summary from its JSON object."""
        return cls(
            schema=_get(d, "schema", ""),
            tick_id=int(_get(d, "tick_id", 0)),
            scheduled_at=parse_time(d.get("scheduled_at")),
            started_at=parse_time(d.get("started_at")),
            finished_at=parse_time(d.get("finished_at")),
            start_lag_ms=float(_get(d, "start_lag_ms", 0.0)),
            wall_ms=float(_get(d, "wall_ms", 0.0)),
            overrun=bool(d.get("overrun", False)),
            finish=_get(d, "finish", ""),
            emergency_mode=bool(d.get("emergency_mode", False)),
            emergency=EmergencyState.from_dict(_get(d, "emergency", {})),
            overall_severity=_get(d, "overall_severity", ""),
            tiers=[TierResult.from_dict(t) for t in _get(d, "tiers", [])],
            modules=[ModuleResult.from_dict(m) for m in _get(d, "modules", [])],
            retry_counts={k: int(v) for k, v in _get(d, "retry_counts", {}).items()},
            open_circuits=list(_get(d, "open_circuits", [])),
            half_open_circuits=list(_get(d, "half_open_circuits", [])),
            degraded_keys=list(_get(d, "degraded_keys", [])),
            budget_violations=list(_get(d, "budget_violations", [])),
            raw=dict(d),
            epoch=int(d.get("epoch", 0) or 0),
        )

    def module(self, name: str) -> ModuleResult | None:
        """The line of the named module, or None when it was not in this tick."""
        for m in self.modules:
            if m.name == name:
                return m
        return None


@dataclasses.dataclass(frozen=True)
class Event:
    """One event of ``GET /ticks/stream``: ``type`` is ``tick``, ``breaker`` or
    ``emergency``; ``data`` the decoded JSON; ``summary`` the Summary of a tick event."""

    type: str
    id: str
    data: Any
    summary: Summary | None = None

    @classmethod
    def parse(cls, type_: str, id_: str, data: str) -> "Event":
        """Builds an Event from the fields of an SSE message."""
        try:
            decoded: Any = json.loads(data) if data else None
        except ValueError:
            decoded = data
        summary = Summary.from_dict(decoded) if type_ == "tick" and isinstance(decoded, dict) else None
        return cls(type=type_ or "message", id=id_, data=decoded, summary=summary)
