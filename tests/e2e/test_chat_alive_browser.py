"""The living chat in a real browser: the stages of a reply, Stop, asking while files are added, a reload keeping the
conversation and the settings, Markdown export, a second app on a busy library, and the phone sidebar.

One app (on a library holding one PDF, added with the CLI before it starts) and one scripted Ollama for the module.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import pytest
from e2e_helpers import MODEL, open_page, running_app, settle, upload, wait_idle
from ollama_server import OllamaServer, Reply
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PDF = ROOT / "tests" / "fixtures" / "documents" / "pdf_text_multicolumn_3-pages.pdf"  # page 3: EU capitals
SCREENSHOTS = Path(os.environ["DOCCHAT_SCREENSHOTS"]) if os.environ.get("DOCCHAT_SCREENSHOTS") else None
BELGIUM = "The capital of Belgium is Brussels [1]. Belgium has a population of 11.5 million [1]."
MESSAGES = '[data-testid="stChatMessage"]'
INPUT = '[data-testid="stChatInput"] textarea'


class Answers:
    """Rewrites follow-ups to themselves; answers from a queue the tests fill, else with the Belgium reply."""

    def __init__(self) -> None:
        self.queue: deque[Reply] = deque()

    def __call__(self, body: dict) -> Reply:
        messages = body.get("messages", [])
        system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
        if system.startswith("You rewrite"):
            user = str(next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""))
            m = re.search(r"Latest message: (.*)\n", user)
            return Reply(m.group(1) if m else user)
        return self.queue.popleft() if self.queue else Reply(BELGIUM, delay_between=0.02)


@pytest.fixture(scope="module")
def llm():
    """This module's scripted Ollama (its own, so `cut_streams` counts only these tests' streams)."""
    answers = Answers()
    with OllamaServer(models=[MODEL], default=answers) as srv:
        srv.answers = answers
        yield srv


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A library holding the 3-page PDF, added with the CLI (the app starts on it)."""
    data = tmp_path_factory.mktemp("alive") / "data"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "rag_core", "ingest", "--data-dir", str(data), str(PDF)], cwd=ROOT,
                   env=env, check=True, capture_output=True, timeout=120)
    return data


@pytest.fixture(scope="module")
def url(data_dir, llm, chromium_path):
    """One DocChat server for this module."""
    with running_app(data_dir, llm.url) as u:
        yield u


@pytest.fixture
def tab(browser, url):
    """A fresh browser tab (a new Streamlit session) at a desktop size."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()


def _main(page):
    return page.locator('[data-testid="stMainBlockContainer"]')


def _ask(page, question: str) -> None:
    box = page.locator(INPUT)
    expect(box).to_be_enabled()
    box.fill(question)
    box.press("Enter")


def _search_ready(page, url: str) -> None:
    """Ask once and wait for the reply, so the embedding model is loaded before a test times anything."""
    open_page(page, url, "")
    _ask(page, "What is the capital of Belgium?")
    expect(page.locator(MESSAGES).last).to_contain_text("11.5 million", timeout=60_000)
    wait_idle(page)


def _watch(page, locator, until: str, timeout: float = 30) -> list[tuple[float, str]]:
    """Sample a locator's text every 50 ms until it contains `until`: [(seconds since start, text)] per change."""
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        text = locator.inner_text() if locator.count() else ""
        if not seen or text != seen[-1][1]:
            seen.append((time.monotonic() - start, text))
        if until in text:
            return seen
        page.wait_for_timeout(50)
    raise AssertionError(f"never saw {until!r}; last: {seen[-1:]!r}")


def _first(seen: list[tuple[float, str]], pattern: str) -> float:
    """When a pattern first showed up in the samples."""
    for t, text in seen:
        if re.search(pattern, text):
            return t
    raise AssertionError(f"{pattern!r} never showed: {[s for _, s in seen]!r}")


