"""The dashboard in a real browser: the ladder moving up when the plan runs out, and back.

Every step waits for the page's own two-second poll to show the change; nothing reloads.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from rungway.sim.faults import HttpErrorFault
from tests.browser.conftest import ADMIN_KEY, World

pytestmark = pytest.mark.browser

# Two polls and plenty of slack for a busy machine: the page shows a change without a reload.
LIVE_MS = 10_000
# The one form every date and time on the page takes.
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
STALE = "stale; refreshed on next use"


def _window(page: Page, connection: str, window: str) -> Locator:
    return page.locator(f'[data-connection="{connection}"] [data-window="{window}"]')


def _newest(page: Page) -> Locator:
    return page.locator("#requests tbody tr").first


def _shoot(page: Page, folder: Path, name: str, *, full_page: bool = True) -> None:
    """Save the page in light and in dark mode."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=folder / f"{name}-{scheme}.png", full_page=full_page)
    page.emulate_media(color_scheme="light")


@pytest.mark.slow
def test_the_dashboard_follows_a_plan_running_out_and_coming_back(
    world: World, page: Page, artifacts: Path
) -> None:
    page.goto(f"{world.url}/dashboard")
    subscription = page.locator('.rung[data-rung="subscription"] [data-connection="plan"]')
    expect(subscription).to_be_visible()
    expect(page.locator('.rung[data-rung="premium"] [data-connection="api"]')).to_be_visible()
    for rung in ("keyless", "free", "cheap"):
        expect(page.locator(f'.rung[data-rung="{rung}"]')).to_contain_text("no connection")
    expect(page.locator("#status")).to_contain_text("Live")

    # The plan serves first; its 5h window appears with a countdown that ticks.
    assert world.send() == "plan"
    expect(_newest(page)).to_have_attribute("data-connection", "plan", timeout=LIVE_MS)
    five_hours = _window(page, "plan", "5h")
    expect(five_hours).to_have_attribute("data-state", "ok", timeout=LIVE_MS)
    countdown = five_hours.locator(".countdown")
    expect(countdown).to_have_text(re.compile(r"resets in (4h 59m \d\ds|5h 00m 00s)"))
    before = countdown.inner_text()
    expect(countdown).not_to_have_text(before, timeout=2500)
    expect(page.locator('.rung[data-rung="premium"]')).to_contain_text("breaker closed")
    _shoot(page, artifacts, "1-plan-serving")

    # The plan runs out: the next request goes up the ladder to the API key.
    served = [world.send() for _ in range(10)]
    assert served[-1] == "api"
    expect(_newest(page)).to_have_attribute("data-connection", "api", timeout=LIVE_MS)
    expect(_newest(page)).to_contain_text("premium")
    expect(five_hours).to_have_attribute("data-state", "exhausted", timeout=LIVE_MS)
    expect(five_hours).to_contain_text("exhausted")
    expect(page.locator('.budget[data-rung="premium"]')).to_contain_text("of $2.00 per month")
    expect(page.locator("#chart svg")).to_have_attribute("aria-label", re.compile("saved"))
    _shoot(page, artifacts, "2-plan-exhausted")

    # A click on the newest request opens its route plan: the plan skipped, and why.
    _newest(page).get_by_role("button").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    skip = dialog.locator('.skips tr[data-reason="quota_exhausted"]')
    expect(skip).to_contain_text("plan")
    expect(skip).to_contain_text("5h")
    expect(skip).to_contain_text(re.compile(f"\\(resets {ISO}\\)"))
    expect(dialog.locator(".candidates li.served")).to_contain_text("api")
    # The open dialog covers the window, not the whole page.
    _shoot(page, artifacts, "3-route-plan", full_page=False)
    dialog.get_by_role("button", name="Close route plan").click()
    expect(dialog).to_be_hidden()

    # Past the reset, the plan serves again and its window is open.
    state = world.gateway.quota.connection_states(world.clock.now())["plan"]  # type: ignore[union-attr]
    reset = next(window.resets_at for window in state.windows if window.name == "5h")
    assert reset is not None
    world.clock.set(reset)
    # Nothing has used the plan since its window reset: the reading shown is of a window
    # that is over, and says so rather than counting down to an instant already gone.
    expect(countdown).to_have_text(STALE, timeout=LIVE_MS)
    expect(five_hours.locator("[title]").first).to_have_attribute(
        "title", re.compile(f"^resets at {ISO}$")
    )
    _shoot(page, artifacts, "4-plan-stale")
    assert world.send() == "plan"
    expect(_newest(page)).to_have_attribute("data-connection", "plan", timeout=LIVE_MS)
    expect(five_hours).to_have_attribute("data-state", "ok", timeout=LIVE_MS)
    # The countdown runs on the gateway's clock, now five hours ahead of this browser's.
    expect(countdown).to_have_text(re.compile(r"resets in (4h 59m \d\ds|5h 00m 00s)"))
    expect(page.locator("#requests tbody tr")).to_have_count(len(served) + 2)
    _shoot(page, artifacts, "5-plan-back")


