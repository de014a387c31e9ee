"""Typed views of the daemon's JSON: tick summaries, breakers, events, module inputs.

The payload classes are frozen dataclasses whose fields have the names of the API's
fields (api/openapi.yaml; a field named by a Python keyword ends with ``_``, e.g.
``Summary.async_``). Each keeps the JSON it was made from in ``raw``, so a field the daemon
adds later is still reachable without a new SDK, and ``payload["field"]`` reads the JSON
as the daemon sent it. Absent fields take their zero value.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types as _pytypes
import typing
from datetime import datetime
from typing import Any, ClassVar, Mapping, TypeVar, Union

__all__ = [
    "Input",
    "Call",
    "Problem",
    "Served",
    "ModuleLine",
    "TierLine",
    "Emergency",
    "StartupState",
    "ShedState",
    "AsyncRun",
    "RecorderStatus",
    "Summary",
    "BreakerSettings",
    "Breaker",
    "RecordedEvent",
    "Event",
    "TickPage",
    "ModuleResult",
    "TierResult",
    "EmergencyState",
    "parse_time",
    "json_name",
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


def json_name(f: dataclasses.Field[Any]) -> str:
    """The API's name of a payload field: the field's name without a trailing ``_``."""
    return f.name[:-1] if f.name.endswith("_") else f.name


P = TypeVar("P", bound="Payload")


class Payload:
    """The base of the API's payloads: decoding from JSON, and the raw JSON by key."""

    raw: Mapping[str, Any]
    _plans: ClassVar[dict[type, list[tuple[str, str, Any]]]] = {}

    @classmethod
    def from_dict(cls: type[P], d: Mapping[str, Any]) -> P:
        """Builds the payload from its JSON object (absent or null fields: zero values)."""
        plan = Payload._plans.get(cls)
        if plan is None:
            plan = _plan(cls)
            Payload._plans[cls] = plan
        kwargs: dict[str, Any] = {"raw": d}
        for name, key, conv in plan:
            v = d.get(key)
            if v is not None:
                kwargs[name] = conv(v)
        return cls(**kwargs)

    def __getitem__(self, key: str) -> Any:
        """The JSON field ``key`` as the daemon sent it (KeyError when absent)."""
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The JSON field ``key`` as the daemon sent it, or default."""
        return self.raw.get(key, default)


def _plan(cls: type) -> list[tuple[str, str, Any]]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return [(f.name, json_name(f), _converter(hints[f.name])) for f in dataclasses.fields(cls) if f.name != "raw"]


def _converter(tp: Any) -> Any:
    """A function from JSON to the annotated type tp (one per field, built once)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, _pytypes.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _converter(inner[0]) if len(inner) == 1 else (lambda v: v)
    if origin is list:
        item = _converter(args[0]) if args else (lambda v: v)
        return lambda v: [item(x) for x in v] if isinstance(v, list) else []
    if origin is dict or origin is Mapping:
        val = _converter(args[1]) if len(args) == 2 else (lambda v: v)
        return lambda v: {str(k): val(x) for k, x in v.items()} if isinstance(v, Mapping) else {}
    if isinstance(tp, type) and issubclass(tp, Payload):
        return lambda v: tp.from_dict(v) if isinstance(v, Mapping) else tp()
    if tp is datetime:
        return lambda v: parse_time(v) if isinstance(v, str) else None
    if tp is bool:
        return bool
    if tp is int:
        return lambda v: int(v)
    if tp is float:
        return lambda v: float(v)
    if tp is str:
        return lambda v: v if isinstance(v, str) else str(v)
    return lambda v: v


