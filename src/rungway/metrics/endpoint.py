"""`GET /metrics`: the registry in Prometheus' text format, behind the admin API's rule."""

from __future__ import annotations

import orjson
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest
from pydantic import SecretStr

from rungway.config import is_loopback
from rungway.server.asgi import Receive, Scope, Send, request_headers, send_reply
from rungway.server.auth import ClientKeys

# The classic text format: every metric name here is a legacy-valid one, and every
# Prometheus version reads it (the 1.0.0 label only matters for UTF-8 names).
_HEADERS = [("content-type", CONTENT_TYPE_PLAIN_0_0_4), ("cache-control", "no-store")]


class MetricsEndpoint:
    """Answers a scrape with the admin key, or, with no admin key configured, on loopback."""

    def __init__(self, registry: CollectorRegistry, admin_key: SecretStr | None) -> None:
        self._registry = registry
        self._key = ClientKeys({"admin": admin_key} if admin_key is not None else {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one `GET /metrics`."""
        refusal = self._refusal(scope)
        if refusal is not None:
            status, kind, message = refusal
            body = orjson.dumps({"error": {"type": kind, "message": message}})
            await send_reply(send, status, [("content-type", "application/json")], body)
            return
        await send_reply(send, 200, list(_HEADERS), generate_latest(self._registry))

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        if not self._key.required:
            host = (scope.get("client") or ("", 0))[0]
            if is_loopback(host):
                return None
            return 403, "forbidden", "/metrics answers only on loopback unless `admin.key` is set"
        if self._key.identify(request_headers(scope)) is not None:
            return None
        return 401, "unauthorized", "send the admin key as `Authorization: Bearer <key>`"
