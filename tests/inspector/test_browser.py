"""The inspector page in a real headless Chromium (Debian's package, driven by Playwright): the
token form, the scripted session's timeline with its summary and covered events, switching the
agent whose context is shown, the token plot, and a live update when an event is appended over
gRPC. Screenshots go to ``build/inspector/`` (test artifacts)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.browser import require_chromium
from tests.inspector.helpers import ADMIN, READER, Running
from tests.inspector.session import APP, BROWSER_SESSION as SESSION, USER, message

pytestmark = [pytest.mark.process, pytest.mark.asyncio(loop_scope="package")]

SHOTS = Path(__file__).resolve().parents[2] / "build" / "inspector"
#: how long the page may take to show something (a loaded 2-core machine)
WAIT_MS = 15_000
HOSTILE = '<img src="x" onerror="window.pwned = 1"> <b>not bold</b>'


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def browser() -> AsyncIterator[Browser]:
    chromium = require_chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def _page(browser: Browser, problems: list[str]) -> Page:
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(WAIT_MS)
    # a CSP violation or a script error is reported on the console
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" and "401" not in msg.text and "403" not in msg.text
            else None
        ),
    )
    return page


async def _sign_in(page: Page, running: Running, token: str) -> None:
    await page.goto(running.base)
    form = page.locator("#auth-form")
    await expect(form).to_be_visible()
    await expect(page.locator("#auth-reason")).to_contain_text("401")
    await page.fill("#token", token)
    await page.click("#auth-form button[type=submit]")
    await expect(form).to_be_hidden()


async def test_the_token_form_asks_once_and_refuses_a_bad_token(
    running: Running, browser: Browser
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page = await _page(browser, problems)
    await page.goto(running.base)
    await expect(page.locator("#auth-form")).to_be_visible()
    await page.screenshot(path=str(SHOTS / "auth-form.png"))
    await page.fill("#token", "not-a-token")
    await page.click("#auth-form button[type=submit]")
    await expect(page.locator("#auth-reason")).to_contain_text("not known")
    await page.fill("#token", READER)
    await page.click("#auth-form button[type=submit]")
    await expect(page.locator("#apps li")).to_have_text([APP])
    # kept for the tab: a reload asks no more
    await page.reload()
    await expect(page.locator("#apps li")).to_have_text([APP])
    await expect(page.locator("#auth-form")).to_be_hidden()
    assert await page.evaluate("sessionStorage.length") == 1
    await page.close()
    assert problems == []


async def test_the_session_timeline_context_plot_and_live_updates(
    running: Running, browser: Browser
) -> None:
    problems: list[str] = []
    page = await _page(browser, problems)
    await _sign_in(page, running, READER)
    await page.click(f"#apps li[data-value={APP}]")
    await page.click(f"#users li[data-value={USER}]")
    await page.click(f"#sessions li[data-value={SESSION}]")
    timeline = page.locator("#timeline > li")
    await expect(timeline).to_have_count(16)

    # the summary and the events it covers, greyed
    summary = page.locator('#timeline > li[data-sequence="10"]')
    await expect(summary).to_contain_text("summary of 8 events (#2–#9)")
    covered = page.locator("#timeline > li.covered")
    await expect(covered).to_have_count(8)
    assert await covered.evaluate_all("els => els.map(e => e.dataset.sequence)") == [
        str(n) for n in range(2, 10)
    ]
    assert float(await covered.first.evaluate("e => getComputedStyle(e).opacity")) < 1
    # the rewound events struck through, the pinned goal marked
    rewound = page.locator("#timeline > li.rewound")
    assert await rewound.evaluate_all("els => els.map(e => e.dataset.sequence)") == ["11", "12"]
    decoration = await rewound.first.locator(".parts").evaluate(
        "e => getComputedStyle(e).textDecorationLine"
    )
    assert decoration == "line-through"
    await expect(page.locator('#timeline > li[data-sequence="1"] .pin')).to_have_text("pinned")
    # an event expands to its raw JSON
    call = page.locator('#timeline > li[data-sequence="3"]')
    await call.locator(".row-head").click()
    await expect(call.locator("pre.raw")).to_be_visible()
    await expect(call.locator("pre.raw")).to_contain_text('"functionCall"')

    # the planner's context: the pinned goal, the summary, no rewound turn, the prefix boundary
    await expect(page.locator("#context-agent")).to_have_text("planner")
    contents = page.locator("#context > li:not(.boundary)")
    await expect(contents.nth(1)).to_contain_text("summary #10")
    planner_texts = await contents.all_inner_texts()
    assert "Porto" not in " ".join(planner_texts)
    await expect(page.locator("#context > li.boundary")).to_contain_text("cacheable prefix")

    # the plot: a point per sampled event, the compaction marked
    plot = page.locator("#plot svg")
    await expect(plot.locator("circle.point")).to_have_count(6)
    await expect(plot.locator("line.compaction-mark")).to_have_count(1)
    await expect(plot.locator("circle.point.summary")).to_have_count(1)
    await expect(page.locator("#live")).to_have_text("live")
    await call.locator(".row-head").click()  # folded again
    await expect(call.locator("pre.raw")).to_be_hidden()
    await page.screenshot(path=str(SHOTS / "session.png"))

    # another agent's view: the planner's turns become quoted user content
    await page.select_option("#agent", "researcher")
    await expect(page.locator("#context-agent")).to_have_text("researcher")
    await expect(contents.last).to_contain_text("another agent")
    assert await contents.all_inner_texts() != planner_texts
    assert re.search(r"#agent=researcher|agent=researcher", page.url)

    # live: an event appended over gRPC shows up, as text only
    async with running.client(ADMIN) as client:
        await client.append_event(APP, USER, SESSION, message("user", "inv-9", HOSTILE, 40))
    appended = page.locator('#timeline > li[data-sequence="17"]')
    await expect(appended).to_contain_text(HOSTILE)
    assert await page.locator("#timeline img, #timeline b").count() == 0
    assert await page.evaluate("window.pwned") is None
    await expect(page.locator("#context-agent")).to_have_text("researcher")  # kept
    await expect(plot.locator("circle.point")).to_have_count(7)
    # a burst of appends: the page ends up showing the last of them
    async with running.client(ADMIN) as client:
        for n in range(5):
            await client.append_event(
                APP, USER, SESSION, message("researcher", "inv-10", f"burst {n}", 41 + n)
            )
    await expect(page.locator('#timeline > li[data-sequence="22"]')).to_contain_text("burst 4")
    await page.screenshot(path=str(SHOTS / "live.png"))
    await page.close()
    assert problems == []
