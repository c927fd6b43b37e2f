"""DocChat in a real browser: drag-and-drop uploads, friendly failures, inert hostile documents, and a streamed
answer with its [1] source beside it on the right page. One app server and one browser for the whole file."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from e2e_helpers import INGEST_TIMEOUT, drop_files, ensure_in_library, open_page, screenshot, upload, wait_idle
from ollama_server import Reply
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "documents"
PDF = "pdf_text_multicolumn_3-pages.pdf"  # page 3 holds a table of EU countries and capitals
DOCX = "docx_headings_toc.docx"
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
SCREENSHOTS = Path(os.environ["DOCCHAT_SCREENSHOTS"]) if os.environ.get("DOCCHAT_SCREENSHOTS") else None


def _main(page):
    return page.locator('[data-testid="stMainBlockContainer"]')


def _ask(page, question: str) -> None:
    box = page.locator('[data-testid="stChatInput"] textarea')
    expect(box).to_be_enabled(timeout=INGEST_TIMEOUT)
    box.fill(question)
    box.press("Enter")


def test_drop_two_files_shows_both_results(page, app_url):
    open_page(page, app_url, "library")  # the first visit of a fresh server, straight to a sub-page
    nav = page.locator('[data-testid="stSidebarNav"]')
    expect(nav.get_by_text("Library", exact=True)).to_be_visible()
    assert nav.get_by_text("app", exact=True).count() == 0  # not Streamlit's old pages/ folder navigation
    drop_files(page, [(PDF, (DOCS / PDF).read_bytes(), "application/pdf"),
                      (DOCX, (DOCS / DOCX).read_bytes(), DOCX_MIME)])
    main = _main(page)
    # Progress first (per-file status boxes), then one result per file.
    expect(main.locator('[data-testid="stExpander"]').first).to_be_visible()
    expect(main.get_by_text(re.compile(r"Added pdf_text_multicolumn_3-pages\.pdf — 3 pages, \d+ passages"))
           ).to_be_visible(timeout=INGEST_TIMEOUT)
    expect(main.get_by_text(re.compile(r"Added docx_headings_toc\.docx — \d+ passages?"))).to_be_visible(
        timeout=INGEST_TIMEOUT)
    wait_idle(page)
    # Both now appear in the document list by their own titles (issue 28), with file name, kind and size.
    expect(main.get_by_text("Two-Column Document with Lorem Ipsum", exact=True)).to_be_visible()
    expect(main.get_by_text("Beautiful is better than ugly.", exact=True)).to_be_visible()
    expect(main.get_by_text(re.compile(r"^pdf_text_multicolumn_3-pages\.pdf · PDF · 3 pages · \d+ passages · added "))
           ).to_be_visible()
    expect(main.get_by_text(re.compile(r"^docx_headings_toc\.docx · Word · \d+ passages? · added "))).to_be_visible()
    if SCREENSHOTS:
        screenshot(page, SCREENSHOTS / "library.png", height=900)


def test_encrypted_pdf_shows_friendly_message(page, app_url):
    open_page(page, app_url, "library")
    upload(page, str(DOCS / "pdf_encrypted_user-password.pdf"))
    main = _main(page)
    expect(main.get_by_text("Could not add pdf_encrypted_user-password.pdf")).to_be_visible(timeout=INGEST_TIMEOUT)
    err = main.locator('[data-testid="stAlertContentError"]').filter(has_text="password-protected")
    expect(err).to_be_visible()
    expect(err).to_contain_text("save a copy without a password")
    assert "Traceback" not in main.inner_text()


def test_hostile_document_renders_inert(page, app_url, ollama):
    tracker = f"{ollama.url}/tracker.png"
    hostile = (  # everything within the quoted context around the cited sentence
        "# Notes <script>window.__pwned = 1</script>\n\n"
        ":red[red] and $x^2$ text. Visit https://evil.example/steal now. [Click here](javascript:window.__pwned=3). "
        "The zebra budget is 42 dollars for the whole year of the project. "
        f'<img src="{tracker}?html" onerror="window.__pwned = 2"> and ![tracker]({tracker}?md)\n'
    ).encode()
    open_page(page, app_url, "library")
    upload(page, {"name": "notes <b>bold</b>.md", "mimeType": "text/markdown", "buffer": hostile})
    main = _main(page)
    expect(main.get_by_text(re.compile(r"Added notes <b>bold</b>\.md"))).to_be_visible(timeout=INGEST_TIMEOUT)
    wait_idle(page)
    # The title is shown as the literal text, tags and all.
    expect(main.get_by_text("Notes <script>window.__pwned = 1</script>", exact=True)).to_be_visible()

    open_page(page, app_url, "")
    _ask(page, "What is the zebra budget?")
    reply = page.locator('[data-testid="stChatMessage"]').last
    expect(reply).to_contain_text("The zebra budget is 42 dollars", timeout=30_000)
    wait_idle(page)
    # The quoted passage beside the reply shows the markup as text (bare URLs carry an invisible word joiner) ...
    shown = reply.inner_text().replace("\u2060", "")
    assert f'<img src="{tracker}?html" onerror="window.__pwned = 2">' in shown
    assert "[Click here](javascript:window.__pwned=3)" in shown
    assert ":red[red] and $x^2$ text. Visit https://evil.example/steal now." in shown
    assert f"![tracker]({tracker}?md)" in shown
    # ... and nothing of it became live: no script ran, no image or javascript: link exists, nothing was fetched.
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator('img[src*="tracker"]').count() == 0
    assert page.locator('a[href^="javascript:"]').count() == 0
    assert page.locator('a[href*="evil.example"]').count() == 0  # not even a bare URL became a link
    assert page.locator('[data-testid="stMainBlockContainer"] script').count() == 0
    assert not [r for r in ollama.requests if r.path.startswith("/tracker")]


def test_streamed_reply_with_citation_beside_it_on_the_right_page(page, app_url, ollama):
    ensure_in_library(page, app_url, PDF)
    open_page(page, app_url, "")
    before = len(ollama.answers.source1_pages)
    _ask(page, "What is the capital of Belgium?")
    reply = page.locator('[data-testid="stChatMessage"]').last
    left = reply.locator('[data-testid="stColumn"]').first
    # The reply streams: we see part of it before the whole of it.
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = left.inner_text() if left.count() else ""
        if text and (not seen or text != seen[-1]):
            seen.append(text)
        if "11.5 million" in text:
            break
        time.sleep(0.03)
    full = "The capital of Belgium is Brussels [1]. Its population is about 11.5 million [1]."
    assert any("Brussels" in s and "11.5" not in s for s in seen), f"no partial reply seen: {seen!r}"
    wait_idle(page)
    expect(left).to_contain_text(full)

    # Its source is beside it (the second column of the same message) with [1], title and the page of source 1.
    assert len(ollama.answers.source1_pages) > before
    pages = ollama.answers.source1_pages[-1]  # what the model was told about source [1]: "3" or "2-3"
    assert pages and pages.split("-")[-1] == "3", f"source [1] should hold the table on page 3, got {pages}"
    where = f"page {pages}" if "-" not in pages else "pages {}–{}".format(*pages.split("-"))
    right = reply.locator('[data-testid="stColumn"]').nth(1)
    expect(right).to_contain_text("Sources")
    card = right.locator('[class*="st-key-source_card_"]').first
    expect(card).to_contain_text("[1] Two-Column Document with Lorem Ipsum")
    expect(card).to_contain_text(where)
    # The cited sentence (here the table row) is highlighted inside the quoted passage.
    expect(card.locator("strong").filter(has_text="Brussels")).to_contain_text("Belgium | 11.5")
    assert left.bounding_box()["x"] < right.bounding_box()["x"], "sources must sit beside the reply"

    # The PDF page itself, drawn with the passage highlighted: page 3, where the cited row is.
    card.get_by_text("Show on the page").click()
    img = card.locator("img")
    expect(img).to_be_visible(timeout=30_000)
    expect(card).to_contain_text("Page 3")
    assert img.evaluate("i => i.naturalWidth") > 400
    wait_idle(page)
    if SCREENSHOTS:
        screenshot(page, SCREENSHOTS / "chat.png", height=1250)


def test_a_new_question_while_answering_keeps_the_partial_reply(page, app_url):
    ensure_in_library(page, app_url, PDF)
    open_page(page, app_url, "")
    _ask(page, "Tell me slowly about the capital of Belgium")
    first = page.locator('[data-testid="stChatMessage"]').nth(1)
    expect(first).to_contain_text("Brussels is the capital of Belgium", timeout=30_000)
    box = page.locator('[data-testid="stChatInput"] textarea')
    box.fill("What is the capital of Belgium?")
    box.press("Enter")  # interrupts the first answer
    messages = page.locator('[data-testid="stChatMessage"]')
    expect(messages).to_have_count(4, timeout=30_000)
    expect(messages.nth(3)).to_contain_text("11.5 million", timeout=30_000)
    wait_idle(page)
    # The interrupted reply stays in the conversation, in its place, marked as cut short.
    expect(messages.nth(0)).to_contain_text("Tell me slowly")
    expect(messages.nth(1)).to_contain_text("Brussels is the capital of Belgium")
    expect(messages.nth(1)).to_contain_text("stopped before it finished")
    expect(messages.nth(2)).to_contain_text("What is the capital of Belgium?")


# A true sentence and an injected one, both citing [1]; the injected one carries every bare-link form, and the
# stream cuts them where a per-piece escape would miss them ("ww" | "w.", "https:" | "//", "me@" | "evil").
MIXED_PIECES = ["The capital of Belgium is Brussels [1]. ", "For the full list of capitals see ww",
                "w.evil.example or https:", "//evil.example/steal or write to me@", "evil.example [1]."]
LIVE_LINKS = 'a[href*="evil"], a[href^="mailto:"]'


def test_streamed_links_stay_text_and_a_mixed_reply_is_marked(page, app_url, ollama):
    ensure_in_library(page, app_url, PDF)
    open_page(page, app_url, "")
    ollama.script(Reply("".join(MIXED_PIECES), chunks=MIXED_PIECES, delay_first=0.2, delay_between=0.5))
    _ask(page, "What is the capital of Belgium?")
    reply = page.locator('[data-testid="stChatMessage"]').last
    left = reply.locator('[data-testid="stColumn"]').first
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # while it streams, not one bare link may become a live link
        assert page.locator(LIVE_LINKS).count() == 0, seen[-1:]
        text = (left.inner_text() if left.count() else "").replace("\u2060", "")
        if text and (not seen or text != seen[-1]):
            seen.append(text)
        if "me@evil.example [1]" in text:
            break
        time.sleep(0.03)
    assert any("see www.evil.example or https:" in s and "steal" not in s for s in seen), seen  # seen mid-stream
    wait_idle(page)
    assert page.locator(LIVE_LINKS).count() == 0  # nor in the final render
    assert page.locator('[data-testid="stMainBlockContainer"] a').filter(has_text="evil").count() == 0
    shown = left.inner_text().replace("\u2060", "")
    assert "see www.evil.example or https://evil.example/steal or write to me@evil.example [1]." in shown
    # The [1] markers are still bold, the injected sentence is marked, and the reply says so.
    expect(left.locator("strong").filter(has_text=re.compile(r"^\[1\]$"))).to_have_count(2)
    expect(left.locator("span.stMarkdownBadge").filter(has_text="not backed by the cited passage")).to_have_count(1)
    assert ":orange-badge" not in shown
    expect(left).to_contain_text("One sentence in this reply is not backed by the cited passage; it is marked.")
    card = reply.locator('[class*="st-key-source_card_"]').first
    expect(card).to_contain_text("not every sentence that cites it")  # [1] is not shown as simply verified
    assert "Traceback" not in page.inner_text("body")
    if SCREENSHOTS:
        screenshot(page, SCREENSHOTS / "mixed_reply.png", height=1000)


def test_an_enormous_pdf_page_is_drawn_small_and_never_shows_a_traceback(page, app_url, ollama):
    import pymupdf

    doc = pymupdf.open()
    big = doc.new_page(width=11000, height=11000)  # MuPDF refuses to draw this at 2x: "Overly large image"
    big.insert_text((500, 500), "The giant walrus poster welcomes every visitor to the harbour.", fontsize=60)
    open_page(page, app_url, "library")
    upload(page, {"name": "poster.pdf", "mimeType": "application/pdf", "buffer": doc.tobytes()})
    # its own result line (not "Added.*poster", which the box holding an earlier "Added …" and "Adding poster…" has)
    expect(_main(page).get_by_text(re.compile(r"Added poster\.pdf —|poster\.pdf is already in your library"))
           ).to_be_visible(timeout=INGEST_TIMEOUT)
    open_page(page, app_url, "")
    ollama.script(Reply("The giant walrus poster welcomes every visitor to the harbour [1]."))
    _ask(page, "What does the giant walrus poster say?")
    reply = page.locator('[data-testid="stChatMessage"]').last
    card = reply.locator('[class*="st-key-source_card_"]').first
    expect(card).to_contain_text("poster", timeout=30_000)
    wait_idle(page)
    card.get_by_text("Show on the page").click()
    img = card.locator("img")
    expect(img).to_be_visible(timeout=30_000)
    assert img.evaluate("i => i.naturalWidth * i.naturalHeight") <= 4_000_000  # capped, whatever the page size
    wait_idle(page)
    body = page.inner_text("body")
    assert "Traceback" not in body and "FzError" not in body and "Overly large" not in body
    expect(page.locator('[data-testid="stChatInput"] textarea')).to_be_enabled()
