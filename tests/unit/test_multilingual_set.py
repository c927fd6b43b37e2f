"""The multilingual benchmark set is well formed: both directions, every language (Latin and non-Latin scripts), a test
split, gold in place."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rag_core.answer.language import guess

SET = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "multilingual.jsonl"
FIELDS = {"id", "direction", "lang", "title", "split", "question", "gold", "qid", "passage_en", "passage"}
LANGS = ("fr", "de", "es", "ru", "zh", "ar", "ja")  # each with >= 32 xx-en questions and >= 4 en-xx paragraphs
NO_SPACES = ("zh", "ja")  # scripts written without spaces between words


def rows() -> list[dict]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_row_has_the_fields_and_unique_ids() -> None:
    rs = rows()
    assert all(set(r) == FIELDS for r in rs)
    assert len({r["id"] for r in rs}) == len(rs)
    assert all(r["id"] == f"{r['direction']}-{r['lang']}-{r['qid']}" for r in rs)


def test_the_languages_are_the_listed_ones_with_enough_questions() -> None:
    rs = rows()
    assert {r["lang"] for r in rs} >= set(LANGS)
    for lang in LANGS:
        assert sum(r["direction"] == "xx-en" and r["lang"] == lang for r in rs) >= 32, lang
        assert len({r["passage"] for r in rs if r["direction"] == "en-xx" and r["lang"] == lang}) >= 4, lang


def test_both_directions_every_language_and_a_test_split() -> None:
    counts = Counter((r["direction"], r["lang"], r["split"]) for r in rows())
    for direction in ("xx-en", "en-xx"):
        for lang in LANGS:
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


def test_splits_match_the_paraphrased_set() -> None:
    paraphrased = SET.with_name("paraphrased.jsonl").read_text(encoding="utf-8").splitlines()
    split_of = {json.loads(line)["title"]: json.loads(line)["split"] for line in paraphrased if line.strip()}
    assert all(split_of[r["title"]] == r["split"] for r in rows())


def test_an_english_paragraph_is_translated_once() -> None:
    """Each translated paragraph replaces its English original in the benchmark's library: one translation each."""
    translations: dict[str, set[str]] = {}
    for r in rows():
        if r["direction"] == "en-xx":
            translations.setdefault(r["passage_en"], set()).add(r["passage"])
    assert all(len(t) == 1 for t in translations.values())


def test_the_translations_are_in_the_language_they_claim() -> None:
    """Each translated text is recognised as its language (the same detector the reply uses)."""
    wrong = []
    for r in rows():
        text = r["question"] if r["direction"] == "xx-en" else r["passage"]
        long_enough = len(text) >= 12 if r["lang"] in NO_SPACES else len(text.split()) >= 6
        if long_enough and guess(text).code != r["lang"]:
            wrong.append(r["id"])
    assert len(wrong) <= 2, wrong


SCRIPTS_SET = SET.with_name("multilingual_scripts.jsonl")
SCRIPTS = {"th": "THAI", "bn": "BENGALI", "ta": "TAMIL"}  # languages the identifier does not know, by their script


def test_the_unknown_languages_set_is_in_their_own_scripts() -> None:
    """multilingual_scripts.jsonl: Thai, Bengali and Tamil (not in language_id.LANGUAGES), both directions, gold in
    place, each translated text written mostly (>= 60 % of its letters) in its language's script."""
    import unicodedata

    from rag_core.core.language_id import LANGUAGES

    def script(text: str) -> str:
        names = Counter(unicodedata.name(c, "").split(" ")[0] for c in text if c.isalpha())
        name, n = names.most_common(1)[0]
        return name if n >= 0.6 * sum(names.values()) else ""

    rs = [json.loads(line) for line in SCRIPTS_SET.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert all(set(r) == FIELDS for r in rs) and len({r["id"] for r in rs}) == len(rs)
    assert {r["lang"] for r in rs} == set(SCRIPTS) and not set(SCRIPTS) & set(LANGUAGES)
    counts = Counter((r["direction"], r["lang"]) for r in rs)
    assert all(counts[("xx-en", lang)] >= 8 and counts[("en-xx", lang)] >= 3 for lang in SCRIPTS), counts
    for r in rs:
        translated = r["question"] if r["direction"] == "xx-en" else r["passage"]
        assert script(translated) == SCRIPTS[r["lang"]], r["id"]
        assert any(g in r["passage"] for g in r["gold"]), r["id"]