def test_with_an_admin_key_the_page_asks_for_it_once_and_never_holds_it(
    keyed_world: World, page: Page, artifacts: Path
) -> None:
    html = httpx.get(f"{keyed_world.url}/dashboard")
    assert html.status_code == 200
    assert ADMIN_KEY not in html.text
    page.goto(f"{keyed_world.url}/dashboard")
    ask = page.get_by_role("dialog", name="Admin key")
    expect(ask).to_be_visible()
    expect(page.locator("#ladder")).to_be_empty()

    ask.get_by_role("textbox", name="Admin key").fill("not-the-key")
    ask.get_by_role("button", name="Use key").click()
    expect(ask).to_contain_text("That key was refused")
    expect(page.locator("#ladder")).to_be_empty()
    _shoot(page, artifacts, "key-refused")

    ask.get_by_role("textbox", name="Admin key").fill(ADMIN_KEY)
    ask.get_by_role("button", name="Use key").click()
    expect(ask).to_be_hidden()
    expect(page.locator('[data-connection="plan"]')).to_be_visible()
    # Reloading the tab keeps the key for the session: no second prompt.
    page.reload()
    expect(page.locator('[data-connection="plan"]')).to_be_visible()
    expect(ask).to_be_hidden()
    page.get_by_role("button", name="Forget admin key").click()
    assert page.evaluate("sessionStorage.length") == 0


@pytest.mark.slow
def test_a_cooldown_a_fall_through_and_a_disabled_connection_show_live(
    world: World, page: Page, artifacts: Path
) -> None:
    page.goto(f"{world.url}/dashboard")
    subscription = page.locator('.rung[data-rung="subscription"] [data-connection="plan"]')
    expect(subscription).to_have_attribute("data-cooling", "false")

    # The plan is overloaded: the request falls through to the API key in the same call,
    # and the plan cools down for the ten minutes it asked for.
    world.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert world.send() == "api"
    expect(subscription).to_have_attribute("data-cooling", "true", timeout=LIVE_MS)
    # One sentence: until when, why (with the kind of limit), and how long is left.
    expect(subscription.locator(".cooldown")).to_have_text(
        re.compile(
            f"^cooling down until {ISO} \\(overloaded \\(unexplained\\): Overloaded\\), "
            "(9m \\d\\ds|10m 00s) left$"
        )
    )
    expect(subscription.locator(".badge.cooling")).to_be_visible()
    _newest(page).get_by_role("button").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.locator(".attempts")).to_contain_text("plan")
    expect(dialog.locator(".attempts")).to_contain_text("529")
    dialog.get_by_role("button", name="Close route plan").click()

    # An operator takes the API key out of service; the card says so at the next poll.
    api = page.locator('.rung[data-rung="premium"] [data-connection="api"]')
    disabled = httpx.post(f"{world.url}/admin/connections/api/disable")
    assert disabled.status_code == 200, disabled.text
    expect(api.locator(".badge.disabled")).to_be_visible(timeout=LIVE_MS)
    _shoot(page, artifacts, "cooldown-and-disabled")
    cleared = httpx.post(f"{world.url}/admin/connections/plan/clear-cooldown")
    assert cleared.status_code == 200, cleared.text
    expect(subscription).to_have_attribute("data-cooling", "false", timeout=LIVE_MS)
    expect(subscription.locator(".cooldown")).to_have_count(0)


def test_the_page_reads_plainly_from_the_root_with_its_icon_dates_tiers_and_auto_ids(
    world: World, page: Page, artifacts: Path
) -> None:
    # The gateway's root sends the browser on to the dashboard.
    page.goto(world.url)
    expect(page).to_have_url(f"{world.url}/dashboard")
    expect(page.locator("#status")).to_have_text(re.compile(f"^Live · updated {ISO}$"))

    # Only a rung that bills per token carries a price tier; a plan's model costs nothing more.
    subscription = page.locator('.rung[data-rung="subscription"] [data-connection="plan"]')
    expect(subscription.locator(".models li")).to_have_text("claude-sonnet-4-5")
    expect(subscription.locator(".tier")).to_have_count(0)
    api = page.locator('.rung[data-rung="premium"] [data-connection="api"]')
    expect(api.locator(".tier")).to_have_text("tier premium")

    # The two flat ids, each with what it does.
    ids = page.locator("#auto-ids > div")
    expect(ids.filter(has_text="auto/subscription")).to_contain_text(
        "only plan quota that is verified live; fails rather than ever billing"
    )
    expect(ids.filter(has_text="auto/thrifty")).to_contain_text(
        "one rung at a time up to premium, each paid rung under its own budget"
    )

    # Every date and time in one ISO 8601 form: the request, the chart, the route plan.
    assert world.send() == "plan"
    expect(_newest(page).locator("time")).to_have_text(re.compile(f"^{ISO}$"), timeout=LIVE_MS)
    for axis in page.locator("#chart svg text.axis").filter(has_text="T").all():
        expect(axis).to_have_text(re.compile(f"^{ISO}$"))
    expect(_window(page, "plan", "5h").locator(".source")).to_have_attribute(
        "title", re.compile(f"^read {ISO}$")
    )
    _newest(page).get_by_role("button").click()
    started = page.get_by_role("dialog").locator(".facts div").filter(has_text="Started")
    expect(started.locator("dd")).to_have_text(re.compile(f"^{ISO}$"))
    page.get_by_role("dialog").get_by_role("button", name="Close route plan").click()
    _shoot(page, artifacts, "plain-reading")

    # The icon comes from the page's own origin, which the policy allows; a refusal would
    # be a console error, and the page fixture fails the test on one.
    expect(page.locator('link[rel="icon"]')).to_have_attribute("href", "/dashboard/favicon.svg")
    answer = page.evaluate(
        """async () => {
            const response = await fetch(document.querySelector('link[rel="icon"]').href);
            return [response.status, response.headers.get("content-type")];
        }"""
    )
    assert answer == [200, "image/svg+xml"]
