"""The typed payloads against the API: every field of the OpenAPI schemas the daemon
serves is declared with a matching type, every field of real answers is declared, and
the package passes a type checker (mypy --strict, from the system's packages)."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
import typing
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pytest

import cycled
from cycled.types import Payload, json_name

from conftest import Daemon, eventually

# API schema -> the SDK's class.
MODELS: dict[str, type[Payload]] = {
    "Summary": cycled.Summary,
    "ModuleLine": cycled.ModuleLine,
    "TierLine": cycled.TierLine,
    "Served": cycled.Served,
    "Emergency": cycled.Emergency,
    "StartupState": cycled.StartupState,
    "ShedState": cycled.ShedState,
    "AsyncRun": cycled.AsyncRun,
    "RecorderStatus": cycled.RecorderStatus,
    "Breaker": cycled.Breaker,
    "BreakerSettings": cycled.BreakerSettings,
    "Event": cycled.RecordedEvent,
    "Problem": cycled.Problem,
}


def fields(cls: type) -> dict[str, Any]:
    """The class's API fields (JSON name -> annotated type)."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return {json_name(f): hints[f.name] for f in dataclasses.fields(cls) if f.name != "raw"}


def resolve(schemas: dict[str, Any], s: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(schema name or "", the schema) of a property, following one $ref."""
    ref = s.get("$ref", "")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return name, schemas[name]
    return "", s


def accepts(tp: Any, schemas: dict[str, Any], prop: dict[str, Any]) -> bool:
    """Whether the annotated type tp holds the JSON of the schema prop."""
    name, s = resolve(schemas, prop)
    if typing.get_origin(tp) in (typing.Union, type(int | None)):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if name in MODELS:
        return tp is MODELS[name]
    if name == "Time" or s.get("format") == "date-time":
        return tp is datetime
    t = s.get("type")
    if t == "array":
        return typing.get_origin(tp) is list and accepts(typing.get_args(tp)[0], schemas, s["items"])
    if t == "object":
        return typing.get_origin(tp) is dict and accepts(typing.get_args(tp)[1], schemas, s.get("additionalProperties", {}))
    if t == "integer":
        return tp is int
    if t == "number":
        return tp is float
    if t == "boolean":
        return tp is bool
    if t == "string" or "const" in s or all(isinstance(v, str) for v in s.get("enum", [0])):
        return tp is str
    return tp is Any  # no type: any JSON


def test_payload_fields_match_the_openapi_schemas(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon()
    _, doc, _ = d.client.request("GET", "/openapi.json")
    schemas = doc["components"]["schemas"]
    for schema, cls in MODELS.items():
        props = schemas[schema]["properties"]
        declared = fields(cls)
        assert set(declared) == set(props), "%s: fields %s missing, %s not in the API" % (
            cls.__name__,
            sorted(set(props) - set(declared)),
            sorted(set(declared) - set(props)),
        )
        for name, prop in props.items():
            assert accepts(declared[name], schemas, prop), "%s.%s: %s does not hold %s" % (cls.__name__, name, declared[name], prop)


def undeclared(obj: Payload, path: str = "") -> list[str]:
    """The JSON fields of obj (and of the payloads inside it) that its class does not declare."""
    out = []
    declared = fields(type(obj))
    for key in obj.raw:
        if key not in declared:
            out.append(path + key)
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, Payload):
                out += undeclared(item, path + json_name(f) + ".")
    return out


def test_real_answers_have_no_undeclared_field(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(recorder=True)
    c = d.client
    c.register({"name": "extra", "tier": "knowledge", "builtin": {"value": 7}})
    c.inject("extra", fail_rate=1)
    eventually("a failed tick of extra", lambda: c.ticks(status="failed", module="extra", limit=1))
    summaries = list(c.ticks(limit=20)) + [c.latest()]
    assert any(s.recorder is not None for s in summaries)
    payloads: list[Payload] = [*summaries, *c.breakers(), c.emergency(), *c.events(limit=50)]
    assert payloads and [p for p in payloads if undeclared(p)] == []
    failed = c.ticks(status="failed", module="extra", limit=1)[0].module("extra")
    assert failed is not None and failed.fault_kind and failed.tier_index == 1


HAS_MYPY = importlib.util.find_spec("mypy") is not None


@pytest.mark.skipif(not HAS_MYPY, reason="mypy is not installed (Debian: apt-get install python3-mypy); the field tests above check the models")
def test_type_checker_passes() -> None:
    root = Path(__file__).resolve().parents[1]
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir=/dev/null", "src/cycled", "tests/typed_usage.py"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"MYPYPATH": str(root / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stdout + res.stderr
