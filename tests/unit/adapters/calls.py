"""One attempt's `UpstreamCall`, built as the engine builds it, for adapter tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import Connection, UpstreamCall


def call_of(
    connection: Connection,
    body: dict[str, Any],
    *,
    raw: bytes | None = None,
    model: str = "m",
    headers: Mapping[str, str] | None = None,
    query: str = "",
) -> UpstreamCall:
    """The call for `body` (sent as `raw`, else its own encoding), streamed when it asks."""
    return UpstreamCall(
        connection,
        model,
        body,
        orjson.dumps(body) if raw is None else raw,
        headers or {},
        stream=body.get("stream") is True,
        query=query,
    )
