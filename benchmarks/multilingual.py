"""Questions and documents in different languages: what retrieval finds, and whether the reply says why it may not.

Run: .venv/bin/python -m benchmarks.multilingual [--json]

The set is benchmarks/data/multilingual.jsonl (benchmarks/data/multilingual.md): French, German and Spanish
questions over the English XQuAD articles (`xx-en`), and English questions over paragraphs translated into those
languages (`en-xx`), split tune/test by article as the paraphrased set. Figures per direction and split:
- recall@1/@5 of the default retrieval, next to the same questions asked in English. `xx-en` asks the English XQuAD
  library (the cached one the other benchmarks use). `en-xx` asks a library of its own: XQuAD with each translated
  paragraph's English original taken out of its article, plus the translations as documents of their own (so the
  answer is only in the other language); a hit is the translated paragraph;
- `told`: the share of questions whose reply carries the language sentence (rag_core.answer.language, computed on
  the passages retrieved, as the reply does);
- `silent_miss`: the share where the gold passage is not in the top 5 and the reply says nothing about language;
- on the English questions over the English library (XQuAD's 1,190, the 336 paraphrased, the 252 unanswerable):
  `false_told`, the share wrongly told they asked in another language.
"""
from __future__ import annotations

import argparse
import json

from rag_core.adapters import evaluation as ev
from rag_core.answer.language import language_notice, with_language_notice
from rag_core.core.config import Settings
from rag_core.retrieve.search import embed_queries, retrieve
from rag_core.service.library import Library

SET = ev.DATA_DIR / "multilingual.jsonl"
K = 5


def load_set() -> list[dict]:
    """The multilingual questions."""
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def translated_documents(rows: list[dict]) -> dict[str, ev.Document]:
    """One document per translated paragraph (en-xx), keyed by the paragraph text."""
    docs: dict[str, ev.Document] = {}
    for r in rows:
        if r["direction"] == "en-xx" and r["passage"] not in docs:
            doc_id = f"ml-{r['lang']}-{len(docs)}"
            docs[r["passage"]] = ev._document(doc_id, f"{r['title'].replace('_', ' ')} ({r['lang']})", r["passage"],
                                              f"{doc_id}.md")
    return docs


def without_originals(ds: ev.Dataset, rows: list[dict]) -> ev.Dataset:
    """XQuAD with the English originals of the translated paragraphs taken out of their articles."""
    originals = {r["passage_en"].strip() for r in rows if r["direction"] == "en-xx"}
    kept = []
    for doc in ds.documents:
        paragraphs = [p for p in doc.text.split("\n\n") if p.strip() not in originals]
        text = "\n\n".join(paragraphs)
        kept.append(doc if text == doc.text else ev._document(doc.doc_id, doc.source.title, text, doc.source.file_name))
    return ev.Dataset(ds.name, tuple(kept), ds.queries, ds.fingerprint + "-without-originals")


def ask(store, questions: list[str]) -> list[list]:
    """The top-K passages for each question (default method)."""
    vectors = embed_queries(store, questions)
    return [retrieve(store, q, k=K, vectors=v) for q, v in zip(questions, vectors, strict=True)]


def rate(flags: list[bool]) -> float:
    """Share of True."""
    return round(sum(flags) / max(1, len(flags)), 4)


def main() -> None:
    """Print the figures (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = load_set()
    ds = ev.load_dataset("xquad")
    by_qid = {q.qid: q for q in ds.queries}
    docs = translated_documents(rows)
    english_settings = ev.cache_settings(ds, Settings(), ev.DEFAULT_CACHE_DIR)
    mixed_settings = english_settings.with_overrides(
        collection="eval_multilingual",
        data_dir=english_settings.library.data_dir.with_name(english_settings.library.data_dir.name + "-multilingual-mixed"))
    english_lib, mixed_lib = Library(english_settings), Library(mixed_settings)
    report: dict = {}
    try:
        ev.ingest_dataset(english_lib, ds)
        ev.ingest_dataset(mixed_lib, without_originals(ds, rows))
        for d in docs.values():
            mixed_lib.ingest_document(d)
        for direction in ("xx-en", "en-xx"):
            lib = english_lib if direction == "xx-en" else mixed_lib
            for split in ("tune", "test"):
                part = [r for r in rows if r["direction"] == direction and r["split"] == split]
                if direction == "xx-en":
                    gold = [by_qid[r["qid"]] for r in part]
                    english = [g.question for g in gold]
                else:
                    gold = [ev.Query(r["id"], r["question"], docs[r["passage"]].doc_id) for r in part]
                    english = None
                asked = ask(lib.store, [r["question"] for r in part])
                ranks = [ev.first_hit(g, ps) for g, ps in zip(gold, asked, strict=True)]
                told = [with_language_notice(None, r["question"], ps, lib.store) is not None
                        for r, ps in zip(part, asked, strict=True)]
                fig_passages_told = rate([language_notice(r["question"], ps) is not None
                                          for r, ps in zip(part, asked, strict=True)])
                fig = {"n": len(part), "recall@1": rate([r == 1 for r in ranks]),
                       "recall@5": rate([r is not None and r <= K for r in ranks]), "told": rate(told),
                       "silent_miss": rate([(r is None or r > K) and not t for r, t in zip(ranks, told, strict=True)]),
                       "told_by_passages": fig_passages_told}
                if english is not None:
                    en_ranks = [ev.first_hit(g, ps) for g, ps in zip(gold, ask(lib.store, english), strict=True)]
                    fig["english_recall@1"] = rate([r == 1 for r in en_ranks])
                    fig["english_recall@5"] = rate([r is not None and r <= K for r in en_ranks])
                for lang in ("fr", "de", "es"):
                    sub = [t for r, t in zip(part, told, strict=True) if r["lang"] == lang]
                    fig[f"told_{lang}"] = rate(sub)
                report[f"{direction} {split}"] = fig
        # Noise of the library sentence: English questions whose answer is in an English paragraph of the mixed
        # library (the translated paragraphs' questions left out) are told too, since the library holds other languages.
        moved = {r["qid"] for r in rows if r["direction"] == "en-xx" and r.get("qid")}
        plain = [q.question for q in ds.queries if q.qid not in moved][:300]
        told = [with_language_notice(None, q, ps, mixed_lib.store) is not None
                for q, ps in zip(plain, ask(mixed_lib.store, plain), strict=True)]
        report["english on the mixed library"] = {"n": len(plain), "told": rate(told)}
        lib = english_lib
        english_sets = {"xquad": [q.question for q in ds.queries]}
        for name in ("paraphrased", "unanswerable"):
            english_sets[name] = [json.loads(line)["question"] for line in
                                  (ev.DATA_DIR / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        for name, questions in english_sets.items():
            told = [with_language_notice(None, q, ps, lib.store) is not None
                    for q, ps in zip(questions, ask(lib.store, questions), strict=True)]
            report[f"english {name}"] = {"n": len(questions), "false_told": rate(told)}
    finally:
        english_lib.close()
        mixed_lib.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, fig in report.items():
        print(f"{name:22} " + "  ".join(f"{k} {v}" for k, v in fig.items()))


if __name__ == "__main__":
    main()
