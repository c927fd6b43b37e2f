"""The whole-document intent classifier (rag_core.answer.intent) on benchmarks/data/intents.jsonl: questions asked of
five made-up libraries (benchmarks/data/intents_libraries.json), each labelled with its intent, the documents it means
and, for "which of my documents mention X", the topic.

Reported per split (tune: where the rules were written and adjusted; test: the figures to quote):
  per kind        precision and recall of each intent
  non-fact        precision: of the questions classified as anything but FACT, the share that are not fact
                  questions (goal ≥ 0.95: a fact question must never become a summary); exact: of those, the share
                  whose kind is exactly right; recall: of the non-fact questions, the share found (any non-fact kind)
  documents       of the questions whose kind is right and that are about documents, the share resolved to exactly
                  the right documents; topics: the share of LIBRARY_TOPIC questions whose topic has the right words
  external        the fact questions of the other sets (XQuAD, PubMedQA, …), written by others: how many become
                  anything but FACT
--show tune lists the tune split's mistakes (never the test split's unless asked: that one is for measuring).

Run:  .venv/bin/python -m benchmarks.intents [--json] [--show tune]
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rag_core.answer.intent import Intent, IntentKind, classify
from rag_core.core.models import DocumentInfo
from rag_core.core.text import content_terms

DATA = Path(__file__).resolve().parent / "data" / "intents.jsonl"
LIBRARIES = Path(__file__).resolve().parent / "data" / "intents_libraries.json"
SPLITS = ("tune", "test")
DOCUMENT_KINDS = (IntentKind.SUMMARY, IntentKind.KEY_POINTS, IntentKind.OUTLINE, IntentKind.COMPARE)


@dataclass(frozen=True)
class Row:
    """One labelled question."""

    id: str
    question: str
    library: str
    scope: list[str] | None
    kind: str
    docs: list[str]
    topic: str | None
    split: str
    batch: int  # 1: written before the rules; 2: written after them, to break them


def load(path: Path = DATA) -> list[Row]:
    """The labelled questions."""
    with path.open(encoding="utf-8") as f:
        return [Row(**json.loads(line)) for line in f if line.strip()]


def libraries(path: Path = LIBRARIES) -> dict[str, list[DocumentInfo]]:
    """Library name -> its listing, as Library.documents() returns it."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {name: [DocumentInfo(doc_id=d["doc_id"], title=d["title"], kind=d["kind"], pages=d["pages"], chunks=0,
                                added_at=d["added_at"], file_name=d["file_name"]) for d in docs]
            for name, docs in raw.items()}


def predict(rows: list[Row]) -> list[Intent]:
    """The classifier's intent for each row."""
    libs = libraries()
    return [classify(r.question, libs[r.library], r.scope) for r in rows]


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 3) if total else None


def _same_topic(got: str | None, gold: str | None) -> bool:
    return got is not None and gold is not None and content_terms(got).words == content_terms(gold).words


def figures(rows: list[Row], got: list[Intent]) -> dict:
    """Precision and recall per kind, the non-fact figures, document and topic accuracy."""
    out: dict = {"questions": len(rows), "kinds": {}}
    for kind in IntentKind:
        predicted = [(r, g) for r, g in zip(rows, got, strict=True) if g.kind == kind]
        gold = [(r, g) for r, g in zip(rows, got, strict=True) if r.kind == kind]
        out["kinds"][kind.value] = {
            "gold": len(gold), "predicted": len(predicted),
            "precision": _ratio(sum(r.kind == kind for r, _ in predicted), len(predicted)),
            "recall": _ratio(sum(g.kind == kind for _, g in gold), len(gold))}
    said = [(r, g) for r, g in zip(rows, got, strict=True) if g.kind != IntentKind.FACT]
    asked = [(r, g) for r, g in zip(rows, got, strict=True) if r.kind != IntentKind.FACT]
    out["non_fact"] = {
        "gold": len(asked), "predicted": len(said),
        "precision": _ratio(sum(r.kind != IntentKind.FACT for r, _ in said), len(said)),
        "precision_exact": _ratio(sum(r.kind == g.kind for r, g in said), len(said)),
        "recall": _ratio(sum(g.kind != IntentKind.FACT for _, g in asked), len(asked)),
        "recall_exact": _ratio(sum(g.kind == r.kind for r, g in asked), len(asked)),
        "facts_turned": sum(r.kind == IntentKind.FACT for r, _ in said)}
    on_docs = [(r, g) for r, g in zip(rows, got, strict=True) if g.kind == r.kind and g.kind in DOCUMENT_KINDS]
    for batch in (1, 2):
        said_b = [(r, g) for r, g in said if r.batch == batch]
        asked_b = [(r, g) for r, g in asked if r.batch == batch]
        out["non_fact"][f"batch{batch}"] = {
            "questions": sum(r.batch == batch for r in rows),
            "precision": _ratio(sum(r.kind != IntentKind.FACT for r, _ in said_b), len(said_b)),
            "recall": _ratio(sum(g.kind != IntentKind.FACT for _, g in asked_b), len(asked_b)),
            "facts_turned": sum(r.kind == IntentKind.FACT for r, _ in said_b)}
    out["documents"] = {"checked": len(on_docs),
                        "right": _ratio(sum(sorted(g.doc_ids) == sorted(r.docs) for r, g in on_docs), len(on_docs))}
    topics = [(r, g) for r, g in zip(rows, got, strict=True)
              if r.kind == IntentKind.LIBRARY_TOPIC and g.kind == IntentKind.LIBRARY_TOPIC]
    out["topics"] = {"checked": len(topics), "right": _ratio(sum(_same_topic(g.topic, r.topic) for r, g in topics),
                                                             len(topics))}
    return out


