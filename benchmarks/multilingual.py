"""Questions and documents in different languages: what retrieval finds, and whether the reply says why it may not.

Run: .venv/bin/python -m benchmarks.multilingual [--json] [--model NAME] [--set FILE]

`--model NAME` runs everything with DOCCHAT_EMBEDDING_MODEL=NAME (e.g. multilingual-e5-small); each model has its own
cached libraries (rag_core.adapters.evaluation.cache_settings keys them by the model).

The set is benchmarks/data/multilingual.jsonl (benchmarks/data/multilingual.md): French, German, Spanish, Russian,
Chinese and Arabic questions over the English XQuAD articles (`xx-en`), and English questions over paragraphs
translated into those languages (`en-xx`), split tune/test by article as the paraphrased set. Figures per direction
and split, then per direction and language:
- recall@1/@5 of the default retrieval, next to the same questions asked in English. `xx-en` asks the English XQuAD
  library (the cached one the other benchmarks use). `en-xx` asks a library of its own: XQuAD with each translated
  paragraph's English original taken out of its article, plus the translations as documents of their own (so the
  answer is only in the other language); a hit is the translated paragraph;
- `told`: the share of questions whose reply carries the language sentence (rag_core.answer.language, computed on
  the passages retrieved, as the reply does);
- `silent_miss`: the share where the gold passage is not in the top 5 and the reply says nothing about language;
- on the English questions over the English library (XQuAD's 1,190, the 336 paraphrased, the 252 unanswerable):
  `false_told`, the share wrongly told they asked in another language.

`--set benchmarks/data/multilingual_scripts.jsonl` asks the same of a small set in three languages the language
identifier does not know (Thai, Bengali, Tamil: rag_core.core.language_id.LANGUAGES), written in their own scripts
(benchmarks/data/multilingual.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag_core.adapters import evaluation as ev
from rag_core.answer.language import language_notice, with_language_notice
from rag_core.core.config import Settings, load_settings
from rag_core.retrieve.search import embed_queries, retrieve
from rag_core.service.library import Library

SET = ev.DATA_DIR / "multilingual.jsonl"
K = 5
DIRECTIONS = ("xx-en", "en-xx")
MODEL_ENV = "DOCCHAT_EMBEDDING_MODEL"


def load_set(path: Path = SET) -> list[dict]:
    """The multilingual questions."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


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


def model_settings(model: str | None) -> Settings:
    """The run's settings; with `model`, DOCCHAT_EMBEDDING_MODEL=model for the whole run (every Settings read later too)."""
    if model:
        os.environ[MODEL_ENV] = model
    return load_settings()  # Settings() alone reads no environment variable


def library_settings(ds: ev.Dataset, rows: list[dict], base: Settings) -> tuple[Settings, Settings]:
    """The English XQuAD library's settings (the cached one the other benchmarks use) and the mixed library's: its own
    folder, keyed like the English one by the model and by the translated paragraphs it holds."""
    english = ev.cache_settings(ds, base, ev.DEFAULT_CACHE_DIR)
    translated = sorted({r["passage"] for r in rows if r["direction"] == "en-xx"})
    key = hashlib.sha256("\n".join(translated).encode("utf-8")).hexdigest()[:8]
    folder = english.library.data_dir
    return english, english.with_overrides(collection="eval_multilingual",
                                           data_dir=folder.with_name(f"{folder.name}-multilingual-{key}"))


def ask(store, questions: list[str]) -> list[list]:
    """The top-K passages for each question (default method)."""
    vectors = embed_queries(store, questions)
    return [retrieve(store, q, k=K, vectors=v) for q, v in zip(questions, vectors, strict=True)]


def rate(flags: list[bool]) -> float:
    """Share of True."""
    return round(sum(flags) / max(1, len(flags)), 4)


@dataclass(frozen=True)
class Outcome:
    """One question of the set: where its gold passage ranked, and whether the reply would say the languages differ."""

    direction: str
    lang: str
    split: str
    rank: int | None
    told: bool  # the reply's sentence (with the library at hand, as the app)
    told_by_passages: bool  # the sentence from the passages alone
    english_rank: int | None = None  # the same question asked in English (xx-en)


def hit(rank: int | None) -> bool:
    """In the top K."""
    return rank is not None and rank <= K


def figures(outcomes: list[Outcome]) -> dict:
    """R@1, R@5, told and silent misses of some questions (and R@1/R@5 of their English originals, when known)."""
    fig = {"n": len(outcomes), "recall@1": rate([o.rank == 1 for o in outcomes]),
           "recall@5": rate([hit(o.rank) for o in outcomes]), "told": rate([o.told for o in outcomes]),
           "silent_miss": rate([not hit(o.rank) and not o.told for o in outcomes]),
           "told_by_passages": rate([o.told_by_passages for o in outcomes])}
    if outcomes and all(o.direction == "xx-en" for o in outcomes):
        fig["english_recall@1"] = rate([o.english_rank == 1 for o in outcomes])
        fig["english_recall@5"] = rate([hit(o.english_rank) for o in outcomes])
    return fig


