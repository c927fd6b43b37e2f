"""Calibrate DOCCHAT_MIN_RELEVANCE: top-1 dense cosine for answerable questions vs questions the corpus can't answer.

Corpora (ingested through the normal path, cached under benchmarks/.cache/):
  xquad     the 48 XQuAD English Wikipedia articles; answerable = their 1,190 questions
  pubmedqa  the first 300 PubMedQA abstracts; answerable = their 300 questions
Unanswerable: OFF_TOPIC (40 everyday questions none of these documents covers) and NEAR_TOPIC (about XQuAD
subjects but asking facts the articles don't state: no threshold can catch those, the model must say so).
The relevance score is what rag_core.answer.generation uses: the dense cosine of the best passage in scope.
For contrast it also prints the top score of the default fused retrieval (DBSF when the figures in docs/answers.md
were measured), which is normalised per query and so not comparable across queries.

Run: .venv/bin/python -m benchmarks.relevance_calibration [--json]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from rag_core.core.config import Settings
from rag_core.retrieve.search import DEFAULT_METHOD, retrieve
from rag_core.service.library import Library
from rag_core.store.embeddings import Embedder

ROOT = Path(__file__).resolve().parents[1]

DATA = ROOT / "benchmarks" / "data"
CACHE = ROOT / "benchmarks" / ".cache"
PUBMED_DOCS = 300

OFF_TOPIC = [
    "What is a good recipe for banana bread?", "Who won the 2018 FIFA World Cup?",
    "How do I reset my wifi router password?", "What time does the Louvre open on Sundays?",
    "How many calories are in a slice of pepperoni pizza?", "What is the best way to learn to play the guitar?",
    "Who wrote the novel Pride and Prejudice?", "How do I fix a flat tyre on a bicycle?",
    "What is the plot of the film Inception?", "How tall is Mount Everest?",
    "What is the exchange rate between the euro and the Japanese yen?", "How do I make a sourdough starter?",
    "Which team won the 2022 NBA finals?", "What are the rules of cricket?", "How do I knit a scarf?",
    "What is the capital of Peru?", "Who is the lead singer of Coldplay?", "How long should I boil an egg?",
    "Which smartphone has the best camera?", "How do I teach my dog to sit?",
    "When is the next Harry Potter book coming out?", "How many players are on a volleyball team?",
    "How do you make a mojito?", "How do I fix a leaking kitchen tap?", "Who painted the Mona Lisa?",
    "What are the opening hours of the post office on Saturday?", "How do I convert a spreadsheet to CSV?",
    "What is the population of Tokyo?", "Which planet has the most moons?",
    "How do I grow tomatoes on a balcony?", "Who invented the bicycle?", "What is the best strategy in Monopoly?",
    "How much does a Tesla Model 3 cost?", "How do I bake chocolate chip cookies?",
    "What language is spoken in Brazil?", "How many strings does a violin have?",
    "What is the Sicilian Defence in chess?", "Who won the Eurovision Song Contest in 2019?",
    "How do I renew my passport?", "What is the best anime of all time?",
]

NEAR_TOPIC = [
    "What was Nikola Tesla's favourite food?", "How much did a ticket to Super Bowl 50 cost?",
    "What is the phone number of the Victoria and Albert Museum?", "What colour was Genghis Khan's horse?",
    "How many students will the University of Chicago have in 2040?", "What is Martin Luther's shoe size?",
    "Which Doctor Who actor has the most Instagram followers?", "What is the wifi password at Harvard library?",
    "How many penguins live in the Amazon rainforest?", "What is the Scottish Parliament's canteen menu?",
    "Who will win the next Kenyan presidential election?", "What is the largest prime number ever sold at auction?",
    "How many pages does the IPCC's 2031 report have?", "Which Rhine bridge has the best view at sunset?",
    "What did the Normans eat for breakfast?",
]


def _xquad_docs() -> tuple[list[tuple[str, str]], list[str]]:
    data = json.loads((DATA / "xquad" / "xquad.en.json").read_text())["data"]
    docs, questions = [], []
    for art in data:
        title = art["title"].replace("_", " ")
        docs.append((title, f"# {title}\n\n" + "\n\n".join(p["context"] for p in art["paragraphs"])))
        questions.extend(q["question"] for p in art["paragraphs"] for q in p["qas"])
    return docs, questions


def _pubmed_docs() -> tuple[list[tuple[str, str]], list[str]]:
    data = json.loads((DATA / "pubmedqa" / "ori_pqal.json").read_text())
    docs, questions = [], []
    for pmid, item in list(data.items())[:PUBMED_DOCS]:
        title = f"PubMed {pmid}"
        docs.append((title, f"# {title}\n\n" + "\n\n".join(item["CONTEXTS"])))
        questions.append(item["QUESTION"])
    return docs, questions


def open_corpus(name: str, embedder: Embedder) -> tuple[Library, list[str]]:
    """The cached library for a corpus (built on first use) and its answerable questions."""
    docs, questions = _xquad_docs() if name == "xquad" else _pubmed_docs()
    settings = Settings(data_dir=CACHE / f"relevance_{name}")
    lib = Library(settings, embedder=embedder)
    if len(lib.documents()) < len(docs):
        t = time.perf_counter()
        for title, text in docs:
            lib.ingest_bytes(text.encode(), f"{title}.md")
        print(f"[{name}] ingested {len(docs)} documents in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return lib, questions


def scores(lib: Library, questions: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(dense cosine of the best passage, fused top score of the default method) per question."""
    vecs = lib.embedder.encode(questions)
    dense, fused = [], []
    for q, v in zip(questions, vecs):
        best = lib.store.query(v.tolist(), None, 1)
        dense.append(best[0].score if best else 0.0)
        top = retrieve(lib.store, q, 1)
        fused.append(top[0].score if top else 0.0)
    return np.array(dense), np.array(fused)


