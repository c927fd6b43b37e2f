"""The living chat in a real browser: the stages of a reply, Stop, asking while files are added, a reload keeping the
conversation and the settings, Markdown export, a second app on a busy library, and the phone sidebar.

The shared local app (tests/e2e/conftest.py), its library holding the 3-page PDF (added through the Library page
unless an earlier test added it), and the shared scripted Ollama answering this module's way while it runs.
"""
from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from pathlib import Path

import pytest
from e2e_helpers import ensure_in_library, open_page, running_app, settle, upload, wait_idle
from ollama_server import Reply
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PDF = "pdf_text_multicolumn_3-pages.pdf"  # in tests/fixtures/documents; page 3: EU capitals
SCREENSHOTS = Path(os.environ["DOCCHAT_SCREENSHOTS"]) if os.environ.get("DOCCHAT_SCREENSHOTS") else None
BELGIUM = "The capital of Belgium is Brussels [1]. Belgium has a population of 11.5 million [1]."
MESSAGES = '[data-testid="stChatMessage"]'
STATE_TIMEOUT = 120_000  # ms: the most a test waits for a state the app reaches in seconds (a busy machine is slow)
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
def llm(ollama):
    """The shared scripted Ollama answering with this module's `Answers` while the module runs (the browser tests
    run one at a time, so `cut_streams` counts only this test's streams)."""
    answers = Answers()
    saved = ollama.default, ollama.answers
    ollama.default = ollama.answers = answers
    yield ollama
    ollama.default, ollama.answers = saved


@pytest.fixture(scope="module")
def data_dir(app_data_dir) -> Path:
    """The shared app's data folder (a second app on it finds the library in use)."""
    return app_data_dir


@pytest.fixture(scope="module")
def url(app_url, llm, browser):
    """The shared app with the 3-page PDF in its library, asked once so its embedding model is loaded before any
    test times it."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        ensure_in_library(page, app_url, PDF)
        open_page(page, app_url, "")
        _ask(page, "What is the capital of Belgium?")
        expect(page.locator(MESSAGES).last).to_contain_text("Sources", timeout=90_000)
        wait_idle(page)
    finally:
        page.close()
    return app_url


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where screenshots go: $DOCCHAT_SCREENSHOTS when set, else the test's temp folder."""
    return SCREENSHOTS or tmp_path


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


def _watch(page, locator, until: str, timeout: float = 30) -> list[tuple[float, str, float]]:
    """Sample a locator's text every 50 ms until it contains `until`: per change, (seconds since start when it was
    seen, text, seconds since start of the sample before, when it was not there yet)."""
    seen: list[tuple[float, str, float]] = []
    start = before = time.monotonic()
    while time.monotonic() - start < timeout:
        text = locator.inner_text() if locator.count() else ""
        now = time.monotonic()
        if not seen or text != seen[-1][1]:
            seen.append((now - start, text, before - start))
        if until in text:
            return seen
        before = now
        page.wait_for_timeout(50)
    raise AssertionError(f"never saw {until!r}; last: {seen[-1:]!r}")


def _first(seen: list[tuple[float, str, float]], pattern: str, earliest: bool = False) -> float:
    """When a pattern first showed up in the samples (`earliest`: the sample before, the soonest it can have come:
    on a busy machine a sample may be taken well after the page changed)."""
    for t, text, before in seen:
        if re.search(pattern, text):
            return before if earliest else t
    raise AssertionError(f"{pattern!r} never showed: {[s for _, s, _ in seen]!r}")


