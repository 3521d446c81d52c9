"""The quota board: exhaustion memory, cooldowns clamped to resets, breakers."""

from __future__ import annotations

import pytest

from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.board import QuotaBoard
from rungway.quota.breaker import Breaker, BreakerPolicy
from rungway.quota.cooldown import CooldownPolicy, clamp_to_reset, cooldown_until
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import BreakerState, QuotaWindow, WindowStatus

NOW = 1_790_000_000.0
POLICY = CooldownPolicy()


def window(used: float, *, resets_in: float = 3600.0, name: str = "5h") -> QuotaWindow:
    return QuotaWindow(name, used, NOW + resets_in, NOW)


@pytest.mark.parametrize(
    ("cooldown", "reset", "expected"),
    [
        (NOW + 600, NOW + 60, NOW + 60),  # brought forward to the reset
        (NOW + 10, NOW + 60, NOW + 10),  # never lengthened
        (NOW + 600, None, NOW + 600),  # no reset known
        (NOW + 600, NOW - 1, NOW + 600),  # a reset in the past says nothing
    ],
)
def test_clamp_only_ever_shortens(cooldown: float, reset: float | None, expected: float) -> None:
    assert clamp_to_reset(cooldown, reset, NOW) == expected


def test_quota_backoff_past_the_reset_ends_at_the_reset() -> None:
    until = cooldown_until(
        FailureClass.QUOTA_EXHAUSTED,
        level=5,
        now=NOW,
        retry_after_s=None,
        resets_at=NOW + 90,
        policy=POLICY,
    )
    assert until == NOW + 90
    unclamped = cooldown_until(
        FailureClass.QUOTA_EXHAUSTED,
        level=5,
        now=NOW,
        retry_after_s=None,
        resets_at=None,
        policy=POLICY,
    )
    assert unclamped == NOW + 1920  # 60 s doubled five times


@pytest.mark.parametrize(
    "kind", [FailureClass.RATE_LIMITED, FailureClass.OVERLOADED, FailureClass.BILLING]
)
def test_upstream_wait_hints_are_honoured(kind: FailureClass) -> None:
    until = cooldown_until(kind, level=3, now=NOW, retry_after_s=7.5, resets_at=None, policy=POLICY)
    assert until == NOW + 7.5


def test_backoff_grows_and_is_capped() -> None:
    waits = [
        cooldown_until(
            FailureClass.RATE_LIMITED,
            level=level,
            now=NOW,
            retry_after_s=None,
            resets_at=None,
            policy=POLICY,
        )
        for level in (0, 1, 2, 20)
    ]
    assert waits == [NOW + 2, NOW + 4, NOW + 8, NOW + 300]


@pytest.mark.parametrize(
    "kind", [FailureClass.SERVER, FailureClass.TIMEOUT, FailureClass.BAD_REQUEST]
)
def test_server_errors_and_client_mistakes_do_not_rest_the_connection(kind: FailureClass) -> None:
    assert (
        cooldown_until(kind, level=0, now=NOW, retry_after_s=None, resets_at=None, policy=POLICY)
        is None
    )


def test_breaker_opens_half_opens_and_closes() -> None:
    policy = BreakerPolicy(threshold=3, half_open_after_s=30)
    breaker = Breaker()
    for _ in range(2):
        breaker.failed(NOW, policy)
    assert breaker.state(NOW, policy) is BreakerState.CLOSED
    breaker.failed(NOW, policy)
    assert breaker.state(NOW + 29, policy) is BreakerState.OPEN
    assert breaker.state(NOW + 30, policy) is BreakerState.HALF_OPEN
    breaker.failed(NOW + 31, policy)  # the probe failed
    assert breaker.state(NOW + 40, policy) is BreakerState.OPEN
    breaker.succeeded()
    assert breaker.state(NOW + 40, policy) is BreakerState.CLOSED


def test_exhaustion_memory_spans_the_hysteresis_band() -> None:
    board = QuotaBoard(LadderSettings(exit_cutoff_percent=2, reentry_min_remaining_percent=5))
    board.observe("plan", [window(99)], NOW)  # 1% left: exhausted
    assert board.connection_states(NOW)["plan"].windows[0].was_exhausted
    board.observe("plan", [window(96.5)], NOW + 1)  # 3.5%: inside the band, still remembered
    assert board.connection_states(NOW)["plan"].windows[0].was_exhausted
    board.observe("plan", [window(94)], NOW + 2)  # 6%: above re-entry, forgotten
    assert not board.connection_states(NOW)["plan"].windows[0].was_exhausted
    board.observe("plan", [window(96.5)], NOW + 3)  # back in the band from above: in play
    assert not board.connection_states(NOW)["plan"].windows[0].was_exhausted


