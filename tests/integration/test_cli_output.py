"""What `list`, `search` and `ask` print when a document's title, headings and text carry terminal controls: a
right-to-left override (U+202E) that turns "exe.cod" after it into "doc.exe" on screen, escape sequences, a bell, C1 codes. The
terminal output shows a replacement character instead; `--json` keeps the exact text, escaped."""
from __future__ import annotations

import json

import pytest

from rag_core.adapters.cli.main import main
from rag_core.core.models import Document, Section, SourceMeta

RLO = "\u202e"
REPLACEMENT = "\ufffd"  # what the terminal shows instead of a control character (rag_core.adapters.cli.common)
CONTROLS = [RLO, "\u2066", "\u200f", "\u061c", "\x1b", "\x07", "\x9b", "\x7f", "\x00"]
TITLE = f"{RLO}exe.cod \x1b[2J\x07\u2066quarterly\u2069 report"
HEADING = f"Results\x1b]0;owned\x07 {RLO}gnissecorp"
TEXT = (f"The pumping station processed {RLO}0001 litres\x1b[31m of water in March and the\u200f filters were "
        "replaced.\x9b The pumping station was inspected by the regional water board in April.\x00 ")


@pytest.fixture
def hostile_library(library):
    """A library holding one document whose title, heading and text carry terminal controls (closed again, so
    the CLI can open the folder)."""
    body = f"{HEADING}\n\n{TEXT * 3}"
    doc = Document(doc_id="hostile", text=body, sections=(Section((HEADING,), 0, len(body)),),
                   source=SourceMeta(file_name="report.md", title=TITLE, kind="md", sha256="hostile"))
    assert library.ingest_document(doc).status == "added"
    library.close()
    return str(library.settings.library.data_dir)


def shown(out: str) -> None:
    """No control character reached the terminal (newlines between lines are fine), but a visible mark did."""
    bad = [hex(ord(ch)) for ch in out if ch in CONTROLS]
    assert not bad, bad
    assert REPLACEMENT in out


def test_list_search_and_ask_neutralise_controls(hostile_library, capsys):
    assert main(["list", "--data-dir", hostile_library]) == 0
    out = capsys.readouterr().out
    shown(out)
    assert f"{REPLACEMENT}exe.cod" in out and "quarterly" in out

    assert main(["search", "pumping station water", "-k", "3", "--data-dir", hostile_library]) == 0
    out = capsys.readouterr().out
    shown(out)
    assert "pumping station" in out and "gnissecorp" in out

    assert main(["ask", "How much water did the pumping station process?", "--no-llm",
                 "--data-dir", hostile_library]) == 0
    out = capsys.readouterr().out
    shown(out)
    assert "pumping station" in out and "Sources:" in out


def test_json_keeps_the_exact_text_escaped(hostile_library, capsys):
    assert main(["list", "--json", "--data-dir", hostile_library]) == 0
    raw = capsys.readouterr().out
    assert not any(ch in raw for ch in CONTROLS)  # escaped (\u202e), so a terminal shows the escape
    (doc,) = json.loads(raw)["documents"]
    assert doc["title"] == TITLE  # ...and a program reading it gets the title exactly

    assert main(["search", "pumping station water", "--json", "--data-dir", hostile_library]) == 0
    raw = capsys.readouterr().out
    assert not any(ch in raw for ch in CONTROLS)
    hit = json.loads(raw)["hits"][0]
    assert hit["title"] == TITLE and RLO in hit["text"] and "\x1b[31m" in hit["text"]
