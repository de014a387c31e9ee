"""Errors of the SDK: the fault kinds a module raises, and what the daemon's API answers.

Two errors come from the client side:

- ``DaemonUnavailable``: no answer at all (connection refused or reset, a name that does
  not resolve, no answer within the timeout). It is a ``ConnectionError``, so code that
  catches ``OSError`` keeps working.
- ``ApiError``: the daemon answered with an error object
  ``{"error": {"code", "message", "field", "problems"}}``; ``problems`` lists every finding
  (each with its field) when the daemon found several, e.g. a registration answered 422.
"""

from __future__ import annotations

from typing import Any

from .types import Problem

__all__ = [
    "ModuleError",
    "TransientError",
    "ValidationError",
    "ContractError",
    "DownstreamError",
    "NothingToDo",
    "ApiError",
    "APIError",
    "DaemonUnavailable",
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


class ApiError(Exception):
    """An error answer of the daemon's HTTP API.

    ``status`` is the HTTP status; ``code`` the machine-readable code (``not_found``,
    ``duplicate``, ``invalid``, …); ``message`` the daemon's message; ``field`` the field
    at fault (the first when there are several; empty when none); ``problems`` every
    finding with its field (empty unless the daemon listed several); ``retry_after`` the
    seconds of a 429's or 503's Retry-After header (None without one); ``body`` the
    decoded answer.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str = "",
        body: Any = None,
        *,
        problems: list[Problem] | None = None,
        retry_after: float | None = None,
    ) -> None:
        text = f"{status} {code}: {message}"
        if field:
            text += f" (field {field})"
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body
        self.problems: list[Problem] = list(problems or [])
        self.retry_after = retry_after


APIError = ApiError
"""The former name of ApiError, kept for code written against it."""


class DaemonUnavailable(ConnectionError):
    """The daemon could not be reached at ``url``: connection refused or reset before an
    answer, a name that does not resolve, or no answer within the timeout. ``__cause__``
    is the underlying error. A daemon that answers, even with 503, raises ApiError."""

    def __init__(self, url: str, reason: BaseException | str) -> None:
        super().__init__(f"cycled daemon at {url} unavailable: {reason}")
        self.url = url
        self.reason = str(reason)
