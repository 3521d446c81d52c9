"""`rungway doctor` asks each Gemini upstream, without credentials, whether its API is where
the base URL points: the Gemini API's model list, and Code Assist's `loadCodeAssist`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rungway.cli.findings import Level
from rungway.cli.probes import api_finding, probe_all, target
from rungway.config import ConnectionConfig, CredentialRef
from rungway.protocol.auth import Auth
from rungway.sim import SimUpstream, builtin_scenario, load_scenario


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimUpstream, SimUpstream]]:
    with (
        SimUpstream(load_scenario(builtin_scenario("gemini-api"))) as api,
        SimUpstream(load_scenario(builtin_scenario("gemini-code-assist"))) as plan,
    ):
        yield api, plan


def _connections(api: str, plan: str) -> tuple[ConnectionConfig, ...]:
    credential = CredentialRef(env="UNUSED")
    return (
        ConnectionConfig(
            id="free",
            provider="gemini",
            auth=Auth.APIKEY,
            credential=credential,
            base_url=api,
            models=("gemini-2.5-flash",),
        ),
        ConnectionConfig(
            id="plan",
            provider="gemini-code-assist",
            auth=Auth.OAUTH,
            credential=credential,
            base_url=plan,
            models=("gemini-2.5-flash",),
        ),
    )


def test_both_apis_are_found_where_their_base_urls_point(
    sims: tuple[SimUpstream, SimUpstream],
) -> None:
    api, plan = sims
    connections = _connections(f"{api.url}/v1beta", f"{plan.url}/v1internal")
    assert target(connections[0]).url == f"{api.url}/v1beta/models"
    assert target(connections[1]).url == f"{plan.url}/v1internal:loadCodeAssist"
    probes = probe_all(connections, timeout=5)
    for connection in connections:
        finding = api_finding(connection.id, connection, probes[connection.id])
        assert finding.level is Level.OK, finding


def test_a_base_url_without_its_version_path_fails(
    sims: tuple[SimUpstream, SimUpstream],
) -> None:
    api, plan = sims
    connections = _connections(api.url, plan.url)
    probes = probe_all(connections, timeout=5)
    for connection in connections:
        finding = api_finding(connection.id, connection, probes[connection.id])
        assert finding.level is Level.FAIL, finding
