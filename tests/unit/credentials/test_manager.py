"""TokenManager: renewal ahead of expiry and after a 401, single-flight, rotation, throttling
and a revoked login."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import orjson
from pydantic import SecretStr

from rungway.clock import FakeClock
from rungway.credentials.grants import TokenRequest
from rungway.credentials.manager import TokenManager
from rungway.credentials.store import StoredCredential

START = 1_790_000_000.0
OLD = "sk-ant-oat01-old-access"
CLAUDE = StoredCredential(
    kind="claude", access_token=OLD, refresh_token="rt-first", expires_at=START + 3600
)
Answer = tuple[int, Mapping[str, str], bytes]


class TokenEndpoint:
    """A scripted token endpoint: answers in order, then issues numbered tokens."""

    def __init__(self, *answers: Answer, delay_s: float = 0.0, rotate: bool = False) -> None:
        self.answers = list(answers)
        self.delay_s = delay_s
        self.rotate = rotate
        self.requests: list[TokenRequest] = []

    async def __call__(self, request: TokenRequest) -> Answer:
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.answers:
            return self.answers.pop(0)
        number = len(self.requests)
        reply: dict[str, object] = {"access_token": f"access-{number}", "expires_in": 3600}
        if self.rotate:
            reply["refresh_token"] = f"rt-{number}"
        return 200, {}, orjson.dumps(reply)

    def refresh_tokens_sent(self) -> list[str]:
        return [orjson.loads(r.body or b"{}")["refresh_token"] for r in self.requests]


def _manager(
    endpoint: TokenEndpoint,
    clock: FakeClock,
    credential: StoredCredential = CLAUDE,
    saved: list[StoredCredential] | None = None,
) -> TokenManager:
    return TokenManager(
        "claude-max",
        credential,
        token_url="http://tokens.invalid/v1/oauth/token",
        clock=clock,
        save=lambda _name, renewed: (saved if saved is not None else []).append(renewed),
        send=endpoint,
    )


def _value(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def test_the_token_is_renewed_only_once_within_the_margin_before_expiry() -> None:
    clock = FakeClock(START)
    endpoint = TokenEndpoint()
    manager = _manager(endpoint, clock)

    async def run() -> list[str | None]:
        seen = [_value(await manager.token())]
        clock.advance(3600 - 301)
        seen.append(_value(await manager.token()))
        clock.advance(2)
        seen.append(_value(await manager.token()))
        seen.append(_value(await manager.token()))
        return seen

    assert asyncio.run(run()) == [OLD, OLD, "access-1", "access-1"]
    assert len(endpoint.requests) == 1
    body = orjson.loads(endpoint.requests[0].body or b"{}")
    assert body["grant_type"] == "refresh_token"
    assert body["refresh_token"] == "rt-first"
    assert manager.expires_at == START + 3301 + 3600


def test_current_never_waits_and_renews_in_the_background_when_due() -> None:
    clock = FakeClock(START + 3500)
    endpoint = TokenEndpoint(delay_s=0.01)
    manager = _manager(endpoint, clock)

    async def run() -> tuple[str | None, str | None]:
        first = _value(manager.current())
        await asyncio.sleep(0.05)
        return first, _value(manager.current())

    assert asyncio.run(run()) == (OLD, "access-1")
    assert len(endpoint.requests) == 1


def test_twenty_requests_refused_at_once_share_one_refresh() -> None:
    clock = FakeClock(START)
    endpoint = TokenEndpoint(delay_s=0.02)
    manager = _manager(endpoint, clock)

    async def run() -> list[str | None]:
        return await asyncio.gather(
            *(manager.refresh_after_unauthorized(SecretStr(OLD)) for _ in range(20))
        )

    assert asyncio.run(run()) == [None] * 20
    assert len(endpoint.requests) == 1
    assert _value(manager.current()) == "access-1"


def test_a_401_for_a_token_already_replaced_retries_without_refreshing() -> None:
    clock = FakeClock(START)
    endpoint = TokenEndpoint()
    manager = _manager(endpoint, clock)

    async def run() -> tuple[str | None, str | None]:
        first = await manager.refresh_after_unauthorized(SecretStr(OLD))
        second = await manager.refresh_after_unauthorized(SecretStr(OLD))
        return first, second

    assert asyncio.run(run()) == (None, None)
    assert len(endpoint.requests) == 1


def test_a_rotated_refresh_token_is_saved_and_used_next_time() -> None:
    clock = FakeClock(START)
    endpoint = TokenEndpoint(rotate=True)
    saved: list[StoredCredential] = []
    codex = StoredCredential(kind="codex", access_token="old", refresh_token="rt-first")
    manager = _manager(endpoint, clock, codex, saved)

    async def run() -> None:
        assert await manager.refresh_after_unauthorized(SecretStr("old")) is None
        assert await manager.refresh_after_unauthorized(SecretStr("access-1")) is None

    asyncio.run(run())
    assert endpoint.refresh_tokens_sent() == ["rt-first", "rt-1"]
    assert [(c.access_token, c.refresh_token) for c in saved] == [
        ("access-1", "rt-1"),
        ("access-2", "rt-2"),
    ]
    assert manager.credential.refresh_token == "rt-2"


def test_a_reply_without_a_refresh_token_keeps_the_old_one() -> None:
    clock = FakeClock(START)
    endpoint = TokenEndpoint()
    manager = _manager(endpoint, clock)
    asyncio.run(manager.refresh())
    asyncio.run(manager.refresh())
    assert endpoint.refresh_tokens_sent() == ["rt-first", "rt-first"]
    assert manager.credential.refresh_token == "rt-first"


def test_a_throttled_refresh_waits_for_retry_after_and_keeps_the_old_token() -> None:
    clock = FakeClock(START)
    throttled: Answer = (429, {"retry-after": "120"}, b'{"error":{"type":"rate_limit_error"}}')
    endpoint = TokenEndpoint(throttled)
    manager = _manager(endpoint, clock)

    problem = asyncio.run(manager.refresh_after_unauthorized(SecretStr(OLD)))
    assert problem is not None
    assert "wait 120s" in problem
    assert _value(manager.current()) == OLD
    clock.advance(60)
    assert asyncio.run(manager.refresh()) is False
    assert len(endpoint.requests) == 1  # nothing sent while paused
    clock.advance(61)
    assert asyncio.run(manager.refresh_after_unauthorized(SecretStr(OLD))) is None
    assert _value(manager.current()) == "access-2"
    assert manager.broken is None


def test_invalid_grant_marks_the_login_broken_with_how_to_fix_it() -> None:
    clock = FakeClock(START)
    refused: Answer = (400, {}, b'{"error":"invalid_grant","error_description":"revoked"}')
    endpoint = TokenEndpoint(refused)
    manager = _manager(endpoint, clock)

    problem = asyncio.run(manager.refresh_after_unauthorized(SecretStr(OLD)))
    assert problem == manager.broken
    assert problem is not None
    assert "(invalid_grant)" in problem
    assert "re-import the login: rungway connections import claude --name claude-max" in problem
    assert asyncio.run(manager.refresh()) is False
    assert len(endpoint.requests) == 1  # a broken login is not retried
    assert "rt-first" not in problem
    assert OLD not in problem


def test_a_reused_codex_refresh_token_breaks_the_login() -> None:
    clock = FakeClock(START)
    reused: Answer = (401, {}, b'{"error":{"code":"refresh_token_reused","message":"used"}}')
    codex = StoredCredential(kind="codex", access_token="old", refresh_token="rt-first")
    manager = _manager(TokenEndpoint(reused), clock, codex)
    asyncio.run(manager.refresh())
    assert manager.broken is not None
    assert "refresh_token_reused" in manager.broken
    assert "rungway connections import codex --name claude-max" in manager.broken


def test_a_server_error_pauses_briefly_without_breaking_the_login() -> None:
    clock = FakeClock(START)
    endpoint = TokenEndpoint((503, {}, b"unavailable"))
    manager = _manager(endpoint, clock)
    assert asyncio.run(manager.refresh()) is False
    assert manager.broken is None
    clock.advance(31)
    assert asyncio.run(manager.refresh()) is True


def test_a_copilot_token_is_exchanged_before_first_use_and_the_github_token_kept() -> None:
    clock = FakeClock(START)
    exchanged: Answer = (
        200,
        {},
        orjson.dumps({"token": "tid=1;exp=2:abc", "expires_at": START + 1800, "refresh_in": 1500}),
    )
    endpoint = TokenEndpoint(exchanged)
    saved: list[StoredCredential] = []
    github = StoredCredential(kind="copilot", access_token="gho_0123456789abcdef")
    manager = _manager(endpoint, clock, github, saved)
    assert manager.current() is None
    assert _value(asyncio.run(manager.token())) == "tid=1;exp=2:abc"
    request = endpoint.requests[0]
    assert (request.method, request.headers["authorization"]) == (
        "GET",
        "token gho_0123456789abcdef",
    )
    assert manager.expires_at == START + 1500 + 60
    assert saved == []  # the GitHub token is unchanged; the Copilot token stays in memory
