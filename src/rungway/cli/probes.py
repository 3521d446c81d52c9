"""`rungway doctor`'s question to each upstream, and what the answers mean.

Each connection's API is asked once without credentials, all at once: an
OpenAI-compatible base URL (which includes the version path) for `GET {base_url}/models`,
an Anthropic one (which does not) for `GET {base_url}/v1/models`. The Codex backend lists
models only to a login that names its client version, so it gets an empty
`POST {base_url}/responses`, where the gateway's requests go; without a login it is
refused unread. 200, 401 or 403 means the API is there: whether the credential would be
accepted is not asked, and no credential is ever sent. A 404 means the base URL points
short of the API or past it. Redirects are not followed: the gateway's requests would not
arrive either. The answer's `Date` header also shows how far this machine's clock is off.

Each question goes the way the gateway's requests go: by the gateway's own client, through
the connection's `proxy:` or the environment's proxy variables (`rungway.egress`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

from rungway.adapters.antigravity.adapter import AntigravityAdapter
from rungway.adapters.base import hint_for_base_url
from rungway.adapters.codex.adapter import CodexAdapter
from rungway.adapters.gemini.code_assist import GeminiCodeAssistAdapter
from rungway.adapters.registry import provider_entry
from rungway.cli.findings import Finding, Level
from rungway.config import ConnectionConfig, TimeoutSettings
from rungway.egress import BadProxy, ProxyEnvironment
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable
from rungway.protocol.api import Api
from rungway.transport.http11 import Http11Transport

MAX_SKEW_S = 30.0
"""Beyond this, reset instants read from the upstream and the local clock disagree."""
# The Messages API refuses a request without this header, before it looks at the rest.
ANTHROPIC_VERSION = "2023-06-01"
THERE = frozenset({200, 401, 403})
"""Statuses that show the API itself answered a request without credentials."""


@dataclass(frozen=True, slots=True)
class Target:
    """What doctor asks about one connection: the URL, and the API it expects there."""

    url: str
    api: str
    anthropic: bool = False
    post: bool = False


@dataclass(frozen=True, slots=True)
class Probe:
    """What one connection's API answered: its status and `Date`, or why nothing."""

    connection_id: str
    url: str
    status: int | None = None
    date: str | None = None
    error: str = ""
    local_time: float = 0.0
    location: str | None = None
    proxy: str | None = None
    """The proxy the question went through (its password masked), or None when direct."""


def base_url(connection: ConnectionConfig) -> str:
    """Where the gateway sends this connection's requests."""
    url = connection.base_url or provider_entry(connection.provider).default_base_url or ""
    return url.rstrip("/")


def target(connection: ConnectionConfig) -> Target:
    """The URL that shows whether the connection's API is at its base URL."""
    base = base_url(connection)
    adapter = provider_entry(connection.provider).adapter
    if isinstance(adapter, CodexAdapter):
        return Target(f"{base}/responses", "Codex backend", post=True)
    if adapter.api is Api.ANTHROPIC_MESSAGES:
        return Target(f"{base}/v1/models", "Anthropic Messages API", anthropic=True)
    if isinstance(adapter, AntigravityAdapter):
        return Target(f"{base}:loadCodeAssist", "Antigravity (Cloud Code) API", post=True)
    if isinstance(adapter, GeminiCodeAssistAdapter):
        # Code Assist has no model list: the call every login makes first stands in.
        return Target(f"{base}:loadCodeAssist", "Gemini Code Assist API", post=True)
    if adapter.api is Api.GEMINI:
        return Target(f"{base}/models", "Gemini API")
    return Target(f"{base}/models", "OpenAI-compatible API")


