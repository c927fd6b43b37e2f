"""benchmarks/data/reading.jsonl and reading_unanswerable.jsonl (the reading set of real manuals) are well-formed.

Every answerable question names a document of benchmarks/data/manuals/ (each listed in its README with source,
package, version and licence), carries a gold span found word for word in that document and a place, is worded
in its own words (no run of five words copied from the document, the gold kept out of it), and has its document's
split: sorted file names alternate tune, test, so the test half is documents never tuned on. See
benchmarks/data/reading.md.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
MANUALS = DATA / "manuals"
COPIED = 5  # words in a row a question may not share with its document


def _jsonl(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text(encoding="utf-8").splitlines() if x.strip()]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.casefold())


def _grams(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + COPIED]) for i in range(len(words) - COPIED + 1)}


def _docs() -> list[str]:
    return sorted(p.name for p in MANUALS.iterdir() if p.is_file() and p.name != "README.md")


def _text(name: str) -> str:
    """The document's words as a reader sees them (an HTML file without its tags and entities)."""
    raw = (MANUALS / name).read_text(encoding="utf-8")
    if name.endswith(".html"):
        raw = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    return " ".join(_words(raw))


def _split(name: str) -> str:
    return "tune" if _docs().index(name) % 2 == 0 else "test"


def test_every_document_is_listed_with_its_source_package_and_licence():
    readme = (MANUALS / "README.md").read_text(encoding="utf-8")
    docs = _docs()
    assert len(docs) >= 4
    for name in docs:
        line = next((ln for ln in readme.splitlines() if f"`{name}`" in ln), "")
        assert line.count("|") >= 6, f"{name} is not listed in manuals/README.md"
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert all(cells), f"{name}: an empty cell in its README row"


def test_answerable_questions_have_gold_in_their_document_and_their_split():
    rows = _jsonl("reading.jsonl")
    docs = _docs()
    assert len(rows) >= 60
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["doc"] for r in rows} == set(docs)
    assert {r["split"] for r in rows} == {"tune", "test"}
    for r in rows:
        assert r["split"] == _split(r["doc"]), r["id"]
        assert r["place"].strip() and r["question"].rstrip().endswith("?"), r["id"]
        text = f" {_text(r['doc'])} "
        assert r["gold"] and all(f" {' '.join(_words(g))} " in text for g in r["gold"]), r["id"]


def test_questions_are_paraphrased_and_keep_the_gold_out():
    grams = {name: _grams(_text(name).split()) for name in _docs()}
    for r in _jsonl("reading.jsonl"):
        words = _words(r["question"])
        assert not _grams(words) & grams[r["doc"]], f"{r['id']} copies five words of its document"
        q = f" {' '.join(words)} "
        assert not any(f" {' '.join(_words(g))} " in q for g in r["gold"]), r["id"]


def test_unanswerable_questions_are_near_topic_per_document_with_its_split():
    rows = _jsonl("reading_unanswerable.jsonl")
    assert len(rows) >= 30
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["doc"] for r in rows} == set(_docs())
    for r in rows:
        assert r["kind"] == "near-topic" and r["split"] == _split(r["doc"]), r["id"]
        assert r["question"].rstrip().endswith("?") and "gold" not in r, r["id"]
