"""The gateway's ASGI application: routes, client checks, and error answers.

Handlers are plain ASGI callables on a dict of paths; the hot path does one JSON parse of
the request and nothing the engine does not need.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

import orjson

from rungway.cluster.health import HealthOf
from rungway.engine.call import Call, Outcome, Refusal, Reply, StreamReply
from rungway.engine.dispatch import Engine
from rungway.engine.planning import Planner
from rungway.engine.waiting import LeftWhileWaiting
from rungway.logs.access import AccessSink, refusal_entry
from rungway.protocol import anthropic_messages, gemini, openai_chat, openai_responses
from rungway.protocol import request_checks as checks
from rungway.protocol.api import Api
from rungway.protocol.errors import ERROR_BODIES, refusal_headers
from rungway.server.admin import PREFIX as ADMIN_PREFIX
from rungway.server.admin import AdminApi
from rungway.server.asgi import (
    BodyTooLarge,
    ClientGone,
    Headers,
    Receive,
    Scope,
    Send,
    read_body,
    request_headers,
    send_reply,
    send_stream,
)
from rungway.server.auth import ClientKeys, without_key
from rungway.server.gemini_routes import PREFIXES as GEMINI_PREFIXES
from rungway.server.gemini_routes import GeminiRoutes, UrlFields, gemini_hint, is_gemini_client
from rungway.server.ids import RequestIds
from rungway.server.probes import Probes, StoppedWriter
from rungway.server.rate import RequestRate

log = logging.getLogger("rungway.server")

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
Lifecycle = Callable[[], Awaitable[None]]
# The root sends a browser on to the dashboard, which also serves the site's icon.
_DASHBOARD_PATHS = frozenset({"/", "/favicon.ico", "/dashboard"})

_KEY_HEADERS = frozenset({"x-api-key", "authorization", "x-goog-api-key"})
_DECODER_DEPTH = "depth limit exceeded"
"""The parser's own word for a body nested deeper than it reads (1,024 levels)."""
_CHECKS: dict[Api, Callable[[dict[str, Any]], str | None]] = {
    Api.OPENAI_CHAT: openai_chat.check_request,
    Api.OPENAI_RESPONSES: openai_responses.check_request,
    Api.ANTHROPIC_MESSAGES: anthropic_messages.check_request,
    Api.GEMINI: gemini.check_request,
}
_COUNT_CHECKS: dict[Api, Callable[[dict[str, Any]], str | None]] = {
    Api.ANTHROPIC_MESSAGES: lambda body: anthropic_messages.check_request(body, count_tokens=True),
    Api.GEMINI: gemini.check_count_request,
}
_KEY_HINTS = {Api.GEMINI: "`x-goog-api-key: <key>` or `?key=<key>`"}
_KEY_HINT = "`Authorization: Bearer <key>` or `x-api-key: <key>`"


