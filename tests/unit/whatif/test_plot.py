"""`--plot`: a PNG that decodes to a drawn figure, and an HTML page that needs nothing from
anywhere else; a wrong suffix or a missing plotting library is one line, said up front."""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rungway.whatif.outcome import Placement, PolicyRun, WindowUse
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.plot import PlotError, check_plot_path, write_plot
from rungway.whatif.synthetic import generate
from rungway.whatif.trace import Trace

WINDOW = PlanWindow("5h", 5 * 3600.0, 30, "requests", "first_use")
PLANS = {"plan": PlanQuota("plan", (WINDOW,))}


def _runs(trace: Trace) -> list[PolicyRun]:
    """A plan-first run over one 30-request window, and the same requests all on the key."""
    placements, uses = [], []
    start: float | None = None
    used = 0
    for index, request in enumerate(trace):
        price = request.tokens / 1_000_000
        if start is not None and request.at >= start + WINDOW.length_s:
            uses.append(WindowUse("plan", "5h", start, start + WINDOW.length_s, used, 30))
            start, used = None, 0
        if used < WINDOW.capacity:
            start = request.at if start is None else start
            used += 1
            placements.append(Placement(index, "plan", 0, 0.0, price))
        else:
            placements.append(Placement(index, "key", 1, price, price))
    if start is not None:
        uses.append(WindowUse("plan", "5h", start, start + WINDOW.length_s, used, 30))
    key = tuple(Placement(p.index, "key", 1, p.list_cost_usd, p.list_cost_usd) for p in placements)
    return [PolicyRun("ladder", tuple(placements), tuple(uses)), PolicyRun("always-key", key)]


@pytest.fixture(scope="module")
def trace() -> Trace:
    return generate("bursty", requests=3_000, seed=2)


def test_a_png_plot_is_a_drawn_image(tmp_path: Path, trace: Trace) -> None:
    from matplotlib.image import imread  # noqa: PLC0415 - the optional extra under test

    path = tmp_path / "whatif.png"
    write_plot(path, _runs(trace), trace, PLANS)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(path)
    height, width = pixels.shape[:2]
    # The spend panel and one window panel, side by side in time.
    assert width > 1_000
    assert height > 500
    assert pixels.std() > 0.05


class _Page(HTMLParser):
    """The tags and attributes of a page, to find anything it would fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.fetched: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            local = value is None or value.startswith(("#", "data:"))
            if name in {"src", "href", "xlink:href", "srcset", "action"} and not local:
                self.fetched.append(str(value))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_an_html_plot_is_one_page_that_fetches_nothing(tmp_path: Path, trace: Trace) -> None:
    path = tmp_path / "whatif.html"
    runs = _runs(trace)
    write_plot(path, runs, trace, PLANS)
    page = path.read_text(encoding="utf-8")
    parsed = _Page()
    parsed.feed(page)
    assert "svg" in parsed.tags
    assert {"script", "link", "img", "iframe"}.isdisjoint(parsed.tags)
    assert parsed.fetched == []
    assert "@import" not in page
    assert "url(http" not in page
    # The only addresses are the SVG namespaces' names, which nothing fetches.
    assert page.count("http") == page.count('xmlns="http') + page.count('xmlns:xlink="http')
    text = " ".join(parsed.text)
    paid = sum(p.cost_usd for p in runs[0].placements)
    assert paid > 0
    assert f"ladder: ${paid:,.2f}" in text
    assert "3,000 requests" in text


def test_a_plot_without_plan_windows_or_requests_still_draws(tmp_path: Path) -> None:
    write_plot(tmp_path / "empty.html", [PolicyRun("always-key", ())], ())
    assert "an empty trace" in (tmp_path / "empty.html").read_text()
    trace = generate("steady", requests=50, seed=1)
    runs = _runs(trace)
    # Without the plan table each window instance is drawn flat at its final use.
    write_plot(tmp_path / "flat.png", runs, trace)
    assert (tmp_path / "flat.png").stat().st_size > 10_000


def test_only_png_and_html_are_written(tmp_path: Path) -> None:
    with pytest.raises(PlotError, match=r"must end in \.png or \.html"):
        check_plot_path(tmp_path / "whatif.pdf")
    assert not (tmp_path / "whatif.pdf").exists()
    check_plot_path(tmp_path / "WHATIF.PNG")


def test_without_matplotlib_the_error_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotError) as raised:
        write_plot(tmp_path / "whatif.png", [], ())
    assert str(raised.value) == "plots need matplotlib: pip install 'rungway[plot]'"
    assert not (tmp_path / "whatif.png").exists()
