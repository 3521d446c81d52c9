"""`--plot FILE`: what each policy paid over time, and how full each plan window ran.

The top panel is each policy's cumulative paid spend over the trace's time. Below it, one
panel per plan window (a connection's `5h`, its `7d`, ...) shows, for every policy that
used the plan, how full each instance of the window was as the requests came, in percent
of its capacity; the course drops back at each reset, and a tick on the time axis marks
the reset. When the window's unit cannot be read from the placements (a per-model window,
or no plan table given), each instance is drawn flat at its final use from start to reset.

The file's suffix chooses the format: `.png` is a raster image; `.html` is one
self-contained page holding the figure as inline SVG, with no script, style sheet or font
fetched from anywhere. Plotting needs matplotlib, an optional extra
(`pip install 'rungway[plot]'`), imported only when a plot is asked for; `check_plot_path`
says so in one line before a replay starts. Lines are thinned to a few thousand points each,
which a figure's width cannot show more of anyway, so a 100,000-request trace plots in
about a second and its page stays small.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from rungway.whatif.outcome import PolicyRun, WindowUse
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.trace import Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["SUFFIXES", "PlotError", "check_plot_path", "write_plot"]

X = TypeVar("X")

SUFFIXES: Final = (".png", ".html")
_DAY_S: Final = 86_400.0
_POINTS: Final = 2_000
"""The most points a line keeps: more than a figure's width in pixels can show."""
_COLOURS: Final = {
    "ladder": "#1f77b4",
    "oracle": "#2ca02c",
    "always-key": "#d62728",
    "fallback-429": "#ff7f0e",
    "ttl-180s": "#9467bd",
}
_OTHER_COLOURS: Final = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_NO_METADATA: Final[dict[str, str | None]] = {
    "Creator": None,
    "Date": None,
    "Format": None,
    "Type": None,
}
_INSTALL: Final = "plots need matplotlib: pip install 'rungway[plot]'"


class PlotError(Exception):
    """A plot that cannot be written: the message says why in one line."""


def check_plot_path(path: Path) -> None:
    """A PlotError when `path`'s suffix is not one this writes or matplotlib is missing."""
    if path.suffix.lower() not in SUFFIXES:
        raise PlotError(f"--plot {path}: the file must end in {' or '.join(SUFFIXES)}")
    try:
        import matplotlib  # noqa: F401, PLC0415 - an optional extra, imported on demand
    except ImportError:
        raise PlotError(_INSTALL) from None


def write_plot(
    path: Path,
    runs: Sequence[PolicyRun],
    trace: Trace,
    plans: Mapping[str, PlanQuota] | None = None,
) -> None:
    """Draw `runs` of `trace` to `path` (PNG or HTML by its suffix); `plans`, the plan
    windows by connection id, let each window's fill be drawn request by request."""
    check_plot_path(path)
    from matplotlib.figure import Figure  # noqa: PLC0415 - an optional extra

    windows = sorted({(use.connection_id, use.window) for run in runs for use in run.window_use})
    figure = Figure(figsize=(11, 3.2 + 2.2 * len(windows)), layout="constrained")
    axes = figure.subplots(1 + len(windows), 1, sharex=True, squeeze=False)[:, 0]
    times = [_day(request.at) for request in trace]
    _spend_panel(axes[0], runs, times)
    for ax, (connection_id, name) in zip(axes[1:], windows, strict=True):
        window = _window(plans, connection_id, name)
        for position, run in enumerate(runs):
            uses = [
                u for u in run.window_use if (u.connection_id, u.window) == (connection_id, name)
            ]
            if uses:
                _window_course(ax, run, uses, trace, window=window, position=position)
        ax.axhline(100, color="#555555", linewidth=0.8, linestyle="--")
        ax.set_ylabel("% used")
        ax.set_title(f"{connection_id}: {name} window", loc="left", fontsize=10)
        ax.legend(loc="upper left", fontsize=8)
    _time_axis(axes[-1], trace)
    suffix = path.suffix.lower()
    if suffix == ".png":
        figure.savefig(path, format="png", dpi=110)
        return
    svg = io.StringIO()
    # No metadata: the page holds nothing but the drawing (and no link to a schema).
    figure.savefig(svg, format="svg", metadata=_NO_METADATA)
    path.write_text(_page(svg.getvalue(), runs, trace), encoding="utf-8")