class GatewayApp:
    """The ASGI callable that `rungway serve` runs."""

    def __init__(
        self,
        *,
        planner: Planner,
        engine: Engine,
        keys: ClientKeys,
        rate: RequestRate,
        admin: AdminApi,
        max_body_bytes: int,
        on_startup: Lifecycle,
        on_shutdown: Lifecycle,
        metrics: Handler | None = None,
        dashboard: Handler | None = None,
        access: AccessSink | None = None,
        health: HealthOf = tuple,
        stopped_writer: StoppedWriter = lambda: None,
    ) -> None:
        self._planner = planner
        probes = Probes(health, stopped_writer)
        self._engine = engine
        self._keys = keys
        self._rate = rate
        self._admin = admin
        self._dashboard = dashboard
        self._access = access
        self._max_body = max_body_bytes
        self._on_startup = on_startup
        self._on_shutdown = on_shutdown
        self._ids = RequestIds()
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "/v1/chat/completions"): partial(self.complete_for, Api.OPENAI_CHAT),
            ("POST", "/v1/responses"): partial(self.complete_for, Api.OPENAI_RESPONSES),
            ("POST", "/v1/messages"): partial(self.complete_for, Api.ANTHROPIC_MESSAGES),
            ("POST", "/v1/messages/count_tokens"): partial(self.count_for, Api.ANTHROPIC_MESSAGES),
            ("GET", "/v1/models"): self._models,
            ("GET", "/healthz"): probes.health,
            ("GET", "/readyz"): probes.ready,
        }
        if metrics is not None:
            self._routes[("GET", "/metrics")] = metrics
        self._paths = {path for _, path in self._routes}
        self._gemini = GeminiRoutes(self, keys, planner)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch one ASGI connection scope."""
        kind = scope["type"]
        if kind == "http":
            path = scope["path"].rstrip("/") or "/"
            handler = self._routes.get((scope["method"], path))
            if handler is not None:
                await handler(scope, receive, send)
            elif path.startswith(GEMINI_PREFIXES):
                if not await self._gemini(scope, receive, send, path):
                    await self._no_route(scope, send, path)
            elif path.startswith(ADMIN_PREFIX):
                await self._admin(scope, receive, send)
            elif self._dashboard is not None and (
                path in _DASHBOARD_PATHS or path.startswith("/dashboard/")
            ):
                await self._dashboard(scope, receive, send)
            else:
                await self._no_route(scope, send, path)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def complete_for(
        self, api: Api, scope: Scope, receive: Receive, send: Send, url: UrlFields | None = None
    ) -> None:
        """Answer a model request; `url` holds what Gemini's clients say in the path."""
        started = time.perf_counter()
        call = await self._accept(api, scope, receive, send, started, url=url)
        if call is None:
            return
        # Only well-formed model requests count against a key's rate; token counts do not.
        wait = await self._rate.admit(call.client_key)
        if wait is not None:
            message = (
                f"client key {call.client_key!r} is over its limit of "
                f"{self._rate.limit(call.client_key or '')} requests per minute; "
                f"retry in {max(1, round(wait))} s"
            )
            refusal = Refusal(429, message, "rate_limit_exceeded", retry_after_s=wait)
            # A refusal of a well-formed request is recorded, so `explain` finds it.
            self._engine.refused(call, refusal)
            await self._refuse(
                send, api, call.request_id, refusal, started=started, model=call.body.get("model")
            )
            return
        try:
            plan = await self._planner.plan(call, gone=lambda: _until_disconnect(receive))
        except LeftWhileWaiting:
            return  # held for a plan's reset, and the client hung up: nothing happened
        if isinstance(plan, Refusal):
            await self._refuse(
                send, api, call.request_id, plan, started=started, model=call.body.get("model")
            )
            return
        outcome = await self._engine.complete(call, plan)
        if isinstance(outcome, Refusal):
            await self._refuse(
                send, api, call.request_id, outcome, started=started, model=call.body.get("model")
            )
            return
        await _deliver(send, receive, api, call.request_id, outcome)

    async def count_for(
        self, api: Api, scope: Scope, receive: Receive, send: Send, url: UrlFields | None = None
    ) -> None:
        """A token count: from the first upstream of the client's API that can count."""
        started = time.perf_counter()
        call = await self._accept(api, scope, receive, send, started, count=True, url=url)
        if call is None:
            return
        plan = await self._planner.plan(call)
        if isinstance(plan, Refusal) and plan.status == 404:
            await _refuse(send, api, call.request_id, plan)
            return
        outcome = None
        if not isinstance(plan, Refusal):
            # The body is forwarded as it came: only an upstream of the same API reads it.
            routes = [route for route in plan.routes if route.adapter.api is api]
            outcome = await self._engine.count_tokens(call, replace(plan, routes=routes))
        if outcome is None:
            # No upstream could count: estimate at four bytes of JSON per token, which is
            # what clients use the figure for (deciding when to compact a conversation).
            estimate = max(1, len(call.raw_body) // 4)
            field = "totalTokens" if api is Api.GEMINI else "input_tokens"
            outcome = Reply(200, _base_headers(call.request_id), orjson.dumps({field: estimate}))
        await _deliver(send, receive, api, call.request_id, outcome)

    async def _accept(
        self,
        api: Api,
        scope: Scope,
        receive: Receive,
        send: Send,
        started: float,
        *,
        count: bool = False,
        url: UrlFields | None = None,
    ) -> Call | None:
        """Check the key, size and shape of a request; answer the client and return None if bad.

        `url` holds what Gemini's clients say in the path (the model, whether to stream): it
        joins the body, where every other API has it."""
        request_id = self._ids.new()
        headers = request_headers(scope)
        query = scope.get("query_string", b"").decode("latin-1")
        client_key = self._keys.identify(headers, query)
        if self._keys.required and client_key is None:
            missing = not (headers.keys() & _KEY_HEADERS) and "key=" not in query
            message = (
                f"no client key: send it as {_KEY_HINTS.get(api, _KEY_HINT)}"
                if missing
                else "the client key is not valid for this gateway; check the key you configured"
            )
            refusal = Refusal(401, message, "invalid_api_key")
            await self._refuse(send, api, request_id, refusal, started=started)
            return None
        try:
            raw = await read_body(receive, headers, self._max_body)
        except BodyTooLarge:
            message = f"the request body is over this gateway's limit of {self._max_body} bytes"
            refusal = Refusal(413, message, "request_too_large")
            await self._refuse(send, api, request_id, refusal, started=started)
            return None
        except ClientGone:
            return None
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            message = (
                checks.nesting_message()
                if error.msg == _DECODER_DEPTH
                else f"the request body is not valid JSON: {error}"
            )
            refusal = Refusal(400, message, "invalid_json")
            await self._refuse(send, api, request_id, refusal, started=started)
            return None
        if not isinstance(body, dict):
            message = "the request body must be a JSON object"
            refusal = Refusal(400, message, "invalid_request")
            await self._refuse(send, api, request_id, refusal, started=started)
            return None
        if url is not None:
            body.update(url)
        # Encoded again at once: the bytes forwarded are the body checked here.
        encoded = checks.encode_within_depth(body)
        problem = (
            checks.nesting_message()
            if encoded is None
            else _COUNT_CHECKS[api](body)
            if count
            else _CHECKS[api](body)
        )
        if problem is not None or encoded is None:
            refusal = Refusal(400, problem or checks.nesting_message(), "invalid_request")
            await self._refuse(
                send, api, request_id, refusal, started=started, model=_logged(body.get("model"))
            )
            return None
        return Call(
            request_id=request_id,
            api=api,
            body=body,
            raw_body=encoded,
            stream=body.get("stream") is True and not count,
            headers=headers,
            query=without_key(query),
            client_key=client_key,
            started_at=time.time(),
            started=started,
        )

    async def refuse_for(self, api: Api, scope: Scope, send: Send, refusal: Refusal) -> None:
        """Answer with `refusal` in `api`'s shape, and log it."""
        await self._refuse(send, api, self._ids.new(), refusal, started=time.perf_counter())

    async def _models(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        if is_gemini_client(headers, scope.get("query_string", b"")):
            await self._gemini(scope, receive, send, "/v1/models")
            return
        api = Api.ANTHROPIC_MESSAGES if "anthropic-version" in headers else Api.OPENAI_CHAT
        request_id = self._ids.new()
        if self._keys.required and self._keys.identify(headers) is None:
            message = "send a valid client key as `Authorization: Bearer <key>` or `x-api-key`"
            await _refuse(send, api, request_id, Refusal(401, message, "invalid_api_key"))
            return
        models = self._planner.table.models()
        if api is Api.ANTHROPIC_MESSAGES:
            body = anthropic_messages.model_list((model, model) for model, _ in models)
        else:
            body = openai_chat.model_list(models)
        await send_reply(send, 200, _base_headers(request_id), body)

    async def _no_route(self, scope: Scope, send: Send, path: str) -> None:
        headers = request_headers(scope)
        api = Api.ANTHROPIC_MESSAGES if "anthropic-version" in headers else Api.OPENAI_CHAT
        if path in self._paths:
            allowed = sorted(method for method, known in self._routes if known == path)
            refusal = Refusal(405, f"{scope['method']} is not allowed on {path}; use {allowed[0]}")
        else:
            message = f"no such endpoint: {scope['method']} {path}"
            if "/v1" + path in self._paths:  # a base URL without its version path
                message += f"; did you mean /v1{path}? (a base URL for this gateway ends in /v1)"
            elif (hint := gemini_hint(path)) is not None:
                api, message = Api.GEMINI, message + hint
            refusal = Refusal(404, message, "not_found")
        await self._refuse(send, api, self._ids.new(), refusal, started=time.perf_counter())

    async def _refuse(
        self,
        send: Send,
        api: Api,
        request_id: str,
        refusal: Refusal,
        *,
        started: float,
        model: object = None,
    ) -> None:
        """Answer a request the gateway turns away itself, and log its access line."""
        await _refuse(send, api, request_id, refusal)
        if self._access is not None:
            self._access(
                refusal_entry(
                    request_id,
                    api=api.value,
                    model=model if isinstance(model, str) else None,
                    refusal=refusal,
                    latency_ms=(time.perf_counter() - started) * 1000,
                )
            )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self._on_startup()
                except Exception as error:  # the server must hear why it cannot start
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _logged(model: object) -> str | None:
    """A refused request's model name as its access line shows it: short enough to read."""
    if not isinstance(model, str):
        return None
    limit = checks.MAX_MODEL_CHARS
    return model if len(model) <= limit else f"{model[:limit]}... ({len(model)} characters)"


def _base_headers(request_id: str) -> Headers:
    return [("content-type", "application/json"), ("x-rungway-request-id", request_id)]


async def _deliver(
    send: Send, receive: Receive, api: Api, request_id: str, outcome: Outcome
) -> None:
    if isinstance(outcome, Reply):
        await send_reply(send, outcome.status, outcome.headers, outcome.body)
    elif isinstance(outcome, StreamReply):
        await send_stream(send, receive, outcome.status, outcome.headers, outcome.body)
    else:
        await _refuse(send, api, request_id, outcome)


async def _until_disconnect(receive: Receive) -> None:
    """Return once the client hangs up (its body has been read: nothing else comes)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _refuse(send: Send, api: Api, request_id: str, refusal: Refusal) -> None:
    body = ERROR_BODIES[api](
        refusal.status, refusal.message, refusal.code, retry_after_s=refusal.retry_after_s
    )
    headers = _base_headers(request_id) + list(refusal.headers)
    # Never a retry before the stated moment, and no silent sleep past a minute.
    headers += refusal_headers(refusal.retry_after_s)
    await send_reply(send, refusal.status, headers, body)
