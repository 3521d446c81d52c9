"""The admin API under `/admin/`: the ladder's live state, the plans' accounts by pool,
spend, recent requests, and the operator's actions; its OpenAPI schema is in `openapi.py`.

It answers only an admin key (`admin.key` in the config), or, with no key configured, only
clients on this machine's loopback. Every answer is JSON; an error is
`{"error": {"type", "message"}}` with a 4xx status (a 405 names the one method in `Allow`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

import orjson
from pydantic import SecretStr

from rungway.clock import Clock
from rungway.config import ClientKeyConfig, is_loopback
from rungway.engine.state import StateSource
from rungway.ledger.report import LedgerUnavailable
from rungway.protocol.clients import KNOWN_CLIENTS
from rungway.quota.board import QuotaBoard
from rungway.quota.poller import UsagePoller
from rungway.routing.retired import RETIRED
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import ConnectionState, QuotaWindow, Roster, RosterConnection
from rungway.server.asgi import Receive, Scope, Send, request_headers, send_reply
from rungway.server.auth import ClientKeys
from rungway.server.openapi import SCHEMA
from rungway.server.pools import PinCounts, PoolsView
from rungway.server.requests import (
    MAX_MATCHES,
    BadRequestsQuery,
    RequestSource,
    ambiguous,
    parse_requests_query,
    request_detail,
    request_summary,
)
from rungway.server.spend import (
    BadSpendQuery,
    RungSpendOf,
    SpendBook,
    SpendSource,
    parse_spend_query,
)

PREFIX = "/admin/"
_JSON = [("content-type", "application/json"), ("cache-control", "no-store")]
_SCHEMA_JSON = orjson.dumps(SCHEMA)
_Handler = Callable[[Send, bytes], Awaitable[None]]
_Headers = Sequence[tuple[str, str]]


class AdminLedger(SpendSource, RequestSource, Protocol):
    """A ledger that reports its spend and reads its rows back."""


class AdminApi:
    """Read the connections' state, the spend and the recent requests; clear a cooldown,
    read a quota now, disable and enable a connection."""

    def __init__(
        self,
        *,
        roster: Roster,
        state: StateSource,
        board: QuotaBoard | None,
        poller: UsagePoller | None,
        clock: Clock,
        key: SecretStr | None,
        ledger: AdminLedger,
        ladder: LadderSettings,
        client_keys: Iterable[ClientKeyConfig],
        rung_spend: RungSpendOf,
        pins: PinCounts | None = None,
    ) -> None:
        self._roster = roster
        self._state = state
        self._board = board
        self._poller = poller
        self._clock = clock
        self._ledger = ledger
        self._actions = {
            "clear-cooldown": self._clear_cooldown,
            "refresh-quota": self._refresh_quota,
            "disable": self._disable,
            "enable": self._enable,
        }
        self._key = ClientKeys({"admin": key} if key is not None else {})
        client_keys = tuple(client_keys)
        # Which clients each plan serves, by its terms or its operator's choice: fixed.
        self._terms = {
            c.id: c.terms.to_json(KNOWN_CLIENTS, len(client_keys))
            for c in roster.connections.values()
        }
        self._spend = SpendBook(
            ledger=ledger, ladder=ladder, client_keys=client_keys, rung_spend=rung_spend
        )
        self._pools = PoolsView(
            roster=roster,
            ledger=ledger,
            burn=lambda: self._board.burn if self._board is not None else None,
            pins=lambda: pins,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request whose path starts with `/admin/`."""
        refusal = self._refuse(scope)
        if refusal is not None:
            await _error(send, *refusal)
            return
        method, path = scope["method"], scope["path"]
        route = self._route(path.removeprefix(PREFIX).strip("/").split("/"))
        if route is None:
            await _error(send, 404, "not_found", f"no admin endpoint {method} {path}")
            return
        allowed, handler = route
        if method != allowed:
            message = f"use {allowed} {path}"
            await _error(send, 405, "method_not_allowed", message, [("allow", allowed)])
            return
        try:
            await handler(send, scope.get("query_string", b""))
        except LedgerUnavailable as error:
            # A shared ledger that does not answer: the gateway still serves; say which.
            await _error(send, 503, "ledger_unavailable", str(error))

    def _route(self, parts: list[str]) -> tuple[str, _Handler] | None:
        """The one method a path answers, and its handler; None for no such path."""
        match parts:
            case ["connections"]:
                return "GET", self._list_connections
            case ["connections", connection_id, action] if action in self._actions:
                return "POST", partial(self._act, action, connection_id)
            case ["spend"]:
                return "GET", self._spend_report
            case ["pools"]:
                return "GET", self._pool_accounts
            case ["requests"]:
                return "GET", self._recent_requests
            case ["requests", request_id]:
                return "GET", partial(self._request, request_id)
            case ["openapi.json"]:
                return "GET", self._openapi
        return None

    def _refuse(self, scope: Scope) -> tuple[int, str, str] | None:
        if not self._key.required:
            host = (scope.get("client") or ("", 0))[0]
            if is_loopback(host):
                return None
            return (
                403,
                "forbidden",
                "the admin API answers only on loopback unless `admin.key` is configured",
            )
        if self._key.identify(request_headers(scope)) is not None:
            return None
        return 401, "unauthorized", "send the admin key as `Authorization: Bearer <key>`"

    def _connections(self) -> list[dict[str, Any]]:
        now = self._clock.now()
        states = self._state.connection_states(now)
        return [
            {
                **_connection(connection, states.get(connection.id, ConnectionState()), now),
                "terms": self._terms[connection.id],
            }
            for connection in self._roster.connections.values()
        ]

    async def _list_connections(self, send: Send, query_string: bytes) -> None:
        await _reply(send, 200, {"now": self._clock.now(), "connections": self._connections()})

    async def _openapi(self, send: Send, query_string: bytes) -> None:
        await send_reply(send, 200, list(_JSON), _SCHEMA_JSON)

    async def _act(self, action: str, connection_id: str, send: Send, query_string: bytes) -> None:
        if connection_id not in self._roster.connections:
            known = ", ".join(self._roster.connections)
            message = f"no connection {connection_id!r}; known: {known}"
            await _error(send, 404, "not_found", message)
            return
        await self._actions[action](send, connection_id)

    async def _spend_report(self, send: Send, query_string: bytes) -> None:
        try:
            by, period = parse_spend_query(query_string)
        except BadSpendQuery as error:
            await _error(send, 400, "invalid_request", str(error))
            return
        await _reply(send, 200, await self._spend.body(by, period, self._clock.now()))

    async def _pool_accounts(self, send: Send, query_string: bytes) -> None:
        now = self._clock.now()
        await _reply(send, 200, await self._pools.body(self._state.connection_states(now), now))

    async def _request(self, request_id: str, send: Send, query_string: bytes) -> None:
        # Ledger reads touch the disk (and wait for queued rows): off the event loop.
        prefix = request_id.lower()
        rows = await asyncio.to_thread(self._ledger.matching, prefix, MAX_MATCHES + 1)
        if not rows:
            await _error(send, 404, "not_found", f"no request id starts with {request_id!r}")
        elif len(rows) == 1:
            await _reply(send, 200, request_detail(rows[0]))
        else:
            await _reply(send, 409, ambiguous(request_id, rows))

    async def _recent_requests(self, send: Send, query_string: bytes) -> None:
        try:
            limit = parse_requests_query(query_string)
        except BadRequestsQuery as error:
            await _error(send, 400, "invalid_request", str(error))
            return
        rows = await asyncio.to_thread(self._ledger.recent, limit)
        await _reply(send, 200, {"requests": [request_summary(row) for row in rows]})

    async def _clear_cooldown(self, send: Send, connection_id: str) -> None:
        if self._board is None:
            await _error(send, 409, "conflict", "this gateway keeps no live quota state")
            return
        cleared = self._board.clear_cooldown(connection_id)
        await _reply(send, 200, {"connection": connection_id, "cleared": cleared})

    async def _disable(self, send: Send, connection_id: str) -> None:
        await self._switch(send, connection_id, disabled=True)

    async def _enable(self, send: Send, connection_id: str) -> None:
        await self._switch(send, connection_id, disabled=False)

    async def _switch(self, send: Send, connection_id: str, *, disabled: bool) -> None:
        if self._board is None:
            await _error(send, 409, "conflict", "this gateway keeps no live quota state")
            return
        board = self._board
        changed = board.disable(connection_id) if disabled else board.enable(connection_id)
        await _reply(
            send, 200, {"connection": connection_id, "disabled": disabled, "changed": changed}
        )

    async def _refresh_quota(self, send: Send, connection_id: str) -> None:
        if self._poller is None or not self._poller.polls(connection_id):
            message = f"connection {connection_id!r} has no usage endpoint to read"
            await _error(send, 409, "conflict", message)
            return
        await self._poller.poll(connection_id)
        now = self._clock.now()
        state = self._state.connection_states(now).get(connection_id, ConnectionState())
        connection = self._roster.connections[connection_id]
        entry = {**_connection(connection, state, now), "terms": self._terms[connection_id]}
        await _reply(send, 200, entry)