def _raw() -> Any:
    return dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Problem(Payload):
    """One finding of a validation: the field at fault and what is wrong with it;
    ``warning`` marks one that does not stop the configuration from running."""

    field: str = ""
    message: str = ""
    warning: bool = False
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Served(Payload):
    """What a module's key served after a tick: the value's provenance."""

    key: str = ""
    source: str = "none"
    stale: bool = False
    expired: bool = False
    age_ms: float = 0.0
    derived_from_stale: bool = False
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class ModuleLine(Payload):
    """One module's line in a tick summary (``status`` ok, retried, failed, timed_out,
    busy, open, probe_ok, probe_failed, skipped, not_due, rejected or shed)."""

    name: str = ""
    tier: str = ""
    tier_index: int = 0
    status: str = ""
    attempts: int = 0
    latency_ms: float = 0.0
    fault_kind: str = ""
    error: str = ""
    breaker: str = ""
    circuit_state: str = ""
    using_fallback: bool = False
    served: Served | None = None
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class TierLine(Payload):
    """One tier's line in a tick summary."""

    index: int = 0
    name: str = ""
    budget_ms: float = 0.0
    elapsed_ms: float = 0.0
    status: str = ""
    budget_exhausted: bool = False
    reason: str = ""
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Emergency(Payload):
    """The emergency state machine as a summary (or ``GET /emergency``) reports it."""

    active: bool = False
    since_tick: int = 0
    reason: str = ""
    latched: bool = False
    healthy_ticks: int = 0
    ended_tick: int = 0
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class StartupState(Payload):
    """What a starting cycle waits for: the safety modules not yet successful once."""

    pending: list[str] = dataclasses.field(default_factory=list)
    timeout_ms: float = 0.0
    #: Per safety module, the ticks of startup it failed in (they open no breaker).
    failures: dict[str, int] = dataclasses.field(default_factory=dict)
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class ShedState(Payload):
    """What load shedding sheds in a tick, since when and why."""

    level: int = 0
    modules: list[str] = dataclasses.field(default_factory=list)
    reason: str = ""
    since_tick: int = 0
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class AsyncRun(Payload):
    """The end of one run of an asynchronous module."""

    name: str = ""
    origin_tick: int = 0
    status: str = ""
    latency_ms: float = 0.0
    fault_kind: str = ""
    error: str = ""
    failures: int = 0
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class RecorderStatus(Payload):
    """The flight recorder's report in a summary: records dropped, and a failing write."""

    dropped: int = 0
    dropped_total: int = 0
    failing: bool = False
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Summary(Payload):
    """A CycleFaultSummary (``schema: cycled.fault_summary/v1``): what one tick did."""

    schema: str = ""
    tick_id: int = 0
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    start_lag_ms: float = 0.0
    wall_ms: float = 0.0
    overrun: bool = False
    skipped_grid_points: int = 0
    finish: str = ""
    emergency_mode: bool = False
    emergency: Emergency = dataclasses.field(default_factory=lambda: Emergency())
    overall_severity: str = ""
    tiers: list[TierLine] = dataclasses.field(default_factory=list)
    modules: list[ModuleLine] = dataclasses.field(default_factory=list)
    retry_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    open_circuits: list[str] = dataclasses.field(default_factory=list)
    half_open_circuits: list[str] = dataclasses.field(default_factory=list)
    degraded_keys: list[str] = dataclasses.field(default_factory=list)
    budget_violations: list[str] = dataclasses.field(default_factory=list)
    compacted: bool = False
    run_id: str = ""
    generation: int = 0
    epoch: int = 0  # the active/standby group's epoch (0: a daemon running alone)
    recorder: RecorderStatus | None = None
    retry_budget_exhausted: list[str] = dataclasses.field(default_factory=list)
    cycle_state: str = ""
    startup: StartupState | None = None
    shed: ShedState | None = None
    async_: list[AsyncRun] = dataclasses.field(default_factory=list)
    raw: Mapping[str, Any] = _raw()

    def module(self, name: str) -> ModuleLine | None:
        """The line of the named module, or None when it was not in this tick."""
        for m in self.modules:
            if m.name == name:
                return m
        return None


@dataclasses.dataclass(frozen=True)
class BreakerSettings(Payload):
    """A breaker's settings (``kind`` consecutive or rate; the rate fields for rate)."""

    failure_threshold: int = 0
    cooldown: str = ""
    half_open_probes: int = 0
    half_open_successes: int = 0
    trip_on: list[str] = dataclasses.field(default_factory=list)
    kind: str = ""
    window: int = 0
    min_ticks: int = 0
    failure_rate: float = 0.0
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Breaker(Payload):
    """A module's circuit breaker: ``state`` closed, open or half_open, and counters."""

    name: str = ""
    state: str = ""
    consecutive_failures: int = 0
    probes_in_flight: int = 0
    probe_successes: int = 0
    total_failures: int = 0
    total_successes: int = 0
    transitions: int = 0
    opened_at: datetime | None = None
    cooldown_remaining_ms: float = 0.0
    settings: BreakerSettings = dataclasses.field(default_factory=lambda: BreakerSettings())
    window_ticks: int = 0
    window_failures: int = 0
    raw: Mapping[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class RecordedEvent(Payload):
    """One event of ``GET /events`` (the flight recorder's): ``kind`` breaker,
    emergency_entered, emergency_left, config_applied, module_registered, module_removed,
    admin, …; ``data`` the details, whose shape depends on the kind."""

    id: int = 0
    at: datetime | None = None
    tick_id: int = 0
    run_id: str = ""
    kind: str = ""
    data: Any = None
    raw: Mapping[str, Any] = _raw()


class TickPage(list[Summary]):
    """A page of ``GET /ticks``: the summaries (newest first), and ``next_before`` (the
    ``before`` of the next, older page; 0 when there is none) and ``history_cap``."""

    def __init__(self, ticks: list[Summary], next_before: int = 0, history_cap: int = 0) -> None:
        super().__init__(ticks)
        self.next_before = next_before
        self.history_cap = history_cap


# The names these types had before they took the API's names.
ModuleResult = ModuleLine
TierResult = TierLine
EmergencyState = Emergency


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
    seq: int = 0
    written_at: datetime | None = None

    @classmethod
    def from_dict(cls, key: str, d: Mapping[str, Any]) -> "Input":
        """Builds an Input from an entry of a request's ``inputs``."""

        def get(k: str, default: Any) -> Any:
            v = d.get(k)
            return default if v is None else v

        return cls(
            key=get("key", key),
            value=d.get("value"),
            module=get("module", ""),
            tick_id=int(get("tick_id", 0)),
            source=get("source", "none"),
            stale=bool(d.get("stale", False)),
            expired=bool(d.get("expired", False)),
            age_ms=float(get("age_ms", 0.0)),
            derived_from_stale=bool(d.get("derived_from_stale", False)),
            raw=dict(d),
            seq=int(get("seq", 0)),
            written_at=parse_time(d.get("written_at")),
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
    answer is discarded by the daemon). ``traceparent`` and ``tracestate`` are the W3C
    trace context headers of the request ("" without them).
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
    traceparent: str = ""
    tracestate: str = ""

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
class Event:
    """One event of ``GET /ticks/stream``: ``type`` is ``tick``, ``breaker``,
    ``emergency`` or ``shed`` as the daemon sends them, or ``restart``, which the client
    adds when it finds the stream served by another daemon process than before (its
    ``data``: ``previous_run`` and ``run``, the boot parts of the event ids, and
    ``last_tick``, the last tick seen from the previous process); ``data`` is the decoded
    JSON; ``summary`` the Summary of a tick event."""

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
