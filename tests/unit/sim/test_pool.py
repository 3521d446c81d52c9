"""A pool of simulated plan accounts: a credential and windows each, resets staggered."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rungway.clock import FakeClock
from rungway.sim import ClockSpec, Scenario, builtin_scenario, load_scenario
from rungway.sim.pool import SimPool, pool_accounts

from .conftest import CLAUDE_CODE_HEADERS, START, message_body, request, subscription_scenario

FIVE_HOURS = 18000.0
WEEK = 604800.0


def _pool(**pool: Any) -> Scenario:
    raw = subscription_scenario().model_dump(exclude_defaults=True)
    return Scenario.model_validate({**raw, "name": "pool", "pool": pool})


def _send(url: str, token: str) -> int:
    headers = {
        "authorization": f"Bearer {token}",
        "anthropic-version": "2023-06-01",
        **CLAUDE_CODE_HEADERS,
        "content-type": "application/json",
    }
    return request(url, "POST", "/v1/messages", message_body(), headers).status


def test_each_account_has_its_own_name_and_token() -> None:
    accounts = pool_accounts(_pool(accounts=3))
    assert [account.name for account in accounts] == ["pool-1", "pool-2", "pool-3"]
    token = subscription_scenario().auth.token
    assert [account.auth.token for account in accounts] == [f"{token}-{i}" for i in (1, 2, 3)]
    assert all(account.pool is None for account in accounts)


def test_by_default_each_windows_resets_are_spread_evenly_over_its_length() -> None:
    with SimPool(_pool(accounts=3)) as pool:
        resets = [
            {window.name: window.reset_at - START for window in account.state().windows}
            for account in pool
        ]
    # Account k's grid is (k - 1) thirds of a length after account 1's.
    assert [reset["5h"] for reset in resets] == [FIVE_HOURS, FIVE_HOURS / 3, FIVE_HOURS * 2 / 3]
    assert [reset["7d"] for reset in resets] == [WEEK, WEEK / 3, WEEK * 2 / 3]


def test_a_set_stagger_puts_each_account_that_much_later_modulo_the_length() -> None:
    accounts = pool_accounts(_pool(accounts=4, stagger_s=7000))
    resets = [[window.length_s - window.started_ago_s for window in a.windows] for a in accounts]
    # 5h: 18000, then 7000, 14000 and 21000 - 18000 s; 7d and 7d_oi: 7000 s apart.
    assert resets == [
        [FIVE_HOURS, WEEK, WEEK],
        [7000, 7000, 7000],
        [14000, 14000, 14000],
        [3000, 21000, 21000],
    ]


def test_accounts_share_one_clock_and_reset_at_their_own_instants() -> None:
    clock = FakeClock(START)
    with SimPool(_pool(accounts=3), clock) as pool:
        assert pool.fake_clock is clock
        for account in pool:
            account.set_window_used("5h", 400)
        tokens = [account.scenario.auth.token or "" for account in pool]
        assert [_send(url, token) for url, token in zip(pool.urls, tokens, strict=True)] == [
            429,
            429,
            429,
        ]
        clock.advance(FIVE_HOURS / 3)
        # Only the account whose grid is a third of a length after account 1's has reset.
        assert [_send(url, token) for url, token in zip(pool.urls, tokens, strict=True)] == [
            429,
            200,
            429,
        ]
        clock.advance(FIVE_HOURS / 3)
        assert [_send(url, token) for url, token in zip(pool.urls, tokens, strict=True)] == [
            429,
            200,
            200,
        ]


def test_an_account_accepts_only_its_own_token() -> None:
    with SimPool(_pool(accounts=2), FakeClock(START)) as pool:
        first, second = pool.accounts
        assert _send(first.url, second.scenario.auth.token or "") == 401
        assert _send(first.url, first.scenario.auth.token or "") == 200


def test_reset_restarts_every_account_staggered_from_now() -> None:
    clock = FakeClock(START)
    pool = SimPool(_pool(accounts=2), clock)
    clock.advance(100)
    pool.reset()
    assert [account.state().window("5h").reset_at for account in pool] == [
        START + 100 + FIVE_HOURS,
        START + 100 + FIVE_HOURS / 2,
    ]


def test_a_scenario_without_a_pool_is_a_pool_of_itself() -> None:
    scenario = subscription_scenario()
    assert pool_accounts(scenario) == (scenario,)
    assert len(SimPool(scenario)) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pool": {"accounts": 1}}, "greater than or equal to 2"),
        ({"pool": {"accounts": 2, "stagger_s": 0}}, "greater than 0"),
        ({"pool": {"accounts": 2}, "auth": {"kind": "none"}}, "a credential each"),
    ],
)
def test_a_pool_that_cannot_be_served_is_refused(change: dict[str, Any], message: str) -> None:
    raw = {**subscription_scenario().model_dump(exclude_defaults=True), **change}
    with pytest.raises(ValidationError, match=message):
        Scenario.model_validate(raw)


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"started_ago_s": 60}, "less than length_s"),
        ({"started_ago_s": 10, "first_reset_at": START + 5}, "not with reset_zone"),
        ({"started_ago_s": -1}, "greater than or equal to 0"),
    ],
)
def test_a_window_cannot_start_before_its_own_length(window: dict[str, Any], message: str) -> None:
    raw = subscription_scenario().model_dump(exclude_defaults=True)
    raw["windows"] = [{"name": "5h", "capacity": 10, "length_s": 60, **window}]
    with pytest.raises(ValidationError, match=message):
        Scenario.model_validate(raw)


def test_the_builtin_claude_pool_is_three_claude_plan_accounts() -> None:
    scenario = load_scenario(builtin_scenario("claude-pool"))
    plan = load_scenario(builtin_scenario("claude-plan"))
    accounts = pool_accounts(scenario)
    assert len(accounts) == 3
    assert len({account.auth.token for account in accounts}) == 3
    for account in accounts:
        assert (account.api, account.quota_headers, account.usage_endpoint) == (
            plan.api,
            plan.quota_headers,
            plan.usage_endpoint,
        )
        assert [w.model_copy(update={"started_ago_s": 0}) for w in account.windows] == list(
            plan.windows
        )


def test_moving_the_clock_through_one_account_moves_every_account() -> None:
    scenario = _pool(accounts=2).model_copy(update={"clock": ClockSpec(start=START)})
    with SimPool(scenario) as pool:
        first, second = pool.accounts
        moved = request(first.url, "POST", "/_sim/clock", {"advance_s": FIVE_HOURS / 2})
        assert moved.status == 200
        assert second.state().now == START + FIVE_HOURS / 2
        # Account 2's window, half a length after account 1's, has reset on that clock.
        assert second.state().window("5h").reset_at == START + FIVE_HOURS * 3 / 2
