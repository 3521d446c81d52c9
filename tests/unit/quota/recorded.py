"""Load the recorded quota fixtures and compare readings with their golden windows."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from rungway.routing.snapshot import QuotaWindow, WindowStatus

FIXTURES = Path(__file__).parents[2] / "fixtures"


def recorded(*files: str) -> list[Any]:
    """Every case in the named fixture files (`<vendor>/<file>.json`), as pytest params."""
    params = []
    for file in files:
        for case in json.loads((FIXTURES / file).read_text()):
            params.append(pytest.param(case, id=f"{file}: {case['name']}"))
    return params


def body_of(case: dict[str, Any]) -> bytes:
    """The case's response body as the upstream sent it."""
    if "raw_body" in case:
        return str(case["raw_body"]).encode()
    return json.dumps(case["body"]).encode()


def assert_windows(
    actual: Iterable[QuotaWindow], expected: list[dict[str, Any]], *, now: float, source: str
) -> None:
    """The readings match the golden windows exactly (names, scope, status, percent, reset)."""
    by_key = {(window.name, window.model): window for window in actual}
    wanted = {(row["name"], row["model"]): row for row in expected}
    assert sorted(by_key, key=repr) == sorted(wanted, key=repr)
    for key, row in wanted.items():
        window = by_key[key]
        assert window.status is WindowStatus(row["status"]), key
        if row["used_percent"] is None:
            assert window.used_percent is None, key
        else:
            assert window.used_percent == pytest.approx(row["used_percent"], abs=1e-9), key
        if row["resets_at"] is None:
            assert window.resets_at is None, key
        else:
            assert window.resets_at == pytest.approx(row["resets_at"], abs=1e-6), key
        assert window.checked_at == now
        assert window.source == source
        assert window.was_exhausted is False
