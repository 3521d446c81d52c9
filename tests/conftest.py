"""Fixtures for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import settings

# Hypothesis profiles. Locally a property gets few examples from a fresh seed each run, so
# the unit tests stay quick and every run explores somewhere new. CI (`.ci/run` sets
# HYPOTHESIS_PROFILE=ci) draws many more, from a seed fixed by each test, so a main that
# passed once passes again and a failure there fails the same way on any machine
# (`HYPOTHESIS_PROFILE=ci` reproduces it). No deadline in either: the machine running the
# suite may be busy, and a slow example is not a failure. `--hypothesis-profile` on the
# command line still wins.
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("ci", max_examples=500, deadline=None, print_blob=True, derandomize=True)
settings.register_profile("explore", max_examples=500, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# The simulated upstreams listen on loopback, which a proxy variable does not exempt (as
# with curl): a machine's own proxy settings must not send the suite's requests away. A
# test of the proxies sets the variables it means.
for _name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
    os.environ.pop(_name, None)
    os.environ.pop(_name.upper(), None)


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
