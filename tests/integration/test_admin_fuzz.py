"""The admin API against its own OpenAPI schema: real answers match it, and fuzzing from it
finds no 5xx and no bad request let through.

A real gateway in front of the simulated upstreams, guarded by an admin key, with a few
requests in its ledger.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import jsonschema_rs
import pytest

from rungway.server.openapi import SCHEMA

from .conftest import RunningGateway, StartGateway, Upstreams

ADMIN_KEY = "rw-admin-fuzz"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.fixture
def gateway(
    start_gateway: StartGateway, sims: Upstreams, monkeypatch: pytest.MonkeyPatch
) -> RunningGateway:
    monkeypatch.setenv("RUNGWAY_FUZZ_ADMIN", ADMIN_KEY)
    running = start_gateway(admin={"key": {"env": "RUNGWAY_FUZZ_ADMIN"}})
    with anthropic.Anthropic(base_url=running.url, api_key="unused", max_retries=0) as client:
        for model in ("auto/thrifty", "fast"):
            client.messages.create(model=model, max_tokens=32, messages=HELLO)
    return running


def _matches(path: str, method: str, response: httpx.Response) -> None:
    """Validate `response` against the schema's declared answer for its status."""
    declared = SCHEMA["paths"][path][method]["responses"][str(response.status_code)]
    body_schema = declared["content"]["application/json"]["schema"]
    validator = jsonschema_rs.Draft202012Validator(
        {**body_schema, "components": SCHEMA["components"]}
    )
    errors = [
        f"{error.instance_path}: {error.message}"
        for error in validator.iter_errors(response.json())
    ]
    assert errors == [], (path, response.status_code, errors)


def test_real_answers_of_every_admin_endpoint_match_the_schema(gateway: RunningGateway) -> None:
    served = httpx.get(f"{gateway.url}/admin/openapi.json", headers=AUTH)
    assert served.status_code == 200
    assert served.json() == SCHEMA
    checked: set[tuple[str, str]] = set()

    def call(method: str, path: str, template: str | None = None, **params: str) -> httpx.Response:
        response = httpx.request(method, f"{gateway.url}{path}", headers=AUTH, params=params)
        _matches(template or path, method.lower(), response)
        checked.add((template or path, method.lower()))
        return response

    assert call("GET", "/admin/connections").status_code == 200
    assert call("GET", "/admin/spend", by="model", period="day").status_code == 200
    assert call("GET", "/admin/pools").status_code == 200
    assert call("GET", "/admin/spend", by="nothing").status_code == 400
    listed = call("GET", "/admin/requests", limit="5")
    assert len(listed.json()["requests"]) == 2
    assert call("GET", "/admin/requests", limit="0").status_code == 400
    detail = "/admin/requests/{request_id}"
    for row in listed.json()["requests"]:
        assert call("GET", f"/admin/requests/{row['request_id']}", detail).status_code == 200
    assert call("GET", "/admin/requests/feed", detail).status_code == 404
    for action in ("clear-cooldown", "refresh-quota", "disable", "enable"):
        template = f"/admin/connections/{{connection_id}}/{action}"
        assert call("POST", f"/admin/connections/plan/{action}", template).status_code == 200
        assert call("POST", f"/admin/connections/nope/{action}", template).status_code == 404
    assert call("POST", "/admin/connections/cheap/refresh-quota", template).status_code == 409
    call("GET", "/admin/openapi.json")
    unauthorized = httpx.get(f"{gateway.url}/admin/connections")
    assert unauthorized.status_code == 401
    _matches("/admin/connections", "get", unauthorized)
    wrong = httpx.delete(f"{gateway.url}/admin/requests", headers=AUTH)
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "GET")
    every = {(path, method) for path, item in SCHEMA["paths"].items() for method in item}
    assert checked == every


@pytest.mark.slow
def test_fuzzing_the_admin_api_from_its_schema_finds_no_server_error_or_accepted_bad_input(
    gateway: RunningGateway, tmp_path: Path
) -> None:
    # The command line runs every phase (examples, coverage of boundaries, missing and
    # wrong-typed parameters and unlisted methods, then fuzzing) with every check.
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{gateway.url}/admin/openapi.json",
            "--header",
            f"Authorization: Bearer {ADMIN_KEY}",
            "--checks",
            "all",
            "--max-examples",
            "50",
            "--seed",
            "7",
            "--workers",
            "1",
            "--phases",
            "examples,coverage,fuzzing",
            "--request-timeout",
            "10",
            "--generation-database",
            "none",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counts is not None, run.stdout[-3000:]
    generated, passed = map(int, counts.groups())
    assert generated == passed > 8 * 20, "every operation was exercised, and all passed"
