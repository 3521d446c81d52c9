"""A replayed GLM Coding Plan answers as Z.ai does, and the gateway's adapter reads it back."""

from __future__ import annotations

from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.glm.adapter import GlmCodingAdapter
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from rungway.whatif.allowance import Allowance
from rungway.whatif.plans import KNOWN_PLANS, PlanQuota
from rungway.whatif.trace import TraceRequest
from rungway.whatif.upstream import SimulatedUpstream

T0 = 1_790_000_000.0


def test_a_spent_glm_window_is_refused_with_1308_and_read_back_with_its_reset() -> None:
    quota = PlanQuota("glm", KNOWN_PLANS["glm-lite"])
    upstream = SimulatedUpstream("glm-coding", quota)
    allowance = Allowance(quota, upstream.header_names)
    for at in range(120):
        allowance.charge(
            "glm-5.2", TraceRequest(T0 + at, "auto/thrifty", "openai_chat", 90, 10), 0.0, T0 + at
        )
    admission = allowance.admission("glm-5.2", T0 + 200, admitted=False)
    refusal = upstream.refusal("glm-5.2", admission)
    assert refusal.status == 429
    assert b'"1308"' in refusal.body
    assert upstream.success(allowance.admission("glm-5.2", T0, admitted=True)).headers == {}

    adapter = GlmCodingAdapter()
    assert adapter.classify_failure(429, refusal.headers, refusal.body).kind is (
        FailureClass.QUOTA_EXHAUSTED
    )
    connection = Connection(
        "glm", "glm-coding", Auth.APIKEY, SecretStr("k"), "https://api.z.ai", frozenset()
    )
    (window,) = adapter.error_windows(
        connection, status=429, headers={}, body=refusal.body, model="glm-5.2", now=T0 + 200
    )
    # The first request opened the 5-hour window; the message names its end to the second.
    assert window.name == "5h"
    assert window.resets_at is not None
    assert abs(window.resets_at - (T0 + 5 * 3600)) <= 1
