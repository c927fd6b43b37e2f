"""A PowerPoint and an Excel workbook dropped on the Library page, then asked about in the chat: each reply's source
says where it is in the file's own words ("slide 3", "sheet Budget") and quotes the line or the whole row.

The shared local app (tests/e2e/conftest.py) and its scripted Ollama, answering this module's way while it runs: the
reply cites the source whose text holds the fact, whatever number the search gave it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from e2e_helpers import INGEST_TIMEOUT, drop_files, open_page, wait_idle
from ollama_server import Reply
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "documents"
PPTX = "office_slides_table-notes-untitled.pptx"
XLSX = "office_workbook_budget-formula-hidden.xlsx"
PPTX_MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
SOURCE = re.compile(r'<source n="(\d+)"[^>]*>\n(.*?)\n</source>', re.DOTALL)
# The fact each question is about, and the reply that states it (cited as the source that holds the fact).
FACTS = {
    "travel": ("Travel | 12,000 | 3,400", "Of the travel budget of 12,000, 3,400 was spent [{n}]."),
    "pilot": ("the pilot runs in Lyon", "The pilot runs in Lyon [{n}]."),
}


class CitingAnswers:
    """Rewrites follow-ups to themselves; answers a question about a fact citing the source that holds it."""

    def __call__(self, body: dict) -> Reply:
        messages = body.get("messages", [])
        system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
        user = str(next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""))
        if system.startswith("You rewrite"):
            m = re.search(r"Latest message: (.*)\n", user)
            return Reply(m.group(1) if m else user)
        question = user.rsplit("Question:", 1)[-1].lower()
        for topic, (fact, reply) in FACTS.items():
            if topic in question:
                n = next((n for n, text in SOURCE.findall(user) if fact in text), None)
                if n is not None:
                    return Reply(reply.format(n=n), delay_between=0.02)
        return Reply("I couldn't find the answer to this in your documents.")


@pytest.fixture(scope="module")
def llm(ollama):
    """The shared scripted Ollama answering with `CitingAnswers` while this module runs."""
    saved = ollama.default, ollama.answers
    ollama.default = ollama.answers = CitingAnswers()
    yield ollama
    ollama.default, ollama.answers = saved


def _ask(page, question: str):
    """Ask in the chat and return the reply and its source cards once the reply is checked."""
    box = page.locator('[data-testid="stChatInput"] textarea')
    expect(box).to_be_enabled(timeout=INGEST_TIMEOUT)
    box.fill(question)
    box.press("Enter")
    reply = page.locator('[data-testid="stChatMessage"]').last
    right = reply.locator('[data-testid="stColumn"]').nth(1)
    expect(right).to_contain_text("Sources", timeout=90_000)
    wait_idle(page)
    return reply, right.locator('[class*="st-key-source_card_"]')


def test_dropped_slides_and_sheets_are_cited_by_slide_and_sheet(page, app_url, llm):
    open_page(page, app_url, "library")
    drop_files(page, [(PPTX, (DOCS / PPTX).read_bytes(), PPTX_MIME), (XLSX, (DOCS / XLSX).read_bytes(), XLSX_MIME)])
    main = page.locator('[data-testid="stMainBlockContainer"]')
    expect(main.get_by_text(re.compile(r"Added office_slides_table-notes-untitled\.pptx — 4 slides, \d+ passages"))
           ).to_be_visible(timeout=INGEST_TIMEOUT)
    expect(main.get_by_text(re.compile(r"Added office_workbook_budget-formula-hidden\.xlsx — \d+ passages?"))
           ).to_be_visible(timeout=INGEST_TIMEOUT)
    wait_idle(page)
    expect(main.get_by_text(re.compile(r"^(office_slides_table-notes-untitled\.pptx · )?PowerPoint · 4 slides · \d+ passages · added "))).to_be_visible()
    expect(main.get_by_text(re.compile(r"^(office_workbook_budget-formula-hidden\.xlsx · )?Excel · \d+ passages? · added "))).to_be_visible()

    open_page(page, app_url, "")
    reply, cards = _ask(page, "How much of the travel budget was spent?")
    expect(reply).to_contain_text("Of the travel budget of 12,000, 3,400 was spent")
    expect(reply).not_to_contain_text("could not be matched")  # the model's answer, checked against the row
    card = cards.filter(has_text="Aurora budget 2024")  # the cited one (a slide may back the sentence too)
    expect(card).to_have_count(1)
    expect(card).to_contain_text("sheet Budget")
    # The cited row, whole and under its header, is the highlighted quote.
    expect(card.locator("strong").filter(has_text="Travel")).to_contain_text(
        "Travel | 12,000 | 3,400 | Conferences and site visits")
    expect(card).to_contain_text("Item | Budget (EUR) | Spent (EUR) | Notes")

    reply, cards = _ask(page, "Where does the pilot run?")
    expect(reply).to_contain_text("The pilot runs in Lyon")
    expect(reply).not_to_contain_text("could not be matched")
    card = cards.filter(has_text="Lyon")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("Project Aurora quarterly review")
    expect(card).to_contain_text("slide 3")
    expect(card.locator("strong").filter(has_text="Lyon")).to_contain_text("the pilot runs in Lyon")
    assert "Traceback" not in main.inner_text()