# -- 1. stages -------------------------------------------------------------------------------------------------
def test_a_reply_shows_its_stages_and_its_sources_before_the_first_word(tab, url, llm):
    _search_ready(tab, url)
    llm.answers.queue.append(Reply(BELGIUM, delay_first=3.0, delay_between=0.1))
    _ask(tab, "Which city is the capital of Belgium?")
    reply = tab.locator(MESSAGES).nth(3)
    seen = _watch(tab, reply, "Sources")
    waiting = _first(seen, r"Read \d+ passages?; waiting for the model's first word…")
    counting = _first(seen, r"waiting for the model's first word… [2-9] s")
    found = _first(seen, r"Found \d+ passages?")
    first_word = _first(seen, r"The capital")
    done = _first(seen, r"Sources")
    print(f"\nstages: waiting {waiting:.2f} s, counting {counting:.2f} s, found {found:.2f} s, "
          f"first word {first_word:.2f} s, sources {done:.2f} s")
    assert waiting < 1.5, "the waiting stage must show at once"
    assert 1.8 <= counting - waiting, "the seconds count only after about 2 s"
    assert found < first_word, "the found passages come before the first word"
    assert counting < first_word < done
    wrote = [s for t, s in seen if first_word <= t < done]
    assert any("Brussels" in s and "11.5" not in s for s in wrote), "the text streams in"
    wait_idle(tab)
    right = reply.locator('[data-testid="stColumn"]').nth(1)
    expect(right.locator('[class*="st-key-source_card_"]').first).to_contain_text(re.compile(r"pages? (2–)?3"))
    expect(reply).not_to_contain_text("Found")
    expect(reply).not_to_contain_text("waiting for the model")


# -- 2. Stop ---------------------------------------------------------------------------------------------------
def _sentences_shown(text: str) -> int:
    found = re.findall(r"Sentence (\d+) is", text)
    return int(found[-1]) if found else 0


def test_stop_ends_the_reply_at_once_keeps_the_partial_answer_and_closes_the_stream(tab, url, llm):
    open_page(tab, url, "")
    cut_before = llm.cut_streams
    llm.answers.queue.append(Reply(" ".join(f"Sentence {i} is short [1]." for i in range(1, 301)),
                                   delay_between=0.05))
    before = tab.locator(MESSAGES).count()
    _ask(tab, "Tell me everything about Belgium")
    reply = tab.locator(MESSAGES).nth(before + 1)
    expect(reply).to_contain_text("Sentence 5 is", timeout=30_000)
    reply.get_by_role("button", name=re.compile("Stop")).click()
    clicked = time.monotonic()
    last_growth, shown = 0.0, _sentences_shown(reply.inner_text())
    while time.monotonic() - clicked < 3:  # watch the text for 3 s after the click
        now = _sentences_shown(reply.inner_text())
        if now != shown:
            last_growth, shown = time.monotonic() - clicked, now
        tab.wait_for_timeout(50)
    expect(reply).to_contain_text(re.compile("stopped (this answer )?before it finished"))
    marked = time.monotonic() - clicked
    wait_idle(tab)
    print(f"\nstop: text last grew {last_growth:.2f} s after the click; {shown} of 300 sentences kept; "
          f"stream cut: {llm.cut_streams - cut_before}")
    assert last_growth < 1.5, "the text must stop growing at once"
    assert 5 <= _sentences_shown(reply.inner_text()) < 300
    assert marked < 5
    expect(reply.locator('[data-testid="stAlertContentWarning"]')).to_contain_text("stopped")
    expect(reply.get_by_role("button", name=re.compile("Stop"))).to_have_count(0)
    expect(tab.locator(INPUT)).to_be_enabled()
    assert llm.cut_streams == cut_before + 1, "the HTTP stream to Ollama must be closed"
    _ask(tab, "What is the capital of Belgium?")
    answer = tab.locator(MESSAGES).nth(before + 3)
    expect(answer).to_contain_text("Sources", timeout=30_000)
    expect(answer).to_contain_text("Brussels")
    expect(reply).to_contain_text("stopped")
