"""Reading what an upstream's answer says beyond its body: quota windows, billing past a
plan's quota, and the class of a failure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import cast

from rungway.adapters.base import (
    ErrorQuota,
    OverageHeaders,
    hint_for_base_url,
    reads_error_quota,
    reads_overage,
)
from rungway.engine.planning import Route
from rungway.engine.state import QuotaObserver
from rungway.protocol.failures import Failure, FailureClass
from rungway.routing.snapshot import QuotaWindow, WindowStatus


class AnswerReader:
    """Reads each answer once, telling the quota board what it learnt."""

    def __init__(self, quota: QuotaObserver) -> None:
        self._quota = quota

    def failure(  # noqa: PLR0917 - one upstream answer, taken apart
        self,
        route: Route,
        spent: set[str],
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        received: float,
        header_windows: tuple[QuotaWindow, ...],
    ) -> Failure:
        """Classify a failed answer; add to `spent` a connection whose quota ran out for
        every model."""
        adapter = route.adapter
        windows: tuple[QuotaWindow, ...] = header_windows
        if reads_error_quota(adapter):
            # Some upstreams name the exhausted window only in the error body.
            named = cast(ErrorQuota, adapter).error_windows(
                route.connection,
                status=status,
                headers=headers,
                body=body,
                model=route.target.model,
                now=received,
            )
            if named:
                self._quota.observe(route.connection.id, named, received)
                windows = (*windows, *named)
        failure = adapter.classify_failure(status, headers, body)
        hint = hint_for_base_url(adapter, route.connection.base_url, status, body)
        if hint is not None:
            # The server answered, but the API is not where the base URL points.
            failure = replace(failure, message=f"{failure.message}; {hint}")
        if failure.kind is FailureClass.QUOTA_EXHAUSTED and _whole_connection_spent(windows):
            # No other model on this connection can be served before the reset.
            spent.add(route.connection.id)
        return failure

    def quota(
        self, route: Route, headers: Mapping[str, str], received: float
    ) -> tuple[QuotaWindow, ...]:
        """The quota windows the answer's headers report, noted on the board."""
        windows = route.adapter.read_quota(
            route.connection, model=route.target.model, headers=headers, now=received
        )
        if windows:
            self._quota.observe(route.connection.id, windows, received)
        return windows

    def overage(self, route: Route, headers: Mapping[str, str]) -> bool:
        """Note what a plan's response says of billing past its quota; True when this
        response was billed so."""
        if not reads_overage(route.adapter):
            return False
        reading = cast(OverageHeaders, route.adapter).read_overage(route.connection, headers)
        if reading.permitted is not None:
            self._quota.observe_overage(route.connection.id, reading.permitted, reading.in_use)
        return reading.in_use


def _whole_connection_spent(windows: tuple[QuotaWindow, ...]) -> bool:
    """True when a window that covers every model of the connection is exhausted."""
    return any(
        window.model is None
        and (
            window.status is WindowStatus.REJECTED
            or (window.used_percent is not None and window.used_percent >= 100)
        )
        for window in windows
    )
