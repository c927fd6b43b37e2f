"""Linked folders in a real browser (issue 39): link a folder (outside home: confirmed first), review the buckets,
apply, edit a file on disk, check again and see the badge, review the change and apply it."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from e2e_helpers import open_page, wait_idle
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCREENSHOTS = Path(os.environ["DOCCHAT_SCREENSHOTS"]) if os.environ.get("DOCCHAT_SCREENSHOTS") else None
STEP_MS = 180_000  # adding a few short notes on a busy 2-core machine, with Chromium beside it


def open_box(main, check) -> None:
    """Unfold the folder's box (folded when nothing was checked since the last apply) and wait for its button."""
    if not check.is_visible():
        main.locator('[data-testid="stExpander"] summary').filter(has_text="Field notes").click()
    expect(check).to_be_visible()


def test_link_review_apply_edit_badge_review_again(page, app_url, tmp_path):
    folder = tmp_path / "Field notes"
    folder.mkdir()
    (folder / "gull-survey.txt").write_text("The gull survey counted four hundred herring gulls on the north pier.")
    (folder / "tide-log.md").write_text("# Tide log\n\nThe spring tide reached the third step of the slipway.")
    open_page(page, app_url, "library")
    main = page.locator('[data-testid="stMainBlockContainer"]')

    main.get_by_role("textbox", name="Folder on this computer").fill(str(folder))
    main.get_by_role("button", name=re.compile("Link folder")).click()
    expect(main.get_by_text("is outside your home folder").first).to_be_visible()
    main.get_by_role("button", name="Link it anyway").click()
    expect(main.get_by_text("2 files changed in Field notes").first).to_be_visible()
    expect(main.get_by_text("2 new · 0 changed · 0 removed · 0 unchanged")).to_be_visible()
    expect(main.get_by_text("gull-survey.txt").first).to_be_visible()
    shot = SCREENSHOTS or tmp_path
    page.screenshot(path=str(shot / "folder_review.png"), full_page=True)

    main.get_by_role("button", name="Apply 2 changes").click()
    expect(main.get_by_text("Added gull-survey.txt").first).to_be_visible(timeout=STEP_MS)
    expect(main.get_by_text("Added tide-log.md").first).to_be_visible(timeout=STEP_MS)
    main.get_by_role("button", name="Clear these messages").click()  # so the next "Added" is the next apply's
    expect(main.get_by_text("Added gull-survey.txt")).to_have_count(0)
    wait_idle(page)

    old = (folder / "gull-survey.txt").stat().st_mtime_ns
    (folder / "gull-survey.txt").write_text("The gull survey counted five hundred herring gulls and one skua.")
    os.utime(folder / "gull-survey.txt", ns=(old + 2_000_000_000, old + 2_000_000_000))
    open_page(page, app_url, "library")  # a reload: the review is the server's, not the tab's
    check = main.get_by_role("button", name="Check for changes")
    open_box(main, check)
    check.click()
    badge = main.locator('[data-testid="stAlertContentWarning"]').filter(has_text="1 file changed in Field notes")
    expect(badge).to_be_visible()
    expect(main.get_by_text("0 new · 1 changed · 0 removed · 1 unchanged")).to_be_visible()
    page.screenshot(path=str(shot / "folder_badge.png"), full_page=True)
    main.get_by_role("button", name="Apply 1 change").click()
    expect(main.get_by_text("Added gull-survey.txt").first).to_be_visible(timeout=STEP_MS)
    wait_idle(page)
    open_box(main, check)
    check.click()
    expect(main.get_by_text("Field notes is up to date").first).to_be_visible()
    expect(badge).to_have_count(0)
