"""Retrieval evaluation: benchmark datasets through the normal ingestion path, Recall@1/@5 and MRR@10 per method."""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.core.models import DocKind, Document, Passage, Progress, Section, SourceMeta
from rag_core.retrieve.search import DEFAULT_METHOD, METHODS, QueryVectors, embed_queries, retrieve
from rag_core.store.embeddings import LEXICAL_VERSION

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "benchmarks" / "data"
DEFAULT_CACHE_DIR = REPO_ROOT / "benchmarks" / ".cache"
DATASET_FILES = {
    "pubmedqa": DATA_DIR / "pubmedqa" / "ori_pqal.json",
    "xquad": DATA_DIR / "xquad" / "xquad.en.json",
}
K_EVAL = 10  # passages fetched per question: MRR@10 needs the top 10
FAILURE_TOP = 5  # passages shown for each failed question



@dataclass(frozen=True)
class Query:
    """One question and what counts as a hit for it."""

    qid: str
    question: str
    doc_id: str | None = None  # hit = a passage of this document ...
    span: tuple[int, int] | None = None  # ... overlapping this character range of it (XQuAD's gold paragraph)
    expected: str | None = None  # user datasets: a title, or a phrase a passage must contain

    def describe(self) -> str:
        """What the query expects, for failure reports."""
        if self.expected is not None:
            return self.expected
        if self.span is not None:
            return f"{self.doc_id} chars {self.span[0]}-{self.span[1]}"
        return str(self.doc_id)


@dataclass(frozen=True)
class Dataset:
    """Documents to ingest (empty for a user's own library) and the questions asked of them."""

    name: str
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    fingerprint: str = ""


@dataclass
class MethodResult:
    """Ranks (1-based, None = not in the top K_EVAL) of the first hit per query for one method."""

    method: str
    ranks: list[int | None] = field(default_factory=list)
    seconds: float = 0.0

    def recall_at(self, k: int) -> float:
        """Share of queries with a hit in the top k."""
        return sum(1 for r in self.ranks if r is not None and r <= k) / max(1, len(self.ranks))

    def mrr(self, k: int = K_EVAL) -> float:
        """Mean reciprocal rank of the first hit, counting only the top k."""
        return sum(1.0 / r for r in self.ranks if r is not None and r <= k) / max(1, len(self.ranks))

    def metrics(self) -> dict[str, float]:
        """The reported metrics, rounded for display and JSON."""
        return {"recall@1": round(self.recall_at(1), 4), "recall@5": round(self.recall_at(5), 4),
                "mrr@10": round(self.mrr(10), 4)}


# -- datasets ----------------------------------------------------------------------------------------
def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _document(doc_id: str, title: str, text: str, file_name: str) -> Document:
    return Document(doc_id=doc_id, text=text, sections=(Section((), 0, len(text)),),
                    source=SourceMeta(file_name=file_name, title=title, kind=DocKind.TXT.value, sha256=_sha(text)))


def load_pubmedqa(path: Path = DATASET_FILES["pubmedqa"]) -> Dataset:
    """PubMedQA (pqa_labeled): each abstract (its CONTEXTS, one paragraph each) is a document; hit = that document."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    docs, queries = [], []
    for pmid, item in raw.items():
        doc_id = f"pubmedqa-{pmid}"
        # The title is the PubMed id on purpose: PubMedQA questions are often the article's title.
        docs.append(_document(doc_id, f"PMID {pmid}", "\n\n".join(item["CONTEXTS"]), f"{pmid}.txt"))
        queries.append(Query(qid=pmid, question=item["QUESTION"], doc_id=doc_id))
    return Dataset("pubmedqa", tuple(docs), tuple(queries), _file_sha(path))


def load_xquad(path: Path = DATASET_FILES["xquad"]) -> Dataset:
    """XQuAD: each article one document (paragraphs joined by blank lines); hit = a chunk overlapping the gold paragraph."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    docs, queries = [], []
    for article in raw["data"]:
        title = article["title"]
        doc_id = "xquad-" + re.sub(r"[^A-Za-z0-9_-]+", "_", title)
        parts: list[str] = []
        pos = 0
        for p in article["paragraphs"]:
            context = p["context"].strip()
            if parts:
                pos += 2  # the "\n\n" separator
            span = (pos, pos + len(context))
            parts.append(context)
            pos = span[1]
            for qa in p["qas"]:
                queries.append(Query(qid=qa["id"], question=qa["question"], doc_id=doc_id, span=span))
        text = "\n\n".join(parts)
        docs.append(_document(doc_id, title.replace("_", " "), text, f"{title}.md"))
    return Dataset("xquad", tuple(docs), tuple(queries), _file_sha(path))


def load_jsonl(path: Path) -> Dataset:
    """A user's questions, one JSON object a line: {"question": ..., "expected": title or phrase}; asked of their library."""
    queries = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            question, expected = str(obj["question"]).strip(), str(obj["expected"]).strip()
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path.name}, line {n}: expected a JSON object with \"question\" and \"expected\".") from e
        if not question or not expected:
            raise ValueError(f"{path.name}, line {n}: \"question\" and \"expected\" must not be empty.")
        queries.append(Query(qid=str(n), question=question, expected=expected))
    if not queries:
        raise ValueError(f"{path.name} contains no questions.")
    return Dataset(path.stem, (), tuple(queries))