def ask_the_set(rows: list[dict], ds: ev.Dataset, docs: dict[str, ev.Document], english_lib: Library,
                mixed_lib: Library) -> list[Outcome]:
    """Every question of the set asked of its library: xx-en of the English one, en-xx of the mixed one."""
    by_qid = {q.qid: q for q in ds.queries}
    outcomes = []
    for direction in DIRECTIONS:
        lib = english_lib if direction == "xx-en" else mixed_lib
        part = [r for r in rows if r["direction"] == direction]
        if direction == "xx-en":
            gold = [by_qid[r["qid"]] for r in part]
            english = [ev.first_hit(g, ps) for g, ps in zip(gold, ask(lib.store, [g.question for g in gold]), strict=True)]
        else:
            gold = [ev.Query(r["id"], r["question"], docs[r["passage"]].doc_id) for r in part]
            english = [None] * len(part)
        asked = ask(lib.store, [r["question"] for r in part])
        for r, g, ps, en in zip(part, gold, asked, english, strict=True):
            outcomes.append(Outcome(direction, r["lang"], r["split"], ev.first_hit(g, ps),
                                    with_language_notice(None, r["question"], ps, lib.store) is not None,
                                    language_notice(r["question"], ps) is not None, en))
    return outcomes


def grouped(outcomes: list[Outcome], key: Callable[[Outcome], str]) -> dict[str, dict]:
    """Figures per group, in the order the groups first appear."""
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(key(o), []).append(o)
    return {name: figures(part) for name, part in groups.items()}


def false_told(ds: ev.Dataset, rows: list[dict], english_lib: Library, mixed_lib: Library) -> dict[str, dict]:
    """The sentence on English questions: over the mixed library (noise of the library sentence: the library holds
    other languages), and wrongly told on the English library (XQuAD, paraphrased, unanswerable)."""
    report: dict[str, dict] = {}
    moved = {r["qid"] for r in rows if r["direction"] == "en-xx" and r.get("qid")}
    plain = [q.question for q in ds.queries if q.qid not in moved][:300]
    told = [with_language_notice(None, q, ps, mixed_lib.store) is not None
            for q, ps in zip(plain, ask(mixed_lib.store, plain), strict=True)]
    report["english on the mixed library"] = {"n": len(plain), "told": rate(told)}
    english_sets = {"xquad": [q.question for q in ds.queries]}
    for name in ("paraphrased", "unanswerable"):
        english_sets[name] = [json.loads(line)["question"] for line in
                              (ev.DATA_DIR / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    for name, questions in english_sets.items():
        told = [with_language_notice(None, q, ps, english_lib.store) is not None
                for q, ps in zip(questions, ask(english_lib.store, questions), strict=True)]
        report[f"english {name}"] = {"n": len(questions), "false_told": rate(told)}
    return report


def run(model: str | None = None, path: Path = SET) -> dict:
    """All the figures, with the default embedding model or `model`, of the set in `path`."""
    rows = load_set(path)
    ds = ev.load_dataset("xquad")
    docs = translated_documents(rows)
    english_settings, mixed_settings = library_settings(ds, rows, model_settings(model))
    english_lib, mixed_lib = Library(english_settings), Library(mixed_settings)
    try:
        ev.ingest_dataset(english_lib, ds)
        ev.ingest_dataset(mixed_lib, without_originals(ds, rows))
        for d in docs.values():
            mixed_lib.ingest_document(d)
        outcomes = ask_the_set(rows, ds, docs, english_lib, mixed_lib)
        report: dict = {"model": english_settings.library.embedding_model,
                        "multilingual": bool(getattr(english_lib.embedder, "multilingual", False))}
        report.update(grouped(outcomes, lambda o: f"{o.direction} {o.split}"))
        report.update(grouped(outcomes, lambda o: f"{o.direction} {o.lang}"))
        report.update(grouped(outcomes, lambda o: f"{o.direction} all"))
        report.update(false_told(ds, rows, english_lib, mixed_lib))
    finally:
        english_lib.close()
        mixed_lib.close()
    return report


def main() -> None:
    """Print the figures (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--model", metavar="NAME", help=f"the embedding model ({MODEL_ENV}); default: the settings' model")
    ap.add_argument("--set", metavar="FILE", type=Path, default=SET, help=f"the question set; default: {SET.name}")
    args = ap.parse_args()
    report = run(args.model, args.set)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"model {report.pop('model')} (multilingual: {report.pop('multilingual')})")
    for name, fig in report.items():
        print(f"{name:30} " + "  ".join(f"{k} {v}" for k, v in fig.items()))


if __name__ == "__main__":
    main()
