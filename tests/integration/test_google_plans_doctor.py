"""Code Assist retired, Antigravity in its place: what `doctor` says of each, against their
simulated upstreams."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rungway.cli.findings import Level
from rungway.cli.google_plans import google_plan_findings
from rungway.cli.probes import api_finding, probe_all, target
from rungway.config import ConnectionConfig, CredentialRef
from rungway.protocol.auth import Auth
from rungway.sim import SimUpstream, builtin_scenario, load_scenario


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimUpstream, SimUpstream]]:
    with (
        SimUpstream(load_scenario(builtin_scenario("antigravity"))) as antigravity,
        SimUpstream(load_scenario(builtin_scenario("gemini-code-assist"))) as code_assist,
    ):
        yield antigravity, code_assist


def _connection(cid: str, provider: str, base_url: str, **extra: object) -> ConnectionConfig:
    return ConnectionConfig.model_validate(
        {
            "id": cid,
            "provider": provider,
            "auth": Auth.OAUTH,
            "credential": CredentialRef(env="UNUSED"),
            "base_url": base_url,
            "models": ("gemini-3-flash",),
            **extra,
        }
    )


def test_doctor_finds_antigravity_and_flags_code_assist_as_retired(
    sims: tuple[SimUpstream, SimUpstream],
) -> None:
    antigravity, code_assist = sims
    plan = _connection("ag", "antigravity", f"{antigravity.url}/v1internal")
    old = _connection("ca", "gemini-code-assist", f"{code_assist.url}/v1internal")
    assert target(plan).url == f"{antigravity.url}/v1internal:loadCodeAssist"
    probes = probe_all((plan, old), timeout=5)
    found = api_finding("ag", plan, probes["ag"])
    assert found.level is Level.OK, found
    assert "Antigravity" in found.message
    (retired,) = google_plan_findings("connection ca", old)
    assert retired.level is Level.WARN
    assert "2026-06-18" in retired.message
    assert "rungway connections import antigravity" in (retired.fix or "")


def test_doctor_says_a_plan_kept_to_its_terms_serves_nothing_and_what_credits_mean() -> None:
    kept = _connection("ag", "antigravity", "https://cloudcode-pa.googleapis.com/v1internal")
    (warning,) = google_plan_findings("connection ag", kept)
    assert warning.level is Level.WARN
    assert "Antigravity clients" in warning.message
    widened = _connection("ag", "antigravity", kept.base_url or "", clients="any", credits=True)
    (credits,) = google_plan_findings("connection ag", widened)
    assert credits.level is Level.OK
    assert "auto/subscription leaves it out" in credits.message