def load_dataset(name: str) -> Dataset:
    """A bundled benchmark by name, or a user's FILE.jsonl."""
    if name in DATASET_FILES:
        return {"pubmedqa": load_pubmedqa, "xquad": load_xquad}[name](DATASET_FILES[name])
    path = Path(name)
    if path.suffix.lower() == ".jsonl":
        if not path.is_file():
            raise ValueError(f"{name}: no such file.")
        return load_jsonl(path)
    raise ValueError(f"Unknown dataset {name!r}: use pubmedqa, xquad or a FILE.jsonl of your own questions.")


def limit_dataset(ds: Dataset, limit: int | None) -> Dataset:
    """The first `limit` questions and only the documents they need (the rest are never embedded)."""
    if not limit or limit >= len(ds.queries):
        return ds
    queries = ds.queries[:limit]
    needed = {q.doc_id for q in queries}
    return Dataset(ds.name, tuple(d for d in ds.documents if d.doc_id in needed), queries, ds.fingerprint)


# -- ingestion (cached) ------------------------------------------------------------------------------
def cache_settings(ds: Dataset, base: Settings, cache_dir: Path) -> Settings:
    """Settings for the dataset's own cached library: a fresh collection keyed by everything that shapes its vectors."""
    key = _sha("|".join([ds.name, ds.fingerprint, base.library.embedding_model, str(base.ingest.chunk_tokens), LEXICAL_VERSION,
                         str(len(ds.documents))]))[:12]
    return base.with_overrides(data_dir=cache_dir / f"{ds.name}-{key}", qdrant_url=None, collection=f"eval_{ds.name}")


def ingest_dataset(library, ds: Dataset, progress: Progress | None = None) -> int:
    """Ingest every document through Library.ingest_document; already stored documents are skipped. Returns how many were added."""
    added = 0
    for i, doc in enumerate(ds.documents, 1):
        result = library.ingest_document(doc)
        added += result.status == "added"
        if progress:
            progress("ingesting", i, len(ds.documents))
    return added


# -- scoring -----------------------------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def is_hit(q: Query, p: Passage) -> bool:
    """Does this passage satisfy the query's expectation?"""
    c = p.chunk
    if q.expected is not None:
        want = _norm(q.expected)
        return want in (_norm(c.source.title), _norm(c.source.file_name)) or want in _norm(c.text)
    if c.doc_id != q.doc_id:
        return False
    if q.span is None:
        return True
    return c.char_start < q.span[1] and q.span[0] < c.char_end


def first_hit(q: Query, passages: list[Passage]) -> int | None:
    """1-based rank of the first passage that is a hit, or None."""
    for i, p in enumerate(passages, 1):
        if is_hit(q, p):
            return i
    return None


def _passage_row(p: Passage) -> dict:
    c = p.chunk
    return {"doc_id": c.doc_id, "title": c.source.title, "score": round(p.score, 4), "char_start": c.char_start,
            "char_end": c.char_end, "text": c.text[:300]}


def evaluate(store, ds: Dataset, methods: Iterable[str] = METHODS, progress: Progress | None = None,
             default: str = DEFAULT_METHOD) -> tuple[dict[str, MethodResult], list[dict]]:
    """Run every query with every method; returns per-method ranks and the failures (rank > 1) of the default
    method (or of the first method when the default is not among them)."""
    methods = list(methods)
    failing = default if default in methods else methods[0]
    questions = [q.question for q in ds.queries]
    vectors: list[QueryVectors] = embed_queries(store, questions)
    results = {m: MethodResult(m) for m in methods}
    failures: list[dict] = []
    total = len(ds.queries) * len(methods)
    done = 0
    for m in methods:
        res = results[m]
        t0 = time.perf_counter()
        for q, qv in zip(ds.queries, vectors):
            passages = retrieve(store, q.question, k=K_EVAL, method=m, vectors=qv)
            rank = first_hit(q, passages)
            res.ranks.append(rank)
            if m == failing and rank != 1:
                failures.append({"method": m, "id": q.qid, "question": q.question, "expected": q.describe(),
                                 "rank": rank, "top": [_passage_row(p) for p in passages[:FAILURE_TOP]]})
            done += 1
            if progress and done % 50 == 0:
                progress("asking", done, total)
        res.seconds = time.perf_counter() - t0
    return results, failures


def report_json(ds_name: str, results: dict[str, MethodResult], failures: list[dict], default: str) -> dict:
    """The --json shape: {"dataset", "default", "methods": {name: metrics}, "failures": [...]} plus query counts."""
    return {
        "dataset": ds_name,
        "default": default,
        "questions": len(next(iter(results.values())).ranks) if results else 0,
        "methods": {m: r.metrics() for m, r in results.items()},
        "failures": failures,
    }