def measure(rows: list[Row] | None = None) -> dict:
    """All figures, per split."""
    rows = load() if rows is None else rows
    got = predict(rows)
    out = {}
    for split in SPLITS:
        pick = [i for i, r in enumerate(rows) if r.split == split]
        out[split] = figures([rows[i] for i in pick], [got[i] for i in pick])
    return out


def external_facts() -> dict:
    """The fact questions of the other benchmark sets, written by others (XQuAD's 1,190, their paraphrases, the
    unanswerable ones, PubMedQA's 1,000), asked of a library of the 48 XQuAD articles' titles: how many become
    anything but FACT (each one a fact question that would be answered as a summary or a list)."""
    data = DATA.parent
    articles = json.loads((data / "xquad" / "xquad.en.json").read_text(encoding="utf-8"))["data"]
    docs = [DocumentInfo(doc_id=a["title"], title=a["title"].replace("_", " "), kind="wikipedia", pages=None,
                         chunks=0, added_at="", file_name="") for a in articles]
    questions = [qa["question"] for a in articles for p in a["paragraphs"] for qa in p["qas"]]
    for name in ("paraphrased.jsonl", "unanswerable.jsonl", "unanswerable_paraphrased.jsonl"):
        with (data / name).open(encoding="utf-8") as f:
            questions += [json.loads(line)["question"] for line in f if line.strip()]
    pubmed = json.loads((data / "pubmedqa" / "ori_pqal.json").read_text(encoding="utf-8"))
    questions += [v["QUESTION"] for v in pubmed.values()]
    turned = [(q, classify(q, docs)) for q in questions]
    turned = [(q, i) for q, i in turned if i.kind != IntentKind.FACT]
    return {"questions": len(questions), "turned": len(turned),
            "examples": [f"{i.kind.value}: {q}" for q, i in turned[:10]]}


def mistakes(split: str) -> list[str]:
    """One line per wrong kind, wrong documents or wrong topic in `split`."""
    rows = [r for r in load() if r.split == split]
    lines = []
    for r, g in zip(rows, predict(rows), strict=True):
        wrong_docs = g.kind == r.kind and g.kind in DOCUMENT_KINDS and sorted(g.doc_ids) != sorted(r.docs)
        wrong_topic = g.kind == r.kind == IntentKind.LIBRARY_TOPIC and not _same_topic(g.topic, r.topic)
        if g.kind != r.kind or wrong_docs or wrong_topic:
            lines.append(f"{r.id} [{r.library}{' scope=' + ','.join(r.scope) if r.scope else ''}] {r.question!r}: "
                         f"gold {r.kind} {r.docs or r.topic or ''} -> got {g.kind.value} {list(g.doc_ids) or g.topic or ''}")
    return lines


def _print(out: dict) -> None:
    for split in SPLITS:
        f = out[split]
        nf = f["non_fact"]
        print(f"== {split}: {f['questions']} questions ({nf['gold']} whole-document or library questions)")
        print(f"{'kind':<15}{'gold':>6}{'said':>6}{'precision':>11}{'recall':>8}")
        for kind, k in f["kinds"].items():
            p = "-" if k["precision"] is None else f"{k['precision']:.3f}"
            rc = "-" if k["recall"] is None else f"{k['recall']:.3f}"
            print(f"{kind:<15}{k['gold']:>6}{k['predicted']:>6}{p:>11}{rc:>8}")
        print(f"non-fact: precision {nf['precision']} (exact kind {nf['precision_exact']}), recall {nf['recall']} "
              f"(exact kind {nf['recall_exact']}); fact questions turned into another kind: {nf['facts_turned']}")
        for batch in (1, 2):
            b = nf[f"batch{batch}"]
            print(f"  batch {batch} ({b['questions']} questions): non-fact precision {b['precision']}, recall "
                  f"{b['recall']}, fact questions turned: {b['facts_turned']}")
        print(f"documents right: {f['documents']['right']} of {f['documents']['checked']}; "
              f"topics right: {f['topics']['right']} of {f['topics']['checked']}")
    ext = out["external_facts"]
    print(f"== fact questions of the other sets (XQuAD, paraphrased, unanswerable, PubMedQA): {ext['questions']}, "
          f"turned into another kind: {ext['turned']}")
    for line in ext["examples"]:
        print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    """Print the figures (or --json); --show SPLIT lists that split's mistakes."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", choices=SPLITS)
    args = ap.parse_args(argv)
    if args.show:
        print("\n".join(mistakes(args.show)) or "no mistakes")
        return 0
    out = measure()
    out["external_facts"] = external_facts()
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        _print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