# -- 1. stages -------------------------------------------------------------------------------------------------
def test_a_reply_shows_its_stages_and_its_sources_before_the_first_word(tab, url, llm):
    open_page(tab, url, "")
    before = tab.locator(MESSAGES).count()
    llm.answers.queue.append(Reply(BELGIUM, delay_first=3.0, delay_between=0.1))
    _ask(tab, "Which city is the capital of Belgium?")
    reply = tab.locator(MESSAGES).nth(before + 1)
    seen = _watch(tab, reply, "Sources")
    waiting = _first(seen, r"Read \d+ passages?; waiting for the model's first word…")
    counting = _first(seen, r"waiting for the model's first word… [2-9] s")
    found = _first(seen, r"Found \d+ passages?")
    first_word = _first(seen, r"The capital")
    done = _first(seen, r"Sources")
    print(f"\nstages: waiting {waiting:.2f} s, counting {counting:.2f} s, found {found:.2f} s, "
          f"first word {first_word:.2f} s, sources {done:.2f} s")
    assert waiting < 1.5, "the waiting stage must show at once"
    # the seconds count only after about 2 s of waiting: measured from the soonest the waiting stage can have come
    assert counting - _first(seen, r"Read \d+ passages?; waiting for the model's first word…", earliest=True) >= 1.8, \
        "the seconds count only after about 2 s"
    assert found < first_word, "the found passages come before the first word"
    assert counting < first_word < done
    wrote = [s for t, s, _ in seen if first_word <= t < done]
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
    peak = shown
    while time.monotonic() - clicked < 3:  # watch the text for 3 s after the click
        now = _sentences_shown(reply.inner_text())
        if now > shown:
            last_growth = time.monotonic() - clicked
        shown, peak = now, max(peak, now)
        tab.wait_for_timeout(50)
    expect(reply).to_contain_text(re.compile("stopped (this answer )?before it finished"))
    marked = time.monotonic() - clicked
    wait_idle(tab)
    print(f"\nstop: text last grew {last_growth:.2f} s after the click; {shown} of 300 sentences kept; "
          f"stream cut: {llm.cut_streams - cut_before}")
    assert last_growth < 1.5, "the text must stop growing at once"
    # The draft reached sentence 5 and stopped there; these sentences are not in the document, so the checked
    # reply keeps none of them as its answer (closest quotes instead, the draft under Details).
    assert 5 <= peak < 300
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


# -- 3. asking while files are added ---------------------------------------------------------------------------
class UntilSet(Reply):
    """A reply that keeps writing until `done` is set, then ends with "That is all.": its first piece already says
    "Still writing (part 1).", then a numbered part every 2 s (up to 10 minutes: an upload may take minutes on a
    slow CPU)."""

    def __init__(self, done: threading.Event, limit_s: float = 600) -> None:
        super().__init__(text="", delay_between=2.0)
        self.done, self.limit_s = done, limit_s

    def deltas(self):  # the server iterates it lazily and takes len() at the end
        return _Pieces(self.done, self.limit_s)


class _Pieces:
    def __init__(self, done: threading.Event, limit_s: float) -> None:
        self.done, self.limit_s, self.count = done, limit_s, 0

    def __iter__(self):
        start = time.monotonic()
        self.count = 1
        yield "The capital of Belgium is Brussels [1]. Still writing (part 1)."
        while not self.done.is_set() and time.monotonic() - start < self.limit_s:
            self.count += 1
            yield f" Still writing (part {self.count})."  # numbered: the same sentence over and over is a loop
        yield " That is all."

    def __len__(self) -> int:
        return self.count + 1


def _parts_written(text: str) -> int:
    """The number of the last "Still writing (part N)" shown."""
    found = re.findall(r"Still writing \(part (\d+)\)", text)
    return int(found[-1]) if found else 0


def _big_text(paragraphs: int) -> bytes:
    """Distinct sentences enough for a few dozen passages (embedding them takes a while on a CPU)."""
    words = ["river", "mountain", "harbour", "lantern", "orchard", "meadow", "violin", "copper", "glacier", "tunnel"]
    return "\n\n".join(f"Paragraph {i}. The {words[i % 10]} of district {i} holds {i * 7} {words[(i * 3) % 10]}s "
                        f"and a {words[(i * 7) % 10]} near the old {words[(i + 5) % 10]}."
                        for i in range(paragraphs)).encode()


