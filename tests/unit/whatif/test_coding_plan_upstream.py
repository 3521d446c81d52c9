"""A replayed Kimi Code or MiniMax Token Plan answers as the service does, and the gateway's
adapter reads the refusal back as a spent plan."""

from __future__ import annotations

from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.kimi_code.adapter import KimiCodeAdapter
from rungway.adapters.minimax.adapter import MiniMaxAdapter
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from rungway.whatif.allowance import Allowance
from rungway.whatif.plans import KNOWN_PLANS, PlanQuota, PlanWindow
from rungway.whatif.trace import TraceRequest
from rungway.whatif.upstream import SimulatedUpstream

T0 = 1_790_000_000.0


def _spend(quota: PlanQuota, upstream: SimulatedUpstream, model: str, requests: int) -> Allowance:
    allowance = Allowance(quota, upstream.header_names)
    for at in range(requests):
        request = TraceRequest(T0 + at, "auto/thrifty", "anthropic_messages", 90, 10)
        allowance.charge(model, request, 0.0, T0 + at)
    return allowance


def test_a_spent_kimi_window_is_a_403_read_back_as_quota() -> None:
    quota = PlanQuota("kimi", (PlanWindow("7d", 7 * 86400.0, 20, "requests", "first_use"),))
    upstream = SimulatedUpstream("kimi-code", quota)
    allowance = _spend(quota, upstream, "kimi-for-coding", 20)
    refusal = upstream.refusal(
        "kimi-for-coding", allowance.admission("kimi-for-coding", T0 + 30, admitted=False)
    )
    assert refusal.status == 403
    assert b"weekly (7-day) usage limit" in refusal.body
    failure = KimiCodeAdapter().classify_failure(403, refusal.headers, refusal.body)
    assert failure.kind is FailureClass.QUOTA_EXHAUSTED


def test_a_spent_minimax_window_is_a_2056_read_back_with_its_reset() -> None:
    quota = PlanQuota("minimax", KNOWN_PLANS["minimax-starter"])
    upstream = SimulatedUpstream("minimax-token-plan", quota)
    allowance = _spend(quota, upstream, "MiniMax-M3", 1500)
    admission = allowance.admission("MiniMax-M3", T0 + 2000, admitted=False)
    refusal = upstream.refusal("MiniMax-M3", admission)
    assert refusal.status == 429
    assert b"(2056)" in refusal.body
    adapter = MiniMaxAdapter()
    assert adapter.classify_failure(429, refusal.headers, refusal.body).kind is (
        FailureClass.QUOTA_EXHAUSTED
    )
    connection = Connection(
        "minimax", "minimax-token-plan", Auth.APIKEY, SecretStr("k"), "https://x", frozenset()
    )
    (window,) = adapter.error_windows(
        connection, status=429, headers={}, body=refusal.body, model="MiniMax-M3", now=T0 + 2000
    )
    # The first request opened the 5-hour window; the message names its end to the second.
    assert window.name == "5h"
    assert window.resets_at is not None
    assert abs(window.resets_at - (T0 + 5 * 3600)) <= 1
