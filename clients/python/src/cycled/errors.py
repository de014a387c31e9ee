"""Errors of the SDK: the fault kinds a module raises, and the daemon's API errors."""

from __future__ import annotations

__all__ = [
    "ModuleError",
    "TransientError",
    "ValidationError",
    "ContractError",
    "DownstreamError",
    "NothingToDo",
    "APIError",
]


class ModuleError(Exception):
    """A module failure of a given fault kind; the daemon classifies the attempt with it.

    Raise one of the subclasses from a module function. Any other exception is reported
    as ``internal`` (a bug in the module): not retried, and it counts against the
    module's breaker.
    """

    kind = "internal"

    def __init__(self, message: str = "", *, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class TransientError(ModuleError):
    """A failure that may pass (timeout, contention, an unavailable downstream): the
    daemon retries it while the tier's budget lasts."""

    kind = "transient"


class ValidationError(ModuleError):
    """The module's input was invalid: not retried."""

    kind = "validation"


class ContractError(ModuleError):
    """A permanent failure (bad configuration, a broken invariant): not retried."""

    kind = "contract"


class DownstreamError(ModuleError):
    """A remote the module called answered with a client error or unusable output."""

    kind = "downstream"


class NothingToDo(ModuleError):
    """An expected short-circuit (gated off, nothing to do): kind ``control``, not a
    fault; the daemon keeps serving the module's last value."""

    kind = "control"


class APIError(Exception):
    """An error answer of the daemon's HTTP API: ``{"error": {code, message, field}}``."""

    def __init__(self, status: int, code: str, message: str, field: str = "", body: object = None) -> None:
        text = f"{status} {code}: {message}"
        if field:
            text += f" (field {field})"
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body