def test_asking_while_a_file_is_added_answers_from_the_library_and_refreshes_after(browser, tab, url, llm):
    name = "harbour-notes.txt"
    open_page(tab, url, "")
    before = tab.locator(MESSAGES).count()
    library = browser.new_page(viewport={"width": 1400, "height": 1000})  # a second tab adds the file
    try:
        open_page(library, url, "library")
        upload(library, {"name": name, "mimeType": "text/plain", "buffer": _big_text(600)})
        adding = _main(library).get_by_text(re.compile(rf"Adding.*{re.escape(name)}")).first
        expect(adding).to_be_visible(timeout=STATE_TIMEOUT)
        started = time.monotonic()

        done = threading.Event()
        llm.answers.queue.append(UntilSet(done))
        _ask(tab, "What is the capital of Belgium?")  # at once, while the file is being added
        reply = tab.locator(MESSAGES).nth(before + 1)
        note = _main(tab).get_by_text(f"Still adding “{name}”; answers use the documents already in your library.")
        expect(note).to_be_visible(timeout=STATE_TIMEOUT)
        # The question waits for the embedder once: the upload's current batch (8 passages) and then its own encode;
        # the reply's first piece already says "Still writing", so the upload (dozens of passages) is still going.
        expect(reply).to_contain_text("Still writing", timeout=150_000)
        asked = time.monotonic() - started
        expect(tab.locator(INPUT)).to_be_enabled(timeout=STATE_TIMEOUT)  # the chat stays usable while adding
        expect(adding).to_be_visible()

        expect(_main(library).get_by_text(re.compile(rf"Added {re.escape(name)}"))).to_be_visible(timeout=400_000)
        added = time.monotonic() - started
    finally:
        library.close()
    # No refresh in the middle of a reply: it goes on writing (two more parts, while the page's one-second check of
    # the uploads comes due) and the note stays, though the file is in.
    part = _parts_written(reply.inner_text())
    expect(reply).to_contain_text(f"Still writing (part {part + 2})", timeout=STATE_TIMEOUT)
    expect(note).to_be_visible()
    assert "stopped" not in reply.inner_text()
    done.set()
    expect(reply).to_contain_text("That is all.", timeout=STATE_TIMEOUT)
    expect(reply).to_contain_text("Sources", timeout=STATE_TIMEOUT)
    expect(note).to_have_count(0, timeout=STATE_TIMEOUT)  # the page refreshed once the reply was done
    refreshed = time.monotonic() - started
    wait_idle(tab)
    assert "stopped" not in reply.inner_text()
    expect(reply.locator('[class*="st-key-source_card_"]').first).to_contain_text("Two-Column Document with Lorem Ipsum")
    print(f"\nupload: first words {asked:.1f} s after the file started, file in after {added:.1f} s, "
          f"chat refreshed after {refreshed:.1f} s")


# -- 4. a reload keeps the conversation and the settings ----------------------------------------------------------
def _new_conversation(page) -> None:
    button = page.locator('[data-testid="stSidebar"]').get_by_role("button", name=re.compile("New conversation"))
    if button.is_enabled():
        button.click()
        wait_idle(page)
    expect(page.locator(MESSAGES)).to_have_count(0)


def _k_slider(page):
    """The "passages per answer" slider (key set_k) of the Settings page."""
    return page.get_by_role("slider", name="Passages to read for each question")