def test_a_rejected_window_is_remembered_and_a_new_period_starts_clean() -> None:
    board = QuotaBoard(LadderSettings())
    rejected = QuotaWindow("5h", 50.0, NOW + 10, NOW, status=WindowStatus.REJECTED)
    board.observe("plan", [rejected], NOW)
    assert board.connection_states(NOW)["plan"].windows[0].was_exhausted
    board.observe("plan", [QuotaWindow("5h", 96.5, NOW + 3610, NOW + 20)], NOW + 20)
    assert not board.connection_states(NOW + 20)["plan"].windows[0].was_exhausted


def test_windows_are_kept_per_name_and_model() -> None:
    board = QuotaBoard(LadderSettings())
    board.observe("plan", [window(10), window(20, name="7d")], NOW)
    board.observe("plan", [QuotaWindow("7d_oi", 100.0, NOW + 99, NOW, model="fable")], NOW)
    board.observe("plan", [window(30)], NOW + 1)
    names = {
        (w.name, w.model, w.used_percent) for w in board.connection_states(NOW)["plan"].windows
    }
    assert names == {("5h", None, 30.0), ("7d", None, 20.0), ("7d_oi", "fable", 100.0)}


def test_a_quota_failure_rests_the_connection_until_its_window_resets() -> None:
    board = QuotaBoard(LadderSettings())
    board.observe(
        "plan", [QuotaWindow("5h", 100.0, NOW + 45, NOW, status=WindowStatus.REJECTED)], NOW
    )
    for _ in range(6):  # the backoff alone would be hours by now
        board.failed("plan", Failure(FailureClass.QUOTA_EXHAUSTED, "spent"), NOW)
    state = board.connection_states(NOW)["plan"]
    assert state.cooldown_until == NOW + 45
    assert state.cooldown_reason.startswith("quota_exhausted")


def test_success_resets_the_backoff_and_an_operator_can_clear_a_cooldown() -> None:
    board = QuotaBoard(LadderSettings())
    board.failed("key", Failure(FailureClass.RATE_LIMITED, "slow down"), NOW)
    board.failed("key", Failure(FailureClass.RATE_LIMITED, "slow down"), NOW)
    assert board.connection_states(NOW)["key"].cooldown_until == NOW + 4
    board.succeeded("key")
    board.failed("key", Failure(FailureClass.RATE_LIMITED, "slow down"), NOW + 10)
    assert board.connection_states(NOW + 10)["key"].cooldown_until == NOW + 12
    assert board.clear_cooldown("key")
    assert "key" not in board.connection_states(NOW + 10)
    assert not board.clear_cooldown("key")


def test_repeated_server_errors_open_the_breaker_until_it_half_opens() -> None:
    board = QuotaBoard(LadderSettings(), breakers=BreakerPolicy(threshold=2, half_open_after_s=30))
    for _ in range(2):
        board.failed("key", Failure(FailureClass.SERVER, "500"), NOW)
    assert board.connection_states(NOW + 1)["key"].breaker is BreakerState.OPEN
    assert board.connection_states(NOW + 30)["key"].breaker is BreakerState.HALF_OPEN
    board.succeeded("key")
    assert "key" not in board.connection_states(NOW + 31)


def test_a_per_model_exhaustion_does_not_rest_the_whole_connection() -> None:
    board = QuotaBoard(LadderSettings())
    scoped = QuotaWindow("7d_oi", 100.0, NOW + 99, NOW, model="fable", status=WindowStatus.REJECTED)
    board.observe("plan", [window(10), scoped], NOW)
    board.failed("plan", Failure(FailureClass.QUOTA_EXHAUSTED, "fable spent"), NOW)
    assert board.connection_states(NOW)["plan"].cooldown_until is None
    board.observe("plan", [window(100)], NOW)  # now the account-wide window is spent too
    board.failed("plan", Failure(FailureClass.QUOTA_EXHAUSTED, "spent"), NOW)
    assert board.connection_states(NOW)["plan"].cooldown_until is not None
