"""Fencing: a module refuses requests from an older epoch of an active/standby group."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import cycled


def _post(url: str, epoch: int | None) -> tuple[int, dict]:
    body = json.dumps({"tick_id": 1, "module": "m", "tier": 0, "inputs": {}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    if epoch is not None:
        req.add_header("X-Cycled-Epoch", str(epoch))
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_older_epoch_refused_by_default() -> None:
    calls: list[int] = []

    def f(call: cycled.Call) -> int:
        calls.append(call.epoch)
        return call.epoch

    with cycled.Module(f, name="m", tier="safety", register=False) as m:
        assert _post(m.url, 7) == (200, {"value": 7})
        assert _post(m.url, 9) == (200, {"value": 9})
        status, body = _post(m.url, 7)  # the deposed daemon of epoch 7
        assert status == 409 and "older" in body["message"]
        assert _post(m.url, None)[0] == 409  # no epoch is epoch 0: older too
        assert calls == [7, 9]
        assert m.epoch == 9


def test_fencing_can_be_turned_off() -> None:
    with cycled.Module(lambda call: call.epoch, name="m", tier="safety", register=False, fence_epochs=False) as m:
        assert _post(m.url, 9) == (200, {"value": 9})
        assert _post(m.url, 7) == (200, {"value": 7})


def test_summary_epoch() -> None:
    assert cycled.Summary.from_dict({"tick_id": 3, "epoch": 12}).epoch == 12
    assert cycled.Summary.from_dict({"tick_id": 3}).epoch == 0
