"""The Google Cloud project a Gemini Code Assist login works in, found as the Gemini CLI
finds it (docs/provider-signals.md A6.1); an Antigravity login asks the same methods in its
own words (`antigravity_project.py`, A6.3).

`POST {base}:loadCodeAssist` names the login's tier and, once the account is set up, its
`cloudaicompanionProject`. An account that has none yet is onboarded: `POST
{base}:onboardUser` with the default allowed tier is a long-running operation, asked again
until it is `done`, whose `response.cloudaicompanionProject.id` is the project. The project
is found once per connection and kept; every generation request and the quota poll name it.
Discovery is single-flight: requests that arrive while it runs await the same answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import orjson
from pydantic import SecretStr

from rungway.credentials.grants import TokenRequest, send_token_request

log = logging.getLogger("rungway.credentials")

Send = Callable[[TokenRequest], Awaitable[tuple[int, Mapping[str, str], bytes]]]
"""Send one request: (status, headers, body), or raise OSError."""
Token = Callable[[], Awaitable[SecretStr | None]]
"""The login's access token to send now, renewed first when it is due."""
Renew = Callable[[SecretStr | None], Awaitable[str | None]]
"""Renew the login after its token was refused: None when a retry may go out, else why not
(`TokenManager.refresh_after_unauthorized`)."""

METADATA: Final = {
    "ideType": "IDE_UNSPECIFIED",
    "platform": "PLATFORM_UNSPECIFIED",
    "pluginType": "GEMINI",
}
"""What the Gemini CLI says of itself in both calls."""
FREE_TIER: Final = "free-tier"
LEGACY_TIER: Final = "legacy-tier"
"""The tier to onboard to when `loadCodeAssist` names no default (the Gemini CLI's choice)."""
ONBOARD_TRIES: Final = 4
ONBOARD_WAIT_S: Final = 2.0


