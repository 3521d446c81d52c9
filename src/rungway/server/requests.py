"""The bodies of `GET /admin/requests` and `GET /admin/requests/{id}`: the ledger's rows.

The list holds the newest rows, newest first, each without its route plan to keep it
light: `{"requests": [summary, ...]}`. The detail is one summary with its `plan`
(candidates in order and every skip with its reason), found by id or a unique prefix.
A prefix that several ids share is answered with those requests' summaries, so the caller
can pick one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import parse_qs

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_MATCHES = 20
"""An ambiguous prefix lists at most this many of the requests it matches."""


class RequestSource(Protocol):
    """A ledger that can read its rows back."""

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` rows, newest first, without their route plans."""
        ...

    def matching(self, prefix: str, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows whose request id starts with `prefix`, in id order, with plans."""
        ...


class BadRequestsQuery(ValueError):
    """The query string asks for a count or a parameter that does not exist."""


def parse_requests_query(query_string: bytes) -> int:
    """The `limit` of a requests query: 1 to 500, 50 when absent."""
    fields = parse_qs(query_string.decode("latin-1"), keep_blank_values=True)
    unknown = sorted(set(fields) - {"limit"})
    if unknown:
        raise BadRequestsQuery(f"unknown query parameter {unknown[0]!r}; use `limit`")
    values = fields.get("limit", [str(DEFAULT_LIMIT)])
    text = values[0].strip() if len(values) == 1 else ""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
        shown = ", ".join(values)
        raise BadRequestsQuery(
            f"`limit` must be a whole number from 1 to {MAX_LIMIT}; got {shown!r}"
        )
    return int(text)


def request_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """One ledger row as the list shows it: everything but the route plan."""
    return {
        "request_id": row["request_id"],
        "started_at": row["started_at"],
        "client_key": row["client_key"],
        "api": row["api"],
        "requested_model": row["requested_model"],
        "resolved_model": row["resolved_model"],
        "provider": row["provider"],
        "connection_id": row["connection_id"],
        "upstream_model": row["upstream_model"],
        "rung": row["rung"],
        "outcome": row["outcome"],
        "status": row["status"],
        "stream": bool(row["stream"]),
        "latency_ms": row["latency_ms"],
        "ttfb_ms": row["ttfb_ms"],
        "tokens": {
            "input": row["input_tokens"],
            "output": row["output_tokens"],
            "cache_read": row["cache_read_tokens"],
            "cache_write": row["cache_write_tokens"],
            "reasoning": row["reasoning_tokens"],
        },
        "cost_usd": row["cost_usd"],
        "list_cost_usd": row["list_cost_usd"],
        "attempts": row["attempts"],
    }


def request_detail(row: Mapping[str, Any]) -> dict[str, Any]:
    """One ledger row in full: the summary and its route plan (None for rows without one)."""
    return {**request_summary(row), "plan": row["plan"]}


def ambiguous(prefix: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The 409 body for a prefix that several request ids share: an error and the matches."""
    more = len(rows) > MAX_MATCHES
    shown = rows[:MAX_MATCHES]
    count = f"more than {MAX_MATCHES}" if more else str(len(shown))
    return {
        "error": {
            "type": "ambiguous",
            "message": f"{count} request ids start with {prefix!r}; give more of the id",
        },
        "matches": [request_summary(row) for row in shown],
        "truncated": more,
    }