def probe_all(
    connections: tuple[ConnectionConfig, ...],
    timeout: float,
    environ: Mapping[str, str] | None = None,
    proxies: Mapping[str, str | None] | None = None,
) -> dict[str, Probe]:
    """Ask every connection's API at once, each within `timeout` seconds, through its proxy:
    `proxies[id]` as read from its `proxy:` (the config's own text without `proxies`), else
    `environ`'s proxy variables (this process's by default)."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
    try:
        environment: ProxyEnvironment | BadProxy = ProxyEnvironment.read(
            os.environ if environ is None else environ
        )
    except BadProxy as error:
        environment = error
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("probing upstreams", total=len(connections))

        async def one(client: Http11Transport | None, connection: ConnectionConfig) -> Probe:
            asked = target(connection)
            if client is None:
                found = Probe(connection.id, asked.url, error=str(environment))
            else:
                proxy = _proxy(connection, proxies)
                found = await probe(client, connection.id, asked, timeout, proxy)
            progress.update(task, advance=1, description=f"probed {connection.id}")
            return found

        async def every() -> list[Probe]:
            if isinstance(environment, BadProxy):
                return [await one(None, c) for c in connections]
            limits = TimeoutSettings(connect_s=timeout, first_byte_s=timeout, idle_s=timeout)
            client = Http11Transport(limits, environment)
            await client.start()
            try:
                return list(await asyncio.gather(*(one(client, c) for c in connections)))
            finally:
                await client.close()

        probes = asyncio.run(every())
    return {found.connection_id: found for found in probes}


def _proxy(connection: ConnectionConfig, proxies: Mapping[str, str | None] | None) -> str | None:
    if proxies is not None:
        return proxies.get(connection.id)
    return connection.proxy if isinstance(connection.proxy, str) else None


async def probe(
    client: Http11Transport,
    connection_id: str,
    asked: Target,
    deadline_s: float,
    proxy: str | None = None,
) -> Probe:
    """One request without credentials and without following a redirect."""
    headers = {"anthropic-version": ANTHROPIC_VERSION} if asked.anthropic else {}
    body = b"{}" if asked.post else None
    if body is not None:
        headers["content-type"] = "application/json"
    try:
        via = client.proxy_for(asked.url, proxy)
        shown = None if via is None else str(via)
        status, answer, _ = await client.get(asked.url, headers, deadline_s, body, proxy)
    except (TimeoutError, UpstreamTimeout):
        error = f"no answer within {deadline_s:g}s"
        return Probe(connection_id, asked.url, error=error, proxy=shown)
    except UpstreamUnreachable as error:
        return Probe(connection_id, asked.url, error=str(error), proxy=shown)
    except ValueError as error:
        return Probe(connection_id, asked.url, error=f"not a URL the gateway can send to: {error}")
    return Probe(
        connection_id,
        asked.url,
        status,
        answer.get("date"),
        "",
        time.time(),
        answer.get("location"),
        shown,
    )


def api_finding(subject: str, connection: ConnectionConfig, probe: Probe) -> Finding:
    """Whether the connection's API answered where the gateway will send its requests."""
    asked = target(connection)
    via = "" if probe.proxy is None else f" through the proxy {probe.proxy}"
    seen = f"{probe.url} answers HTTP {probe.status}{via}"
    if probe.status is None:
        fix = "check `base_url`, that the upstream is running, and the network or proxy between"
        return Finding(Level.FAIL, subject, f"{probe.url} cannot be reached: {probe.error}", fix)
    if probe.status in THERE:
        message = f"{seen}: the {asked.api} is there (credentials not checked)"
        return Finding(Level.OK, subject, message)
    if probe.status == 404:
        hint = _version_hint(connection, asked)
        if hint is not None:
            return Finding(Level.FAIL, subject, f"{seen}: {hint}", _expected_base(connection))
        return Finding(Level.FAIL, subject, f"{seen}: no {asked.api} there", _fix(connection))
    if 300 <= probe.status < 400:
        message = f"{seen}, a redirect to {probe.location or 'an address it does not name'}"
        fix = "set `base_url` to the API's own address, which answers without redirecting"
        return Finding(Level.FAIL, subject, message, fix)
    if probe.status == 429:
        message = f"{seen}: the {asked.api} is there, but limits this machine's requests now"
        return Finding(Level.WARN, subject, message, "wait, or check the account's rate limits")
    if probe.status >= 500:
        message = f"{seen}: the upstream has trouble of its own"
        return Finding(Level.WARN, subject, message, "try again later; if it persists, ask it")
    message = f"{seen}, not 200, 401 or 403 as the {asked.api} would"
    return Finding(Level.WARN, subject, message, _fix(connection))


def _version_hint(connection: ConnectionConfig, asked: Target) -> str | None:
    """The correction a 404 calls for when the base URL's version path is the problem."""
    base = base_url(connection)
    if asked.anthropic:
        # Anthropic's base URL stops short of `/v1`, which each request path adds.
        if urlsplit(base).path.endswith("/v1"):
            return f"did you mean {base.removesuffix('/v1')}?"
        return None
    return hint_for_base_url(provider_entry(connection.provider).adapter, base, 404, b"")


def _expected_base(connection: ConnectionConfig) -> str:
    if target(connection).anthropic:
        return "an Anthropic `base_url` leaves out the version path (`https://api.anthropic.com`)"
    return "an OpenAI-compatible `base_url` includes the version path (`https://api.openai.com/v1`)"


def _fix(connection: ConnectionConfig) -> str:
    default = provider_entry(connection.provider).default_base_url
    if default is None:
        return "check `base_url`: " + _expected_base(connection)
    if connection.base_url is None:
        return f"check the network between here and {default}: something else answered"
    return f"check `base_url` ({connection.provider}'s own is {default}, or leave it out)"


def clock_skew(subject: str, probe: Probe) -> Finding | None:
    """How far this machine's clock is from the upstream's `Date`; WARN past 30 s."""
    if probe.date is None:
        return None
    try:
        upstream = parsedate_to_datetime(probe.date).timestamp()
    except (TypeError, ValueError):
        return Finding(Level.WARN, subject, f"unreadable Date header {probe.date!r}")
    # `Date` has whole seconds: up to one second of difference is only rounding.
    skew = probe.local_time - upstream
    if abs(skew) <= MAX_SKEW_S:
        return Finding(Level.OK, subject, f"clock within {max(abs(skew), 1):.0f}s of upstream")
    side = "ahead of" if skew > 0 else "behind"
    message = f"this clock is {abs(skew):.0f}s {side} the upstream's: quota resets will be off"
    return Finding(Level.WARN, subject, message, "synchronise the clock (NTP)")
