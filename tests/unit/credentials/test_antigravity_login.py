"""An Antigravity login: reading the `agy` CLI's token file, renewing it under Antigravity's
client at Google's token endpoint, and finding its project and credits the Antigravity way."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson
import pytest
from pydantic import SecretStr

from rungway.credentials import antigravity
from rungway.credentials.antigravity_project import AntigravityProject, holds_credits
from rungway.credentials.code_assist import static_token
from rungway.credentials.grants import TOKEN_URLS, TokenRequest, refresh_request
from rungway.credentials.logins import LoginError, read_login
from rungway.quota.antigravity import read_antigravity_quota

TOKEN = {
    "access_token": "ya29.agy-access",
    "token_type": "Bearer",
    "refresh_token": "1//agy-refresh",
    "expiry": "2026-05-29T06:16:24.338-03:00",
}
AGY_FILE = {"token": TOKEN, "auth_method": "consumer"}
Answer = tuple[int, Mapping[str, str], bytes]


def test_the_agy_token_file_gives_tokens_and_its_expiry(tmp_path: Path) -> None:
    path = tmp_path / "antigravity-oauth-token"
    path.write_bytes(orjson.dumps(AGY_FILE))
    login = read_login("antigravity", str(path))
    assert (login.kind, login.access_token, login.refresh_token) == (
        "antigravity",
        "ya29.agy-access",
        "1//agy-refresh",
    )
    assert login.expires_at == pytest.approx(1_780_046_184.338)


def test_a_flat_export_with_epoch_milliseconds_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "flat.json"
    flat = {"access_token": "a", "refresh_token": "r", "expiry_date": 1_790_000_000_500}
    path.write_bytes(orjson.dumps(flat))
    assert read_login("antigravity", str(path)).expires_at == pytest.approx(1_790_000_000.5)


def test_the_default_file_is_the_agy_clis_unless_the_variable_names_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(antigravity.TOKEN_FILE_ENV, raising=False)
    assert antigravity.default_source().endswith(".gemini/antigravity-cli/antigravity-oauth-token")
    path = tmp_path / "elsewhere"
    path.write_bytes(orjson.dumps(AGY_FILE))
    monkeypatch.setenv(antigravity.TOKEN_FILE_ENV, str(path))
    assert read_login("antigravity").source == str(path)


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"api_key": "x"}, "access_token"),
        ({"token": {**TOKEN, "refresh_token": ""}}, "refresh_token"),
        ({"token": {**TOKEN, "expiry": "tomorrow"}}, "expiry"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_a_file_that_is_not_a_login_says_what_is_missing_without_the_token(
    tmp_path: Path, document: Any, says: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(document))
    with pytest.raises(LoginError, match=says) as raised:
        read_login("antigravity", str(path))
    assert "ya29" not in str(raised.value)


def test_a_renewal_goes_to_googles_endpoint_under_antigravitys_client(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(orjson.dumps(AGY_FILE))
    login = read_login("antigravity", str(path))
    sent = refresh_request(login, TOKEN_URLS["antigravity"])
    assert sent.url == "https://oauth2.googleapis.com/token"
    form = parse_qs((sent.body or b"").decode())
    assert form["client_id"] == [antigravity.CLIENT_ID]
    assert form["client_secret"] == [antigravity.CLIENT_SECRET]
    assert form["refresh_token"] == ["1//agy-refresh"]
    assert form["grant_type"] == ["refresh_token"]


class CloudCode:
    """Answers loadCodeAssist and onboardUser as given, recording each call."""

    def __init__(self, loaded: dict[str, Any], onboarded: list[dict[str, Any]]) -> None:
        self.loaded = loaded
        self.onboarded = onboarded
        self.calls: list[tuple[str, dict[str, Any], Mapping[str, str]]] = []

    async def send(self, request: TokenRequest) -> Answer:
        method = request.url.rsplit(":", 1)[1]
        self.calls.append((method, orjson.loads(request.body or b"{}"), request.headers))
        answer = self.loaded if method == "loadCodeAssist" else self.onboarded.pop(0)
        return 200, {}, orjson.dumps(answer)


def project_of(cloud: CloudCode, *, credits: bool = False) -> AntigravityProject:
    token = static_token(SecretStr("ya29.t"))
    return AntigravityProject(
        "https://up/v1internal", token, credits=credits, send=cloud.send, wait_s=0
    )


def test_discovery_speaks_antigravitys_metadata_and_onboards_to_the_paid_tier() -> None:
    loaded = {
        "currentTier": {"id": "free-tier"},
        "paidTier": {"id": "g1-pro-tier", "name": "Google AI Pro"},
        "allowedTiers": [{"id": "free-tier", "isDefault": True}],
    }
    done = {"done": True, "response": {"cloudaicompanionProject": {"id": "p-77"}}}
    cloud = CloudCode(loaded, [{"done": False}, done])
    assert asyncio.run(project_of(cloud).discover()) == "p-77"
    (load, load_body, headers), *onboard = cloud.calls
    assert (load, load_body) == ("loadCodeAssist", {"metadata": {"ideType": "ANTIGRAVITY"}})
    assert headers["user-agent"].startswith("antigravity/")
    assert [body["tier_id"] for _, body, _ in onboard] == ["g1-pro-tier", "g1-pro-tier"]
    assert onboard[0][1]["metadata"]["ide_type"] == "ANTIGRAVITY"
    assert "tierId" not in onboard[0][1]


def test_credits_are_in_use_only_when_the_config_allows_and_the_balance_holds() -> None:
    def loaded(amount: str) -> dict[str, Any]:
        credit = {"creditType": "GOOGLE_ONE_AI", "creditAmount": amount}
        credit["minimumCreditAmountForUsage"] = "50"
        return {"cloudaicompanionProject": "p-1", "paidTier": {"availableCredits": [credit]}}

    assert holds_credits(loaded("25000"))
    assert not holds_credits(loaded("49"))
    assert not holds_credits({"paidTier": {"id": "g1-pro-tier"}})
    wanted = project_of(CloudCode(loaded("25000"), []), credits=True)
    assert wanted.credits_in_use() is None
    asyncio.run(wanted.discover())
    assert wanted.credits_in_use() is True
    unwanted = project_of(CloudCode(loaded("25000"), []))
    asyncio.run(unwanted.discover())
    assert unwanted.credits_in_use() is False


def test_the_quota_reader_takes_a_missing_fraction_as_spent_and_fills_in_from_models() -> None:
    quota = {
        "buckets": [
            {
                "modelId": "gemini-3-flash",
                "remainingFraction": 0.25,
                "resetTime": "2030-01-01T00:00:00Z",
            },
            {"modelId": "claude-sonnet-4-6", "resetTime": "2030-01-01T05:00:00Z"},
        ]
    }
    models = {
        "models": {
            "gemini-3-flash": {"quotaInfo": {"remainingFraction": 1.0}},
            "gpt-oss-120b-medium": {
                "quotaInfo": {"remainingFraction": 0.5, "resetTime": "2030-01-01T00:00:00Z"}
            },
            "tab_flash_lite_preview": {"quotaInfo": {"remainingFraction": 1}},
        }
    }
    reading = read_antigravity_quota(
        orjson.dumps(quota), now=1_800_000_000.0, credits=False, fallback=orjson.dumps(models)
    )
    used = {w.model: w.used_percent for w in reading.windows}
    assert used == {"gemini-3-flash": 75.0, "claude-sonnet-4-6": 100.0, "gpt-oss-120b-medium": 50.0}
    assert reading.overage_permitted is False
    assert read_antigravity_quota(b"not json", now=0.0).windows == ()
