"""Python SDK of cycled, the cognitive-cycle tick scheduler.

Write a module as a function and serve it to a daemon::

    import cycled

    def recall(call: cycled.Call):
        guard = call.inputs["collision_guard.result"]
        return {"seen": guard.value, "stale": guard.stale}

    cycled.Module(recall, name="py-recall", tier="knowledge",
                  reads=["collision_guard.result"]).run()

Read what the daemon does with Client: ``latest()``, ``wait(after)``, ``stream()``, …
"""

from .client import DEFAULT_URL, Client
from .errors import (
    APIError,
    ContractError,
    DownstreamError,
    ModuleError,
    NothingToDo,
    TransientError,
    ValidationError,
)
from .module import Module
from .types import Call, EmergencyState, Event, Input, ModuleResult, Served, Summary, TierResult

__all__ = [
    "DEFAULT_URL",
    "Client",
    "Module",
    "Call",
    "Input",
    "Summary",
    "ModuleResult",
    "TierResult",
    "Served",
    "EmergencyState",
    "Event",
    "ModuleError",
    "TransientError",
    "ValidationError",
    "ContractError",
    "DownstreamError",
    "NothingToDo",
    "APIError",
]

__version__ = "0.1.0"