def _time_axis(ax: Axes, trace: Trace) -> None:
    """Dates in UTC, labelled as briefly as the span allows, over the trace's own span: a
    window that resets a week after the last request must not squeeze the requests."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter  # noqa: PLC0415

    # matplotlib's own hints leave these two constructors untyped.
    locator = AutoDateLocator(tz=UTC)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    ax.set_xlabel("time (UTC)")
    if trace:
        first, last = _day(trace[0].at), _day(trace[-1].at)
        margin = max((last - first) * 0.02, 1 / 1_440)
        ax.set_xlim(first - margin, last + margin)


def _spend_panel(ax: Axes, runs: Sequence[PolicyRun], times: Sequence[float]) -> None:
    for position, run in enumerate(runs):
        total, spent = 0.0, []
        for placement in run.placements:
            total += placement.cost_usd
            spent.append(total)
        xs, ys = _thinned(times[: len(spent)], spent)
        ax.plot(
            xs,
            ys,
            label=f"{run.policy}: ${total:,.2f}",
            color=_colour(run.policy, position),
            drawstyle="steps-post",
            **_stroke(run.policy),
        )
    ax.set_ylabel("paid (US$)")
    ax.set_title("cumulative paid spend per policy", loc="left", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)


def _window_course(
    ax: Axes,
    run: PolicyRun,
    uses: Sequence[WindowUse],
    trace: Trace,
    *,
    window: PlanWindow | None,
    position: int,
) -> None:
    """The fill of each instance of one window under one policy, and its resets."""
    colour = _colour(run.policy, position)
    xs: list[float] = []
    ys: list[float] = []
    ordered = sorted(uses, key=lambda use: use.start)
    cursor = 0
    placements = run.placements
    for use in ordered:
        xs.append(_day(use.start))
        ys.append(0.0)
        if window is not None and window.model is None:
            # The requests this policy sent to the plan inside this instance, in order.
            while cursor < len(placements) and trace[cursor].at < use.start:
                cursor += 1
            used = 0.0
            index = cursor
            while index < len(placements) and trace[index].at < use.end:
                placement = placements[index]
                if placement.connection_id == use.connection_id:
                    used += _units(window, placement.list_cost_usd, trace[index].tokens)
                    xs.append(_day(trace[index].at))
                    ys.append(100 * used / use.capacity)
                index += 1
        else:
            xs.append(_day(use.start))
            ys.append(100 * use.used / use.capacity)
        xs.append(_day(use.end))
        ys.append(ys[-1])
        # A gap between instances, so no line joins one's end to the next one's start.
        xs.append(_day(use.end))
        ys.append(math.nan)
    thinned_x, thinned_y = _thinned(xs, ys, keep_gaps=True)
    ax.plot(
        thinned_x,
        thinned_y,
        color=colour,
        drawstyle="steps-post",
        label=run.policy,
        **_stroke(run.policy),
    )
    resets = [_day(use.end) for use in ordered]
    ax.plot(resets, [0.0] * len(resets), linestyle="none", marker="|", markersize=9, color=colour)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def _units(window: PlanWindow, list_cost_usd: float, tokens: int) -> float:
    if window.unit == "requests":
        return 1.0
    if window.unit == "tokens":
        return float(tokens)
    return list_cost_usd


def _window(
    plans: Mapping[str, PlanQuota] | None, connection_id: str, name: str
) -> PlanWindow | None:
    quota = plans.get(connection_id) if plans is not None else None
    if quota is None:
        return None
    return next((window for window in quota.windows if window.name == name), None)


def _thinned(
    xs: Sequence[X], ys: Sequence[float], *, keep_gaps: bool = False
) -> tuple[list[X], list[float]]:
    """At most about `_POINTS` of the points, evenly by position, the last one and every
    gap (NaN) kept, so a step line keeps its final value and its breaks."""
    if len(xs) <= _POINTS:
        return list(xs), list(ys)
    step = len(xs) / _POINTS
    chosen = {min(len(xs) - 1, int(i * step)) for i in range(_POINTS)} | {len(xs) - 1}
    if keep_gaps:
        # Keep each gap and the point before it, so every instance's end stays drawn.
        gaps = [i for i, y in enumerate(ys) if math.isnan(y)]
        chosen.update(gaps)
        chosen.update(i - 1 for i in gaps if i > 0)
    kept = sorted(chosen)
    return [xs[i] for i in kept], [ys[i] for i in kept]


def _day(at: float) -> float:
    """`at` as matplotlib's date axis counts: days since 1970-01-01 UTC, its epoch."""
    return at / _DAY_S


def _when(at: float) -> str:
    return f"{datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M}"


def _stroke(policy: str) -> dict[str, Any]:
    """The ladder wide and solid, the others thinner and dashed over it, so a policy that
    placed requests exactly as the ladder did still shows."""
    if policy == "ladder":
        return {"linewidth": 2.6, "linestyle": "-", "zorder": 2}
    return {"linewidth": 1.2, "linestyle": "--" if policy == "oracle" else "-.", "zorder": 3}


def _colour(policy: str, position: int) -> str:
    return _COLOURS.get(policy, _OTHER_COLOURS[position % len(_OTHER_COLOURS)])


def _page(svg: str, runs: Sequence[PolicyRun], trace: Trace) -> str:
    """One HTML page holding `svg` inline, with a title and the paid totals as text."""
    start = svg.find("<svg")
    drawing = svg[start:] if start >= 0 else svg
    span = f"{_when(trace[0].at)} to {_when(trace[-1].at)} UTC" if trace else "an empty trace"
    totals = "".join(
        f"<li>{html.escape(run.policy)}: ${sum(p.cost_usd for p in run.placements):,.2f}</li>"
        for run in runs
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>rungway what if</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}svg{max-width:100%;height:auto}</style>"
        "</head><body>"
        f"<h1>What if: {len(trace):,} requests, {html.escape(span)}</h1>"
        f"<p>Paid spend per policy:</p><ul>{totals}</ul>\n{drawing}\n</body></html>\n"
    )