def pct(a: np.ndarray) -> dict:
    return {p: round(float(np.percentile(a, p)), 3) for p in (0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    random.seed(0)
    embedder = Embedder()
    out: dict = {}
    for name in ("xquad", "pubmedqa"):
        lib, answerable = open_corpus(name, embedder)
        try:
            sets = {"answerable": answerable, "off_topic": OFF_TOPIC}
            if name == "xquad":
                sets["near_topic"] = NEAR_TOPIC
            res = {k: scores(lib, qs) for k, qs in sets.items()}
        finally:
            lib.close()
        table = []
        for th in np.round(np.arange(0.10, 0.46, 0.025), 3):
            row = {"threshold": float(th),
                   "false_refusals_answerable": round(float((res["answerable"][0] < th).mean()), 4),
                   "refused_off_topic": round(float((res["off_topic"][0] < th).mean()), 4)}
            if "near_topic" in res:
                row["refused_near_topic"] = round(float((res["near_topic"][0] < th).mean()), 4)
            table.append(row)
        out[name] = {
            "counts": {k: len(v) for k, v in sets.items()},
            "dense_percentiles": {k: pct(v[0]) for k, v in res.items()},
            f"{DEFAULT_METHOD}_percentiles": {k: pct(v[1]) for k, v in res.items()},
            "thresholds": table,
            "off_topic_max": {"question": OFF_TOPIC[int(np.argmax(res["off_topic"][0]))],
                              "score": round(float(res["off_topic"][0].max()), 3)},
            "answerable_lowest": sorted(
                ({"question": q, "score": round(float(s), 3)} for q, s in zip(answerable, res["answerable"][0])),
                key=lambda r: r["score"])[:8],
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        print(f"\n== {name}: {r['counts']}")
        for kind in ("dense_percentiles", f"{DEFAULT_METHOD}_percentiles"):
            print(f"  {kind}:")
            for k, v in r[kind].items():
                print(f"    {k:11} " + "  ".join(f"p{p}={x}" for p, x in v.items()))
        print("  threshold  false-refusals(answerable)  refused(off-topic)  refused(near-topic)")
        for row in r["thresholds"]:
            print(f"    {row['threshold']:.3f}    {row['false_refusals_answerable']:.3f}"
                  f"                      {row['refused_off_topic']:.3f}"
                  f"              {row.get('refused_near_topic', float('nan')):.3f}")
        print(f"  highest off-topic: {r['off_topic_max']}")
        print("  lowest answerable:", *(f"\n    {x['score']}  {x['question']}" for x in r["answerable_lowest"]))


if __name__ == "__main__":
    main()