class CodeAssistProject:
    """One Code Assist connection's project id, discovered on first need and then kept."""

    named_project_needed = True
    """A tier without a project of its own needs one named in the config (Code Assist's
    Standard and Enterprise tiers); Antigravity onboards instead."""
    headers: Mapping[str, str] = {}
    """Headers of both calls, past the content type and the bearer."""

    def __init__(
        self,
        base_url: str,
        token: Token,
        *,
        renew: Renew | None = None,
        configured: str | None = None,
        send: Send = send_token_request,
        wait_s: float = ONBOARD_WAIT_S,
    ) -> None:
        self._base = base_url
        self._configured = configured
        self._token = token
        self._renew = renew
        self._send = send
        self._wait = wait_s
        self._project: str | None = None
        self._problem: str | None = None
        self._inflight: asyncio.Task[str | None] | None = None

    def current(self) -> str | None:
        """The project id, or None while it is not known; never waits."""
        return self._project

    @property
    def problem(self) -> str | None:
        """Why the last discovery found no project (None when it did, or never ran)."""
        return self._problem

    async def discover(self) -> str | None:
        """The project id, asked for first when not yet known; None when it cannot be
        found now (`problem` says why). Single-flight."""
        if self._project is not None:
            return self._project
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.get_running_loop().create_task(self._discover())
        return await asyncio.shield(self._inflight)

    async def _discover(self) -> str | None:
        try:
            project = await self._find()
        except _NotFound as error:
            self._problem = str(error)
            log.warning("Code Assist project discovery at %s failed: %s", self._base, error)
            return None
        self._project, self._problem = project, None
        log.info("the Code Assist login at %s works in project %s", self._base, project)
        return project

    async def _find(self) -> str:
        configured = self._configured
        loaded = await self._call("loadCodeAssist", self.load_request())
        self.loaded(loaded)
        project = _project_id(loaded.get("cloudaicompanionProject"))
        if project is not None:
            return project
        if loaded.get("currentTier") and self.named_project_needed:
            if configured is not None:
                return configured
            raise _NotFound(
                "the account's Code Assist tier needs a Google Cloud project named: set the "
                "connection's `project` (the Gemini CLI's GOOGLE_CLOUD_PROJECT)"
            )
        request = self.onboard_request(self.onboard_tier(loaded))
        for attempt in range(ONBOARD_TRIES):
            operation = await self._call("onboardUser", request)
            if operation.get("done"):
                response = operation.get("response")
                found = _project_id(
                    response.get("cloudaicompanionProject") if isinstance(response, dict) else None
                )
                found = found or configured
                if found is None:
                    raise _NotFound("onboardUser finished without naming a project")
                return found
            if attempt + 1 < ONBOARD_TRIES:
                await asyncio.sleep(self._wait)
        raise _NotFound(f"onboardUser was still running after {ONBOARD_TRIES} tries")

    # What follows, an Antigravity login does its own way (credentials/antigravity_project.py).
    def load_request(self) -> dict[str, Any]:
        """The `loadCodeAssist` body: as the Gemini CLI asks, a project the user named goes
        with it."""
        configured = self._configured
        if configured is None:
            return {"metadata": METADATA}
        return {
            "cloudaicompanionProject": configured,
            "metadata": {**METADATA, "duetProject": configured},
        }

    def loaded(self, loaded: Mapping[str, Any]) -> None:
        """Take what else `loadCodeAssist` says of the login (nothing, for Code Assist)."""

    def onboard_tier(self, loaded: Mapping[str, Any]) -> str:
        """The tier to onboard to: the default of `allowedTiers`, else the legacy tier."""
        return default_tier(loaded) or LEGACY_TIER

    def onboard_request(self, tier: str) -> dict[str, Any]:
        """The `onboardUser` body; the free tier's onboarding names no project (Google
        picks that project itself)."""
        request = self.load_request()
        request.pop("cloudaicompanionProject", None)
        body: dict[str, Any] = {"tierId": tier, "metadata": request["metadata"]}
        if tier != FREE_TIER and self._configured is not None:
            body["cloudaicompanionProject"] = self._configured
        return body

    async def _call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        token = await self._token()
        status, body = await self._post(method, payload, token)
        if status == 401 and self._renew is not None:
            # The token expired early or was revoked: renew the login and ask once more.
            problem = await self._renew(token)
            if problem is not None:
                raise _NotFound(f"{method} refused the login's token: {problem}")
            status, body = await self._post(method, payload, await self._token())
        if status >= 300:
            raise _NotFound(f"{method} answered HTTP {status}")
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _NotFound(f"{method} answered with a body that is not JSON") from None
        if not isinstance(parsed, dict):
            raise _NotFound(f"{method} answered with JSON that is not an object")
        return parsed

    async def _post(
        self, method: str, payload: dict[str, Any], token: SecretStr | None
    ) -> tuple[int, bytes]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(self.headers)
        if token is not None:
            headers["authorization"] = f"Bearer {token.get_secret_value()}"
        request = TokenRequest("POST", f"{self._base}:{method}", headers, orjson.dumps(payload))
        try:
            status, _, body = await self._send(request)
        except OSError as error:
            raise _NotFound(f"{method}: {error}") from None
        return status, body


class _NotFound(Exception):
    """No project now; the message says why."""


def _project_id(value: object) -> str | None:
    # loadCodeAssist names the project as a string; onboardUser as `{id, name}`.
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and value else None


def default_tier(loaded: Mapping[str, Any]) -> str | None:
    """The id of the tier `allowedTiers` marks as default, if any."""
    tiers = loaded.get("allowedTiers")
    for tier in tiers if isinstance(tiers, list) else ():
        if isinstance(tier, dict) and tier.get("isDefault") and isinstance(tier.get("id"), str):
            return str(tier["id"])
    return None


def static_token(secret: SecretStr | None) -> Token:
    """A `Token` for a credential that never changes (read once at start)."""

    async def token() -> SecretStr | None:
        return secret

    return token


async def discover_projects(projects: list[CodeAssistProject], deadline_s: float) -> None:
    """Find every project at start-up, within `deadline_s`; one not found by then is asked
    for again before the connection's first request."""
    if not projects:
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(deadline_s):
            await asyncio.gather(*(project.discover() for project in projects))
