"""benchmarks/data/paraphrased.jsonl and unanswerable_paraphrased.jsonl are checked against what they paraphrase.

The paraphrased sets measure DocChat on questions worded the way people ask (descriptions instead of names,
synonyms, other word order), not in the article's words: each line must share no run of five words with the article
text or with the question it rewrites, keep its gold answer out of the question, and keep the split of the original
(by article for XQuAD, the unanswerable set's own split). See benchmarks/data/paraphrased.md.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
XQUAD = DATA / "xquad" / "xquad.en.json"
STYLES = {"description", "synonym", "reorder", "casual"}
COPIED = 5  # words in a row that a paraphrase may not share with the article or the original question


def _jsonl(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text(encoding="utf-8").splitlines() if x.strip()]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.casefold())


def _grams(words: list[str], n: int = COPIED) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@cache
def _xquad() -> tuple[dict[str, dict], dict[str, str]]:
    """question id -> {question, title, gold}; title -> article text."""
    data = json.loads(XQUAD.read_text(encoding="utf-8"))["data"]
    qs = {qa["id"]: {"question": qa["question"], "title": a["title"],
                     "gold": list(dict.fromkeys(x["text"].strip() for x in qa["answers"]))}
          for a in data for p in a["paragraphs"] for qa in p["qas"]}
    return qs, {a["title"]: "\n\n".join(p["context"] for p in a["paragraphs"]) for a in data}


@cache
def _corpus_grams() -> frozenset[tuple[str, ...]]:
    return frozenset(g for text in _xquad()[1].values() for g in _grams(_words(text)))


def _split_of(title: str) -> str:
    """The benchmark's split: article titles in sorted order alternate tune, test (benchmarks/answers.py)."""
    titles = sorted(re.sub(r"[^A-Za-z0-9_-]+", "_", t) for t in _xquad()[1])
    return "tune" if titles.index(re.sub(r"[^A-Za-z0-9_-]+", "_", title)) % 2 == 0 else "test"


def test_answerable_paraphrases_cover_every_article_in_both_splits():
    rows = _jsonl("paraphrased.jsonl")
    qs, articles = _xquad()
    assert len(rows) >= 300
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["title"] for r in rows} == set(articles)
    for r in rows:
        assert set(r) == {"id", "title", "split", "style", "question", "original", "gold"}
        assert r["id"] in qs and qs[r["id"]]["question"] == r["original"] and qs[r["id"]]["title"] == r["title"]
        assert r["gold"] == qs[r["id"]]["gold"]
        assert r["split"] == _split_of(r["title"]) and r["style"] in STYLES
    splits = Counter(r["split"] for r in rows)
    assert abs(splits["tune"] - splits["test"]) <= 10
    styles = Counter(r["style"] for r in rows)
    assert styles["description"] >= len(rows) // 3  # descriptions instead of names: the hard case of the issue


def test_answerable_paraphrases_copy_no_phrase_and_keep_the_gold_answer_out():
    copied, golden = [], []
    for r in _jsonl("paraphrased.jsonl"):
        words = _words(r["question"])
        if _grams(words) & (_corpus_grams() | _grams(_words(r["original"]))):
            copied.append(r["id"])
        if any(len(g) > 2 and f" {' '.join(_words(g))} " in f" {' '.join(words)} " for g in r["gold"]):
            golden.append(r["id"])
        assert " ".join(words) != " ".join(_words(r["original"]))
    assert not copied, f"paraphrases sharing {COPIED} words in a row with the article or the original: {copied}"
    assert not golden, f"paraphrases containing their gold answer: {golden}"


def test_unanswerable_paraphrases_keep_kind_split_and_missing_terms():
    source = {o["id"]: o for o in _jsonl("unanswerable.jsonl")}
    rows = _jsonl("unanswerable_paraphrased.jsonl")
    assert [r["source_id"] for r in rows] == list(source)  # every question, in the same order
    corpus = " ".join(_words(" ".join(f"{t} {x}" for t, x in _xquad()[1].items())))
    for r in rows:
        o = source[r["source_id"]]
        assert r["id"] == "p" + o["id"] and r["original"] == o["question"]
        assert (r["kind"], r["split"]) == (o["kind"], o["split"]) and r["style"] in STYLES
        words = _words(r["question"])
        assert not _grams(words) & (_corpus_grams() | _grams(_words(o["question"]))), r["id"]
        for term in filter(None, (t.strip() for t in r["missing"].split(";"))):
            assert f" {' '.join(_words(term))} " in f" {' '.join(words)} ", (r["id"], term)
            assert f" {' '.join(_words(term))} " not in f" {corpus} ", (r["id"], term)
