"""The Chat sidebar's past conversations in a real browser (issue 28, item 3): the titles start at the left with
their icons in one column (Streamlit centres a full-width button's label), each says when it was last used (the same
question asked three times is told apart), and a deleted conversation comes back with Undo.

The shared local app (tests/e2e/conftest.py); the conversations are written into its data folder and removed after."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from e2e_helpers import open_page, wait_idle
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

TITLE = "Which river runs through the old harbour town?"  # asked by no other test of the shared app
IDS = ("0000000000e2e0a1", "0000000000e2e0a2", "0000000000e2e0a3")
OPEN = "0000000000e2e0a4"  # opened first, then deleted and put back
LIST = '[data-testid="stSidebar"] .st-key-past_conversations'


def _write(folder: Path, conv_id: str, title: str, updated: float) -> None:
    turns = [{"id": "u1", "role": "user", "text": title}, {"id": "a1", "role": "assistant", "text": "Helsinki."}]
    (folder / f"{conv_id}.json").write_text(json.dumps(
        {"format": 1, "id": conv_id, "title": title, "created": updated, "updated": updated,
         "titled_by_user": False, "questions": 1, "turns": turns}), encoding="utf-8")


@pytest.fixture
def conversations(app_data_dir):
    folder = app_data_dir / "conversations"
    folder.mkdir(exist_ok=True)
    now = time.time()
    for conv_id, age in zip(IDS, (120, 3 * 86400, 40 * 86400), strict=True):
        _write(folder, conv_id, TITLE, now - age)
    _write(folder, OPEN, "The harbour authority's quarterly budget for 2024, and what the ferries cost", now - 60)
    yield folder
    for conv_id in (*IDS, OPEN):
        (folder / f"{conv_id}.json").unlink(missing_ok=True)


def test_titles_are_left_aligned_dated_and_a_delete_can_be_undone(browser, app_url, conversations):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    try:
        open_page(page, app_url, f"?c={OPEN}", idle_timeout=180_000)
        # the shared app may list other tests' conversations too: these three are told apart by their title
        items = page.locator(f"{LIST} [data-testid=\"stBaseButton-tertiary\"]:visible").filter(has_text=TITLE)
        expect(items).to_have_count(3)
        icons = [items.nth(i).locator('[data-testid="stIconMaterial"]').bounding_box() for i in range(3)]
        words = [items.nth(i).locator('[data-testid="stMarkdownContainer"]').bounding_box() for i in range(3)]
        boxes = [items.nth(i).bounding_box() for i in range(3)]
        assert all(icons) and all(words) and all(boxes)
        assert len({round(b["x"]) for b in icons}) == 1, icons  # one column of icons ...
        assert len({round(b["x"]) for b in words}) == 1, words  # ... and of titles
        assert icons[0]["x"] - boxes[0]["x"] < 12, (icons, boxes)  # at the left of the button, not centred
        dated = [items.nth(i).inner_text() for i in range(3)]
        assert len(set(dated)) == 3 and all(TITLE in d for d in dated), dated  # told apart by when
        assert any(":" in d.split(TITLE)[1] for d in dated), dated  # today's: the time

        sidebar = page.locator('[data-testid="stSidebar"]')
        sidebar.get_by_text("This conversation").click()
        page.get_by_role("button", name="Delete this conversation").click()
        undo = sidebar.get_by_role("button", name="Undo")
        expect(undo).to_be_visible()
        assert not (conversations / f"{OPEN}.json").exists()
        expect(sidebar.get_by_text("Deleted “The harbour authority's quarterly budget")).to_be_visible()
        wait_idle(page)
        undo.click()
        expect(undo).to_have_count(0)
        wait_idle(page)
        assert (conversations / f"{OPEN}.json").exists()
        expect(page.locator('[data-testid="stChatMessage"]').first).to_contain_text("The harbour authority")
    finally:
        ctx.close()
