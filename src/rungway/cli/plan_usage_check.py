"""`rungway doctor`'s read of a coding plan's usage endpoint: Kimi Code's `/v1/usages` and
the MiniMax Token Plan's `token_plan/remains`.

Unlike doctor's other questions, this one carries the connection's key: a plan's usage
endpoint answers only its own key, and the gateway polls it with that key anyway. It goes
where the gateway's polls go, through the connection's proxy, and says what the plan has
left, when it resets, and whether use past it would be billed, or why it could not tell.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from typing import cast

import orjson
from pydantic import SecretStr

from rungway.adapters.base import Connection, HasUsageEndpoint
from rungway.adapters.registry import provider_entry
from rungway.cli.findings import Finding, Level
from rungway.cli.probes import base_url
from rungway.cli.times import countdown
from rungway.config import ConnectionConfig, TimeoutSettings
from rungway.egress import BadProxy, ProxyEnvironment
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable
from rungway.protocol import json_values
from rungway.quota.poller import PollTarget
from rungway.quota.usage import PolledReading
from rungway.transport.http11 import Http11Transport

PLAN_PROVIDERS = frozenset({"kimi-code", "kimi-code-openai", "minimax-token-plan"})
"""Plans whose usage endpoint doctor reads: flat-rate keys whose only account view it is."""


def plan_usage_findings(
    connections: Iterable[ConnectionConfig],
    secrets: Mapping[str, SecretStr],
    timeout: float,
    proxies: Mapping[str, str | None],
) -> dict[str, Finding]:
    """One finding per plan connection with a key, by connection id."""
    targets: dict[str, PollTarget] = {}
    for config in connections:
        secret = secrets.get(f"connection:{config.id}")
        if config.provider not in PLAN_PROVIDERS or secret is None:
            continue
        connection = Connection(
            config.id,
            config.provider,
            config.auth,
            secret,
            base_url(config),
            frozenset(config.models),
            usage_base_url=config.usage_base_url,
            proxy=proxies.get(config.id),
        )
        adapter = cast(HasUsageEndpoint, provider_entry(config.provider).adapter)
        target = adapter.usage_target(connection)
        if target is not None:
            targets[config.id] = target
    if not targets:
        return {}
    return asyncio.run(_read_all(targets, timeout))


async def _read_all(targets: Mapping[str, PollTarget], deadline_s: float) -> dict[str, Finding]:
    try:
        environment = ProxyEnvironment.read(os.environ)
    except BadProxy as error:
        return {cid: _finding(cid, Level.WARN, str(error)) for cid in targets}
    limits = TimeoutSettings(connect_s=deadline_s, first_byte_s=deadline_s, idle_s=deadline_s)
    client = Http11Transport(limits, environment)
    await client.start()
    try:
        found = await asyncio.gather(
            *(_read(client, cid, target, deadline_s) for cid, target in targets.items())
        )
    finally:
        await client.close()
    return dict(zip(targets, found, strict=True))


async def _read(
    client: Http11Transport, connection_id: str, target: PollTarget, deadline_s: float
) -> Finding:
    try:
        status, _, body = await client.get(
            target.url, dict(target.headers), deadline_s, None, target.proxy
        )
    except (TimeoutError, UpstreamTimeout):
        return _finding(
            connection_id, Level.WARN, f"{target.url}: no answer within {deadline_s:g}s"
        )
    except (UpstreamUnreachable, ValueError) as error:
        return _finding(connection_id, Level.WARN, f"{target.url}: {error}")
    if status in (401, 403):
        message = f"the plan's usage endpoint refused its key (HTTP {status}): {_said(body)}"
        fix = "check the key is the plan's own (Kimi Code console key; MiniMax sk-cp-...)"
        return _finding(connection_id, Level.FAIL, message, fix)
    if status != 200:
        return _finding(connection_id, Level.WARN, f"{target.url} answered HTTP {status}")
    reading = target.read(body, time.time())
    if not reading.windows:
        message = f"the usage endpoint named none of the plan's windows: {_said(body)}"
        fix = "a key without an active plan (MiniMax 1004) reads so; check the plan is active"
        return _finding(connection_id, Level.WARN, message, fix)
    return _finding(connection_id, Level.OK, _describe(reading))


def _describe(reading: PolledReading) -> str:
    now = time.time()
    parts = []
    for window in reading.windows:
        used = f"{window.name} {window.used_percent or 0:.0f}% used"
        if window.resets_at is not None:
            used += f", resets {countdown(window.resets_at, now)}"
        parts.append(used)
    past = {
        True: "use past them is billed (extra usage)",
        False: "it stops at its quota",
        None: "whether use past them is billed is not said",
    }[reading.overage_permitted]
    return f"plan usage read: {'; '.join(parts)}; {past}"


def _said(body: bytes) -> str:
    # The service's own words: Kimi's `error.message`, MiniMax's `base_resp.status_msg`.
    try:
        data = json_values.mapping(orjson.loads(body))
    except orjson.JSONDecodeError:
        return body[:200].decode("utf-8", "replace")
    error = json_values.mapping(data.get("error"))
    base = json_values.mapping(data.get("base_resp"))
    said = error.get("message") or base.get("status_msg")
    code = base.get("status_code")
    text = str(said) if said else body[:200].decode("utf-8", "replace")
    return f"{text} ({code})" if code not in (None, 0) else text


def _finding(connection_id: str, level: Level, message: str, fix: str = "") -> Finding:
    return Finding(level, f"connection {connection_id}", message, fix)
