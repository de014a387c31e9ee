"""The parts both clients share, without a daemon: the event-stream parser and what a
reconnecting stream remembers."""

from __future__ import annotations

import pytest

from cycled import _wire

STREAM = (
    b"retry: 2000\n: connected\n\n"
    b"event: tick\nid: boot1-7\ndata: {\"schema\": \"cycled.fault_summary/v1\", \"tick_id\": 7}\n\n"
    b": ping\n\n"
    b"event: breaker\r\ndata: {\"name\": \"m\",\r\ndata:  \"to\": \"open\"}\r\n\r\n"
    b"event: tick\nid: boot1-8\ndata: {\"tick_id\": 8}\n\n"
)


@pytest.mark.parametrize("piece", [1, 2, 7, 64, len(STREAM)])
def test_sse_parser_any_split(piece: int) -> None:
    p = _wire.SSEParser()
    evs = []
    for i in range(0, len(STREAM), piece):
        evs += p.feed(STREAM[i : i + piece])
    assert [(e.type, e.id) for e in evs] == [("tick", "boot1-7"), ("breaker", ""), ("tick", "boot1-8")]
    assert evs[0].summary is not None and evs[0].summary.tick_id == 7
    assert evs[1].data == {"name": "m", "to": "open"} and evs[1].summary is None
    assert p.retry == 2.0 and p.comments == 2


@pytest.mark.parametrize(
    "last,ids,want",
    [
        # resumed in the same process: no restart
        ("boot1-3", ["boot1-4", "boot1-5"], ["tick", "tick"]),
        # a new process behind the same address: restart before its first tick
        ("boot1-3", ["boot2-1", "boot2-2"], ["restart", "tick", "tick"]),
        # ids that continue across the restart (a recorder) are still another process
        ("boot1-3", ["boot2-4"], ["restart", "tick"]),
        # no id to compare with: the first connection
        (None, ["boot1-1", "boot1-2"], ["tick", "tick"]),
        (None, ["boot1-9", "boot2-1"], ["tick", "restart", "tick"]),
    ],
)
def test_stream_state_recognises_a_restarted_daemon(last: str | None, ids: list[str], want: list[str]) -> None:
    st = _wire.StreamState(last)
    out = []
    for i in ids:
        out += st.accept(_wire.Event("tick", i, {}))
    assert [e.type for e in out] == want
    assert st.last_event_id == ids[-1]
    for e in out:
        if e.type == "restart":
            assert e.data["run"] != e.data["previous_run"] and e.data["last_tick"] > 0


def test_stream_backoff_doubles_to_a_cap_and_restarts_on_connect() -> None:
    st = _wire.StreamState(None)
    delays = [st.next_delay() for _ in range(8)]
    assert delays[:3] == [0.05, 0.1, 0.2] and delays[-1] == 2.0
    st.connected()
    assert st.next_delay() == 0.05


def test_build_sends_the_filters_as_the_api_wants() -> None:
    from datetime import datetime, timezone

    w = _wire.Wire("http://127.0.0.1:9/base/", "tok")
    since = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    r = w.build("GET", "/ticks", params={"severity": "ok", "module": None, "since": since, "limit": 5})
    assert r.target == "/base/ticks?severity=ok&since=2026-01-02T03%3A04%3A05%2B00%3A00&limit=5"
    assert "Authorization" not in r.headers  # only admin calls carry the token
    a = w.build("POST", "/modules", {"name": "m"}, admin=True)
    assert a.headers["Authorization"] == "Bearer tok" and a.body == b'{"name": "m"}'
    with pytest.raises(ValueError):
        w.build("GET", "/ticks", params={"since": datetime(2026, 1, 1)})  # no time zone
    with pytest.raises(ValueError):
        _wire.Wire("127.0.0.1:8080", None)  # no scheme


@pytest.mark.parametrize(
    "status,retry_after,want",
    [
        (429, 1.5, 1.5),  # paced: as told
        (429, None, 0.05),  # paced without a header: the backoff
        (503, 0.01, 0.05),  # never sooner than the backoff
        (404, None, None),  # will not pass by waiting
        (401, 3.0, None),
    ],
)
def test_stream_refusals(status: int, retry_after: float | None, want: float | None) -> None:
    from cycled import ApiError

    st = _wire.StreamState(None)
    assert st.refused_delay(ApiError(status, "x", "y", retry_after=retry_after)) == want
