"""The hosted demo in a real browser: the demo-mode `streamlit run app.py` (`demo_url`), two browser
contexts (two visitors). What one uploads, the other never sees — not in the library, not in chat sources — while
both see the shared read-only samples."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from e2e_helpers import open_page, screenshot, upload, wait_idle
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NOTE = ROOT / "tests" / "fixtures" / "documents" / "eu_capitals.md"
NOTE_TITLE = "Capitals of the European Union"
SAMPLES = ("DocChat demo guide", "The Zen of Python", "Python (programming language)")
SAMPLE_LABEL = "Sample (shared, read-only)"
SCREENSHOTS = Path(os.environ["DOCCHAT_SCREENSHOTS"]) if os.environ.get("DOCCHAT_SCREENSHOTS") else None
TIMEOUT = 120_000


@pytest.fixture
def visitor(browser):
    """Opens a new browser context per call: separate cookies and tabs, so a separate Streamlit session."""
    contexts = []

    def open_visitor():
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.set_default_timeout(30_000)
        return pg

    yield open_visitor
    for ctx in contexts:
        ctx.close()


def _main(page):
    return page.locator('[data-testid="stMainBlockContainer"]')


HEADINGS = {"Chat": "Chat with your documents", "Library": "Your library"}


def _go(page, title: str) -> None:
    """Switch pages through the sidebar (a page reload would start a new session, i.e. a new visitor)."""
    page.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
    expect(page.locator('[data-testid="stMainBlockContainer"] h1')).to_have_text(HEADINGS[title], timeout=60_000)
    wait_idle(page)


def _ask(page, question: str):
    box = page.locator('[data-testid="stChatInput"] textarea')
    expect(box).to_be_enabled(timeout=TIMEOUT)
    box.fill(question)
    box.press("Enter")
    reply = page.locator('[data-testid="stChatMessage"]').nth(1)
    expect(reply).to_be_visible(timeout=60_000)
    wait_idle(page, timeout=60_000)
    return reply


def test_two_visitors_do_not_see_each_others_upload(demo_url, visitor):
    alice, bob = visitor(), visitor()

    # the first visit also embeds the shared samples: on a busy machine that alone can take over 30 s
    open_page(alice, demo_url, "library", idle_timeout=180_000)
    main = _main(alice)
    for title in SAMPLES:
        expect(main.get_by_text(title, exact=True)).to_be_visible()
    expect(main.get_by_text(SAMPLE_LABEL)).to_have_count(len(SAMPLES))
    expect(main.get_by_role("button", name=re.compile("Delete"))).to_have_count(0)
    upload(alice, str(NOTE))
    expect(main.get_by_text(re.compile(r"Added eu_capitals\.md"))).to_be_visible(timeout=TIMEOUT)
    wait_idle(alice)
    expect(main.get_by_text(NOTE_TITLE, exact=True)).to_be_visible()
    expect(main.get_by_role("button", name=re.compile("Delete"))).to_have_count(1)  # her own document only
    expect(main.get_by_text(re.compile(r"Your demo space:\W*1 of 10 documents, 1 KB of 50 MB used"))).to_be_visible()
    if SCREENSHOTS:
        screenshot(alice, SCREENSHOTS / "demo_library.png", height=1000)

    # Bob, in his own browser context, sees the samples but not Alice's upload ...
    open_page(bob, demo_url, "library")
    main_b = _main(bob)
    for title in SAMPLES:
        expect(main_b.get_by_text(title, exact=True)).to_be_visible()
    assert main_b.get_by_text(NOTE_TITLE).count() == 0
    expect(main_b.get_by_text(re.compile(r"Your demo space:\W*0 of 10 documents"))).to_be_visible()

    # ... and his answers never cite it, while hers do.
    _go(bob, "Chat")
    expect(_main(bob).get_by_text(re.compile(r"^Public demo:\W*the files you add are private.*\(quotes only\)"))
           ).to_be_visible()
    reply_b = _ask(bob, "What is the capital of Belgium?")
    assert NOTE_TITLE not in reply_b.inner_text() and "Brussels" not in reply_b.inner_text()

    _go(alice, "Chat")
    reply_a = _ask(alice, "What is the capital of Belgium?")
    expect(reply_a).to_contain_text("Brussels")
    expect(reply_a.locator('[class*="st-key-source_card_"]').first).to_contain_text(NOTE_TITLE)
    if SCREENSHOTS:
        screenshot(alice, SCREENSHOTS / "demo_chat.png", height=1000)

    # Bob's library still does not list it after Alice asked (nothing leaks through the shared server state).
    _go(bob, "Library")
    assert _main(bob).get_by_text(NOTE_TITLE).count() == 0