def test_a_reload_keeps_the_conversation_and_the_settings(tab, url):
    open_page(tab, url, "")
    _new_conversation(tab)
    _ask(tab, "Which city is the capital of Belgium, please?")
    expect(tab.locator(MESSAGES).nth(1)).to_contain_text("Sources", timeout=30_000)
    wait_idle(tab)
    start = time.monotonic()
    tab.reload()
    settle(tab)
    messages = tab.locator(MESSAGES)
    expect(messages).to_have_count(2)
    expect(messages.nth(0)).to_contain_text("Which city is the capital of Belgium, please?")
    expect(messages.nth(1)).to_contain_text("The capital of Belgium is Brussels [1].")
    card = messages.nth(1).locator('[class*="st-key-source_card_"]').first
    expect(card).to_contain_text("[1] Two-Column Document with Lorem Ipsum")
    expect(card).to_contain_text(re.compile(r"pages? (2–)?3"))
    reloaded = time.monotonic() - start

    open_page(tab, url, "settings")
    expect(_main(tab)).to_contain_text("Changes here last until you change them again: DocChat keeps them on this "
                                       "computer.")
    slider = _k_slider(tab)
    default = int(slider.input_value())
    try:
        slider.focus()
        slider.press("ArrowRight")
        slider.press("ArrowRight")
        expect(slider).to_have_value(str(default + 2))
        wait_idle(tab)
        tab.reload()
        settle(tab)
        expect(_k_slider(tab)).to_have_value(str(default + 2))
    finally:  # back to the default, so later tests see it (the saved choice is then dropped)
        slider = _k_slider(tab)
        slider.focus()
        for _ in range(int(slider.input_value()) - default):
            slider.press("ArrowLeft")
        wait_idle(tab)
    tab.reload()
    settle(tab)
    expect(_k_slider(tab)).to_have_value(str(default))
    print(f"\nreload: the conversation was back {reloaded:.1f} s after the reload")


# -- 5. export ----------------------------------------------------------------------------------------------------
def test_export_as_markdown_downloads_the_conversation_with_numbered_sources(tab, url):
    open_page(tab, url, "")
    _new_conversation(tab)
    _ask(tab, "What is the capital city of Belgium?")
    expect(tab.locator(MESSAGES).nth(1)).to_contain_text("Sources", timeout=30_000)
    wait_idle(tab)
    sidebar = tab.locator('[data-testid="stSidebar"]')
    sidebar.get_by_role("button", name=re.compile("This conversation")).click()
    button = tab.locator('[data-testid="stPopoverBody"]').get_by_role("button", name=re.compile("Export as Markdown"))
    with tab.expect_download() as info:
        button.click()
    download = info.value
    raw = Path(download.path()).read_text(encoding="utf-8")
    assert download.suggested_filename.endswith(".md")
    assert "\n## What is the capital city of Belgium\\?\n" in raw  # user text is escaped: the file is inert Markdown
    text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", raw)  # what it reads as once rendered (CommonMark escapes)
    assert "\n## What is the capital city of Belgium?\n" in text
    assert "The capital of Belgium is Brussels [1]." in text
    source = re.search(r"^\*\*\[1\]\*\* Two-Column Document with Lorem Ipsum, (pages? [^\n]*)$", text, re.M)
    assert source, text
    assert re.match(r"pages? (2–)?3", source.group(1)), source.group(1)
    quote = text[source.end():].lstrip("\n").splitlines()[0]
    assert quote.startswith("> ") and "Brussels" in quote, quote
    assert "Traceback" not in text


# -- 6. a second app on a library that is in use ----------------------------------------------------------------
def test_a_second_app_on_a_busy_library_says_what_to_do_in_one_sentence(browser, tab, url, data_dir, llm, shots):
    open_page(tab, url, "library")  # this module's app holds the library (the embedded engine's file lock)
    start = time.monotonic()
    with running_app(data_dir, llm.url) as second:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            for path in ("", "library", "settings"):
                open_page(page, second, path)
                main = _main(page)
                error = main.locator('[data-testid="stAlertContentError"]')
                expect(error).to_have_count(1)
                expect(error).to_contain_text("The document library is in use by another DocChat")
                expect(error).to_contain_text("close that one, then try again")
                expect(main.locator('[data-testid="stExpander"]')).to_have_count(1)  # the technical part, folded
                body = page.inner_text("body")
                assert "Traceback" not in body and 'File "' not in body, body
                assert str(data_dir) not in body and str(ROOT) not in body, body
                assert page.locator('[data-testid="stException"]').count() == 0
                expect(page.locator(INPUT)).to_have_count(0)  # nothing half-drawn below the sentence
                page.screenshot(path=str(shots / f"library-busy-{path or 'chat'}.png"))
        finally:
            page.close()
    print(f"\nbusy: second app started and showed its sentence on 3 pages in {time.monotonic() - start:.1f} s")
    open_page(tab, url, "")  # the first app is unaffected
    expect(tab.locator(INPUT)).to_be_enabled()


