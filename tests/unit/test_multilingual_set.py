"""The multilingual benchmark set is well formed: both directions, three languages, a test split, gold in place."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rag_core.answer.language import guess

SET = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "multilingual.jsonl"
FIELDS = {"id", "direction", "lang", "title", "split", "question", "gold", "qid", "passage_en", "passage"}


def rows() -> list[dict]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_row_has_the_fields_and_unique_ids() -> None:
    rs = rows()
    assert all(set(r) == FIELDS for r in rs)
    assert len({r["id"] for r in rs}) == len(rs)


def test_both_directions_three_languages_and_a_test_split() -> None:
    counts = Counter((r["direction"], r["lang"], r["split"]) for r in rows())
    for direction in ("xx-en", "en-xx"):
        for lang in ("fr", "de", "es"):
            for split in ("tune", "test"):
                assert counts[(direction, lang, split)] >= 3, (direction, lang, split)


def test_gold_is_in_the_passage_the_question_points_at() -> None:
    for r in rows():
        assert any(g.lower() in r["passage"].lower() for g in r["gold"]), r["id"]
        if r["direction"] == "xx-en":
            assert r["passage"] == r["passage_en"]
        else:
            assert r["passage"] != r["passage_en"]


def test_splits_are_by_article() -> None:
    split_of: dict[str, set[str]] = {}
    for r in rows():
        split_of.setdefault(r["title"], set()).add(r["split"])
    assert all(len(s) == 1 for s in split_of.values())


def test_the_translations_are_in_the_language_they_claim() -> None:
    """Each translated text is recognised as its language (the same detector the reply uses)."""
    wrong = []
    for r in rows():
        text = r["question"] if r["direction"] == "xx-en" else r["passage"]
        if len(text.split()) >= 6 and guess(text).code != r["lang"]:
            wrong.append(r["id"])
    assert len(wrong) <= 2, wrong