def _connection(connection: RosterConnection, state: ConnectionState, now: float) -> dict[str, Any]:
    cooling = state.cooldown_until is not None and state.cooldown_until > now
    return {
        "id": connection.id,
        "provider": connection.provider,
        "auth": connection.auth,
        "billing": connection.billing.billing.value,
        "overage": connection.billing.with_overage_permitted(state.overage_permitted).overage,
        # The account's own word, as last read: it bills past its quota (Copilot overage,
        # Claude extra usage, Codex credits), and its last answer was billed so.
        "overage_permitted": state.overage_permitted,
        "overage_in_use": state.overage_in_use,
        "models": [
            {"model": served.model, "rung": served.rung.label, "tier": served.tier.value}
            for served in connection.models
        ],
        "windows": [_window(window) for window in state.windows],
        "cooldown_until": state.cooldown_until if cooling else None,
        "cooldown_reason": state.cooldown_reason if cooling else "",
        "breaker": state.breaker.value,
        "disabled": state.disabled,
        # A provider whose service is gone for most of its users, and what replaced it.
        "retired": _retired(connection.provider),
    }


def _retired(provider: str) -> dict[str, str] | None:
    retired = RETIRED.get(provider)
    if retired is None:
        return None
    return {"since": retired.since, "successor": retired.successor, "notice": retired.notice}


def _window(window: QuotaWindow) -> dict[str, Any]:
    return {
        "name": window.name,
        "model": window.model,
        "used_percent": window.used_percent,
        "resets_at": window.resets_at,
        "status": window.status.value,
        "source": window.source,
        "checked_at": window.checked_at,
    }


async def _reply(
    send: Send, status: int, payload: Mapping[str, Any], headers: _Headers = ()
) -> None:
    await send_reply(send, status, [*_JSON, *headers], orjson.dumps(payload))


async def _error(send: Send, status: int, kind: str, message: str, headers: _Headers = ()) -> None:
    await _reply(send, status, {"error": {"type": kind, "message": message}}, headers)
