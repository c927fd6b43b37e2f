"""benchmarks/data/unanswerable.jsonl is checked against the corpus it is asked of: the 48 XQuAD English articles.

Each line is {"id", "question", "kind", "split", "missing", "note"}. The kinds: "off-topic" (nothing in the corpus is
about it), "near-topic" (the subject is in the corpus, the asked fact is not; "missing" names the question's key terms
that occur nowhere in the corpus) and "adversarial" (a plausible answer is in the corpus but the text does not say
what is asked; "note" says what it says instead). The lead tunes on split "tune" and reports on split "test".
"""
from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "benchmarks" / "data" / "unanswerable.jsonl"
XQUAD = ROOT / "benchmarks" / "data" / "xquad" / "xquad.en.json"

FIELDS = {"id", "question", "kind", "split", "missing", "note"}
MIN_TOTAL = 180
MIN_PER_KIND = {"off-topic": 50, "near-topic": 60, "adversarial": 50}
SPLITS = {"tune", "test"}
ORIGINAL_IDS = [f"u{i:02d}" for i in range(1, 35)]  # the 34 questions the set started with keep their ids
RARE_DF = 2  # a "rare word" occurs in at most this many of the 48 articles ...
RARE_LEN = 5  # ... and has at least this many letters (short words like "feed" are too common to tie a question down)
STOP = frozenset({
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "before", "by", "could", "current", "did", "do",
    "does", "during", "first", "for", "from", "had", "has", "have", "how", "in", "into", "is", "it", "its", "last",
    "many", "much", "of", "on", "or", "should", "than", "that", "the", "their", "then", "there", "these", "this",
    "those", "to", "today", "was", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "with",
    "would", "year", "years",
})
_WORD = re.compile(r"[^\W_]+")


@cache
def lines() -> tuple[dict, ...]:
    """The set, one dict per line."""
    return tuple(json.loads(x) for x in SET.read_text(encoding="utf-8").splitlines() if x.strip())


@cache
def articles() -> dict[str, str]:
    """Title (underscores as spaces) -> the article as the library holds it: paragraphs joined by blank lines."""
    data = json.loads(XQUAD.read_text(encoding="utf-8"))["data"]
    return {a["title"].replace("_", " "): "\n\n".join(p["context"] for p in a["paragraphs"]) for a in data}


@cache
def corpus() -> str:
    """Every title and article, as one text."""
    return "\n\n".join(f"{title}\n{text}" for title, text in articles().items())


@cache
def document_frequency() -> Counter[str]:
    """Lower-case word -> number of articles (title included) it occurs in."""
    df: Counter[str] = Counter()
    for title, text in articles().items():
        df.update({w.lower() for w in _WORD.findall(f"{title}\n{text}")})
    return df


def occurs(term: str, text: str) -> bool:
    """`term` occurs in `text` as whole words, case-insensitively (a word boundary at both ends)."""
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE) is not None


def missing_terms(line: dict) -> list[str]:
    """The line's "missing" terms ("; " separates several), empty when it names none."""
    return [t.strip() for t in line["missing"].split(";") if t.strip()]


def anchors(question: str) -> list[str]:
    """Words tying a question to the corpus: capitalised names (not the first word) or rare words found in an article.

    A necessary check, not a sufficient one: it catches a "near-topic" question that shares no vocabulary with any
    article; whether the asked fact is really absent was checked by reading the articles (each line's note says what
    they hold instead)."""
    df = document_frequency()
    out = []
    for i, word in enumerate(_WORD.findall(question)):
        low = word.lower()
        if low in STOP or not df[low]:
            continue
        if (i > 0 and word[0].isupper()) or (len(low) >= RARE_LEN and df[low] <= RARE_DF):
            out.append(word)
    return out


def normalised(question: str) -> str:
    """Lower case, words only: two questions differing in punctuation or spacing are the same question."""
    return " ".join(_WORD.findall(question.lower()))


