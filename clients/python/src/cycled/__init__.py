"""Python SDK of cycled, the cognitive-cycle tick scheduler.

Write a module as a function (plain or ``async``) and serve it to a daemon::

    import cycled

    async def recall(call: cycled.Call):
        guard = call.inputs["collision_guard.result"]
        return {"seen": guard.value, "stale": guard.stale}

    cycled.Module(recall, name="py-recall", tier="knowledge",
                  reads=["collision_guard.result"]).run()

Follow the cycle with ``AsyncClient`` (asyncio) or ``Client``: ``latest()``,
``wait(after)``, ``ticks(...)``, ``stream()``, ``events()``, and the admin calls. Test a
module function without a daemon with ``cycled.testing``.
"""

from .aio import AsyncClient
from .client import DEFAULT_URL, Client
from .errors import (
    APIError,
    ApiError,
    ContractError,
    DaemonUnavailable,
    DownstreamError,
    ModuleError,
    NothingToDo,
    TransientError,
    ValidationError,
)
from .module import Module
from .types import (
    AsyncRun,
    Breaker,
    BreakerSettings,
    Call,
    Emergency,
    EmergencyState,
    Event,
    Input,
    ModuleLine,
    ModuleResult,
    Problem,
    RecordedEvent,
    RecorderStatus,
    Served,
    ShedState,
    StartupState,
    Summary,
    TickPage,
    TierLine,
    TierResult,
)

__all__ = [
    "DEFAULT_URL",
    "Client",
    "AsyncClient",
    "Module",
    "Call",
    "Input",
    "Summary",
    "ModuleLine",
    "TierLine",
    "Served",
    "Emergency",
    "Breaker",
    "BreakerSettings",
    "StartupState",
    "ShedState",
    "AsyncRun",
    "RecorderStatus",
    "Problem",
    "RecordedEvent",
    "TickPage",
    "Event",
    "ModuleResult",
    "TierResult",
    "EmergencyState",
    "ModuleError",
    "TransientError",
    "ValidationError",
    "ContractError",
    "DownstreamError",
    "NothingToDo",
    "ApiError",
    "APIError",
    "DaemonUnavailable",
    "__version__",
]

__version__ = "0.2.0"
