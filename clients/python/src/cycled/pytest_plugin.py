"""The SDK's pytest fixture: ``serve_module``. Enabled by installing the package (entry
point ``pytest11``) or with ``pytest_plugins = ["cycled.pytest_plugin"]``."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import pytest

from .module import Module
from .testing import serve_module as _serve


@pytest.fixture
def serve_module() -> Iterator[Callable[..., Module]]:
    """Starts modules as cycled.testing.serve_module does: ``serve_module(func,
    name=..., tier=..., daemon=url)`` returns the started Module; every module started is
    stopped (and deregistered) after the test."""
    with contextlib.ExitStack() as stack:

        def start(func: Any, **kwargs: Any) -> Module:
            return stack.enter_context(_serve(func, **kwargs))

        yield start
