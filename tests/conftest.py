"""Fixtures for every test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest


@pytest.fixture(autouse=True)
def _sdk_clients_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every SDK client a test made when it ends.

    An unclosed client's pooled socket would otherwise be collected during a later test,
    whose gateway start-up runs the collector, and fail that test instead.
    """
    made: list[Any] = []
    for sdk_class in (openai.OpenAI, anthropic.Anthropic):
        original = sdk_class.__init__

        def tracked(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> None:
            __original(self, *args, **kwargs)
            made.append(self)

        monkeypatch.setattr(sdk_class, "__init__", tracked)
    yield
    for client in made:
        client.close()


# The real Redis and PostgreSQL, isolated per test (tests/services.py).
pytest_plugins = ["tests.services"]
