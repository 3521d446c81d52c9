"""The admin API under `/admin/`: the ladder's live state, spend, and the operator's actions.

It answers only an admin key (`admin.key` in the config), or, with no key configured, only
clients on this machine's loopback. Every answer is JSON; an error is
`{"error": {"type", "message"}}` with a 4xx status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from pydantic import SecretStr

from rungway.clock import Clock
from rungway.config import ClientKeyConfig, is_loopback
from rungway.engine.state import StateSource
from rungway.quota.board import QuotaBoard
from rungway.quota.poller import UsagePoller
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import ConnectionState, QuotaWindow, Roster, RosterConnection
from rungway.server.asgi import Receive, Scope, Send, request_headers, send_reply
from rungway.server.auth import ClientKeys
from rungway.server.spend import (
    BadSpendQuery,
    RungSpendOf,
    SpendBook,
    SpendSource,
    parse_spend_query,
)

PREFIX = "/admin/"
_JSON = [("content-type", "application/json"), ("cache-control", "no-store")]


class AdminApi:
    """Read the connections' state and the spend; clear a cooldown; read a quota now."""

    def __init__(
        self,
        *,
        roster: Roster,
        state: StateSource,
        board: QuotaBoard | None,
        poller: UsagePoller | None,
        clock: Clock,
        key: SecretStr | None,
        ledger: SpendSource,
        ladder: LadderSettings,
        client_keys: Iterable[ClientKeyConfig],
        rung_spend: RungSpendOf,
    ) -> None:
        self._roster = roster
        self._state = state
        self._board = board
        self._poller = poller
        self._clock = clock
        self._actions = {
            "clear-cooldown": self._clear_cooldown,
            "refresh-quota": self._refresh_quota,
        }
        self._key = ClientKeys({"admin": key} if key is not None else {})
        self._spend = SpendBook(
            ledger=ledger, ladder=ladder, client_keys=client_keys, rung_spend=rung_spend
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request whose path starts with `/admin/`."""
        refusal = self._refuse(scope)
        if refusal is not None:
            await _error(send, *refusal)
            return
        method, parts = scope["method"], scope["path"].removeprefix(PREFIX).strip("/").split("/")
        if parts == ["connections"]:
            if method != "GET":
                await _error(send, 405, "method_not_allowed", "use GET /admin/connections")
                return
            await _reply(send, 200, {"connections": self._connections()})
            return
        if parts == ["spend"]:
            await self._spend_report(send, method, scope.get("query_string", b""))
            return
        if len(parts) == 3 and parts[0] == "connections" and parts[2] in self._actions:
            if method != "POST":
                await _error(send, 405, "method_not_allowed", f"use POST for {parts[2]}")
                return
            if parts[1] not in self._roster.connections:
                known = ", ".join(self._roster.connections)
                await _error(send, 404, "not_found", f"no connection {parts[1]!r}; known: {known}")
                return
            await self._actions[parts[2]](send, parts[1])
            return
        await _error(send, 404, "not_found", f"no admin endpoint {method} {scope['path']}")

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
            _connection(connection, states.get(connection.id, ConnectionState()), now)
            for connection in self._roster.connections.values()
        ]

    async def _spend_report(self, send: Send, method: str, query_string: bytes) -> None:
        if method != "GET":
            await _error(send, 405, "method_not_allowed", "use GET /admin/spend")
            return
        try:
            by, period = parse_spend_query(query_string)
        except BadSpendQuery as error:
            await _error(send, 400, "invalid_request", str(error))
            return
        await _reply(send, 200, await self._spend.body(by, period, self._clock.now()))

    async def _clear_cooldown(self, send: Send, connection_id: str) -> None:
        if self._board is None:
            await _error(send, 409, "conflict", "this gateway keeps no live quota state")
            return
        cleared = self._board.clear_cooldown(connection_id)
        await _reply(send, 200, {"connection": connection_id, "cleared": cleared})

    async def _refresh_quota(self, send: Send, connection_id: str) -> None:
        if self._poller is None or not self._poller.polls(connection_id):
            message = f"connection {connection_id!r} has no usage endpoint to read"
            await _error(send, 409, "conflict", message)
            return
        await self._poller.poll(connection_id)
        now = self._clock.now()
        state = self._state.connection_states(now).get(connection_id, ConnectionState())
        connection = self._roster.connections[connection_id]
        await _reply(send, 200, _connection(connection, state, now))


def _connection(connection: RosterConnection, state: ConnectionState, now: float) -> dict[str, Any]:
    cooling = state.cooldown_until is not None and state.cooldown_until > now
    return {
        "id": connection.id,
        "provider": connection.provider,
        "auth": connection.auth,
        "billing": connection.billing.billing.value,
        "overage": connection.billing.with_overage_permitted(state.overage_permitted).overage,
        "models": [
            {"model": served.model, "rung": served.rung.label, "tier": served.tier.value}
            for served in connection.models
        ],
        "windows": [_window(window) for window in state.windows],
        "cooldown_until": state.cooldown_until if cooling else None,
        "cooldown_reason": state.cooldown_reason if cooling else "",
        "breaker": state.breaker.value,
    }


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


async def _reply(send: Send, status: int, payload: Mapping[str, Any]) -> None:
    await send_reply(send, status, list(_JSON), orjson.dumps(payload))


async def _error(send: Send, status: int, kind: str, message: str) -> None:
    await _reply(send, status, {"error": {"type": kind, "message": message}})
