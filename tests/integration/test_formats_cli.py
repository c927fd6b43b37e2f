"""A PowerPoint and an Excel workbook added from the command line, then asked about: the answer quotes the row or
the line that answers, and its source says where it is in the file's own words ("slide 3", "sheet Budget")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
PPTX = DOCS / "office_slides_table-notes-untitled.pptx"
XLSX = DOCS / "office_workbook_budget-formula-hidden.xlsx"


@pytest.fixture
def data_dir(cli, tmp_path) -> str:
    """A library holding the two files, added with `ingest`."""
    folder = str(tmp_path / "data")
    added = cli("ingest", str(PPTX), str(XLSX), "--json", "--data-dir", folder)
    assert added.returncode == 0, added.stderr
    results = json.loads(added.stdout)["results"]
    assert [r["status"] for r in results] == ["added", "added"], results
    assert results[0]["pages"] == 4  # one page per slide
    return folder


def test_slides_and_sheets_are_answered_with_their_place(cli, data_dir):
    listed = cli("list", "--data-dir", data_dir)
    assert "[pptx, 4 pages" in listed.stdout and "[xlsx, " in listed.stdout

    sheet = cli("ask", "How much of the travel budget was spent?", "--no-llm", "--data-dir", data_dir)
    assert sheet.returncode == 0, sheet.stderr
    sources = sheet.stdout.split("Sources:", 1)[1]
    assert "Aurora budget 2024 — sheet Budget" in sources
    assert "Travel | 12,000 | 3,400 | Conferences and site visits" in sources  # the whole row, quoted

    slide = cli("ask", "Where does the pilot run?", "--no-llm", "--data-dir", data_dir)
    assert slide.returncode == 0, slide.stderr
    sources = slide.stdout.split("Sources:", 1)[1]
    assert "Project Aurora quarterly review — slide 3" in sources
    assert "the pilot runs in Lyon" in sources

    found = cli("search", "travel cut after the spring audit", "-k", "1", "--json", "--data-dir", data_dir)
    [hit] = json.loads(found.stdout)["hits"]
    assert hit["location"] == "slide 2 — Budget overview" and hit["page"] == 2
    assert "Speaker notes:" in hit["text"] and "travel was cut by ten percent" in hit["text"]
