"""Files being added survive a reload (issue 24, "jobs a person can see and stop"), in a real browser: start adding a
big PDF and a damaged one, reload the Library page, and the big file is still there with its progress (moving on by
itself) and a Stop button; Stop ends it, and the damaged file's sentence shows once its turn has come."""
from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pymupdf
import pytest
from e2e_helpers import open_page, screenshot, upload, wait_idle
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCREENSHOTS = Path(os.environ["DOCCHAT_SCREENSHOTS"]) if os.environ.get("DOCCHAT_SCREENSHOTS") else None
WORDS = ["river", "harbour", "ledger", "budget", "council", "museum", "railway", "orchard", "glacier", "lantern",
         "meadow", "quarry", "tribunal", "vineyard", "beacon", "canal", "archive", "pasture", "foundry", "garrison"]
SLOW_STEP_MS = 300_000  # a stage on a busy 2-core machine, with Chromium beside it


def _big_pdf(pages: int = 117) -> bytes:
    """A dense text PDF: about 500 passages, minutes of work, so it is still being added after the reload."""
    rnd = random.Random(24)
    doc = pymupdf.open()
    for _ in range(pages):
        text = "\n".join(" ".join(rnd.choice(WORDS) for _ in range(11)).capitalize() + "." for _ in range(62))
        doc.new_page().insert_textbox(pymupdf.Rect(36, 36, 576, 806), text, fontsize=8)
    return doc.tobytes()


def test_a_reload_shows_the_file_being_added_with_its_stop_button_then_its_result(page, app_url, tmp_path):
    open_page(page, app_url, "library")
    upload(page, [{"name": "big.pdf", "mimeType": "application/pdf", "buffer": _big_pdf()},
                  {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4\n%%EOF\n"}])
    main = page.locator('[data-testid="stMainBlockContainer"]')
    expect(main.get_by_text("Adding big.pdf").first).to_be_visible(timeout=SLOW_STEP_MS)

    page.reload()  # a new Streamlit session: it knows nothing of the first one's uploads
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    expect(main.get_by_text("Adding big.pdf").first).to_be_visible(timeout=60_000)
    expect(main.get_by_text("Adding broken.pdf").first).to_be_visible()  # waiting its turn
    expect(main.get_by_text("Waiting for its turn…")).to_be_visible()
    expect(main.get_by_role("button", name=re.compile("Stop"))).to_have_count(2)
    # Nobody touches the page: it follows the file by itself into its slow stage.
    expect(main.get_by_text("Learning what each passage is about…")).to_be_visible(timeout=SLOW_STEP_MS)
    expect(main.locator('[data-testid="stProgress"]').first).to_be_visible()
    shot = SCREENSHOTS or tmp_path
    page.screenshot(path=str(shot / "jobs_after_reload.png"))

    main.get_by_role("button", name=re.compile("Stop")).first.click()
    expect(main.get_by_text("Adding “big.pdf” was stopped; nothing was added.")).to_be_visible(timeout=15_000)
    expect(main.get_by_text("Could not add broken.pdf")).to_be_visible(timeout=SLOW_STEP_MS)
    error = main.locator('[data-testid="stAlertContentError"]').filter(has_text="broken.pdf")
    expect(error).to_contain_text("the file is damaged and could not be read")
    expect(main.get_by_role("button", name=re.compile("Stop"))).to_have_count(0)
    wait_idle(page)
    screenshot(page, shot / "jobs_results.png", height=1000)
    assert "Traceback" not in main.inner_text()
    assert main.get_by_text("big", exact=True).count() == 0  # nothing of it in the document list

    main.get_by_role("button", name=re.compile("Clear these messages")).click()  # dismissed: gone on reload too
    expect(main.get_by_text("Could not add broken.pdf")).to_have_count(0)
    page.reload()
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    wait_idle(page)
    expect(main.get_by_text("Could not add broken.pdf")).to_have_count(0)