def test_the_checks_can_tell_present_from_absent():
    """The helpers themselves: '51' occurs (in '4:51'), 'Super Bowl 51' does not; a question about sourdough has no
    anchor, one about Super Bowl 51 has."""
    assert occurs("51", corpus()) and occurs("Super Bowl 50", corpus()) and occurs("tesla", corpus())
    assert not occurs("Super Bowl 51", corpus()) and not occurs("Tesl", corpus())
    assert anchors("How do you feed a sourdough starter?") == []
    assert anchors("What is the Riemann hypothesis?") == []  # the Prime number article shares no word with it
    assert "Bowl" in anchors("Who won Super Bowl 51?")
    assert normalised("Who won  Super Bowl 51 ?") == normalised("who won super bowl 51")


def test_fields_size_and_ids():
    rows = lines()
    assert len(rows) >= MIN_TOTAL, f"{len(rows)} questions, want at least {MIN_TOTAL}"
    for row in rows:
        assert set(row) == FIELDS, f"{row.get('id')}: fields {sorted(row)}"
        assert all(isinstance(row[f], str) for f in FIELDS), row["id"]
        assert row["question"].strip().endswith("?"), row["id"]
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids), [i for i, n in Counter(ids).items() if n > 1]
    assert set(ORIGINAL_IDS) <= set(ids), sorted(set(ORIGINAL_IDS) - set(ids))
    questions = Counter(normalised(row["question"]) for row in rows)
    assert all(n == 1 for n in questions.values()), [q for q, n in questions.items() if n > 1]


def test_kinds_have_their_minimum():
    kinds = Counter(row["kind"] for row in lines())
    assert set(kinds) == set(MIN_PER_KIND), kinds
    for kind, least in MIN_PER_KIND.items():
        assert kinds[kind] >= least, f"{kind}: {kinds[kind]} questions, want at least {least}"


def test_each_kind_is_split_in_halves():
    per_kind: dict[str, Counter[str]] = {}
    for row in lines():
        assert row["split"] in SPLITS, f"{row['id']}: split {row['split']!r}"
        per_kind.setdefault(row["kind"], Counter())[row["split"]] += 1
    for kind, splits in per_kind.items():
        assert abs(splits["tune"] - splits["test"]) <= 1, f"{kind}: {dict(splits)}"


def test_missing_terms_are_in_the_question_and_nowhere_in_the_corpus():
    text = corpus()
    named = 0
    for row in lines():
        for term in missing_terms(row):
            named += 1
            assert occurs(term, row["question"]), f"{row['id']}: missing term {term!r} is not in the question"
            assert not occurs(term, text), f"{row['id']}: missing term {term!r} occurs in the corpus"
    near_named = sum(bool(missing_terms(r)) for r in lines() if r["kind"] == "near-topic")
    assert near_named >= 20, f"only {near_named} near-topic questions name an absent term"
    assert named >= near_named


def test_near_topic_and_adversarial_questions_are_near_the_corpus():
    far = [
        (row["id"], row["question"])
        for row in lines()
        if row["kind"] in ("near-topic", "adversarial") and not anchors(row["question"])
    ]
    assert not far, f"no capitalised name or rare word shared with any article: {far}"


def test_near_topic_and_adversarial_lines_say_what_the_text_has():
    for row in lines():
        if row["kind"] in ("near-topic", "adversarial"):
            note = row["note"].strip()
            assert note.endswith("."), f"{row['id']}: note {note!r} is not a sentence"
            assert len(note.split()) >= 5, f"{row['id']}: note {note!r} says too little"


def test_no_question_is_an_xquad_question():
    data = json.loads(XQUAD.read_text(encoding="utf-8"))["data"]
    xquad = {normalised(q["question"]) for a in data for p in a["paragraphs"] for q in p["qas"]}
    assert len(xquad) > 1000
    same = [row["id"] for row in lines() if normalised(row["question"]) in xquad]
    assert not same, f"questions that XQuAD itself asks (and answers): {same}"