# -- 7. phone --------------------------------------------------------------------------------------------------
def _sidebar_open(page) -> bool:
    box = page.locator('[data-testid="stSidebar"]').bounding_box()
    return bool(box and box["width"] > 0 and box["x"] + box["width"] > 0)


# A phone as the browser presents itself: a phone's user agent, touch, and a 390 x 844 screen.
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "is_mobile": True, "has_touch": True,
         "user_agent": "Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) "
                       "Chrome/140.0.0.0 Mobile Safari/537.36"}


def test_on_a_phone_choosing_a_page_closes_the_sidebar(browser, url, shots):
    ctx = browser.new_context(**PHONE)
    try:
        page = ctx.new_page()
        open_page(page, url, "")
        assert not _sidebar_open(page), "on a phone the sidebar starts closed"
        for target, heading in (("Library", "Your library"), ("Settings", "Settings"), ("Chat", "Chat with")):
            page.locator('[data-testid="stExpandSidebarButton"]').click()
            nav = page.locator('[data-testid="stSidebarNav"]')
            expect(nav).to_be_in_viewport()
            page.wait_for_timeout(400)  # the slide-in animation
            assert _sidebar_open(page)
            page.screenshot(path=str(shots / f"phone-sidebar-{target.lower()}.png"))
            nav.get_by_text(target, exact=True).click()
            expect(_main(page).locator("h1")).to_contain_text(heading)
            wait_idle(page)
            page.wait_for_timeout(400)
            assert not _sidebar_open(page), f"the sidebar stayed open after choosing {target}"
            page.screenshot(path=str(shots / f"phone-{target.lower()}.png"))
    finally:
        ctx.close()


def test_on_a_phone_the_page_picture_shows_the_cited_words_large(browser, url, shots):
    """Issue 28: "Show on the page" drew the cited table row 236 px wide on a 390-px screen, letters about 5 px
    tall; it now shows the cited cells enlarged, as wide as the column, and "Whole passage" brings back the rest."""
    ctx = browser.new_context(**PHONE)
    try:
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        open_page(page, url, "")
        _ask(page, "What is the population of Belgium?")
        reply = page.locator(MESSAGES).nth(1)
        card = reply.locator('[class*="st-key-source_card_"]').first
        expect(card).to_contain_text("[1] Two-Column Document with Lorem Ipsum", timeout=STATE_TIMEOUT)
        card.get_by_text("Show on the page").click()
        img = card.locator("img")
        expect(img).to_be_visible(timeout=STATE_TIMEOUT)
        expect(card).to_contain_text("the cited words, enlarged")
        wait_idle(page)
        img.scroll_into_view_if_needed()
        box = img.bounding_box()
        natural = img.evaluate("i => [i.naturalWidth, i.naturalHeight]")
        page.screenshot(path=str(shots / "phone-page-picture.png"))
        column = card.locator('[data-testid="stExpanderDetails"]').bounding_box()
        assert box and column and box["width"] >= 0.85 * (column["width"] - 32), (box, column)  # as wide as it can be
        # The cited row, across the page, comes in strips one under the other (taller than a thin strip of row),
        # drawn large, so the browser shrinks it rather than blurs it up.
        assert natural[0] >= 900 and natural[1] > 0.6 * natural[0], natural
        card.get_by_text("Whole passage").click()
        expect(card).to_contain_text("the passage is highlighted", timeout=STATE_TIMEOUT)
        wait_idle(page)
        page.screenshot(path=str(shots / "phone-page-picture-whole.png"))
        print(f"\nphone page picture: shown {box['width']:.0f}x{box['height']:.0f} px, drawn {natural[0]}x{natural[1]}")
    finally:
        ctx.close()
