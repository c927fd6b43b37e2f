"""Question -> first streamed token, with a 10,000-chunk library and an instant scripted Ollama server.

The library is built once from PubMedQA abstracts (benchmarks/data/pubmedqa/ori_pqal.json: the context sections
and conclusions, cut into overlapping five-sentence windows, ~670 characters each) through Store.add_chunks with
real MiniLM vectors, and cached in benchmarks/.cache/answer_latency_10k (delete it to rebuild). The server is tests/ollama_server.py replying at once,
so the figure is DocChat's own overhead: embed the question, relevance check, hybrid retrieval, prompt build, the
HTTP round trip through ChatOllama. Baselines measured in the same run: a bare query embedding (dense + lexical), a
bare dense top-1 search, a bare retrieve() with those vectors, and a bare ChatOllama request to the same server.

Run: .venv/bin/python -m benchmarks.answer_latency [--runs 15] [--json]      goal: median <= 60 ms
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

from rag_core.answer import generation as gen
from rag_core.answer.generation.extractive import quotable_spans
from rag_core.core.config import Settings
from rag_core.core.models import Chunk, SourceMeta
from rag_core.llm.chat import chat_messages, chat_model
from rag_core.retrieve.search import embed_queries, retrieve
from rag_core.service.library import Library
from rag_core.store.embeddings import Embedder
from tests.ollama_server import OllamaServer, Reply

ROOT = Path(__file__).resolve().parents[1]

DATA = ROOT / "benchmarks" / "data" / "pubmedqa" / "ori_pqal.json"
CACHE = ROOT / "benchmarks" / ".cache" / "answer_latency_10k"
N_CHUNKS = 10_000
MODEL = "llama3.2:3b"
GOAL_MS = 60.0
WINDOW = 5  # sentences per chunk, sliding by one: ~150-token chunks, close to the app's 200-word-piece chunks


def _documents() -> tuple[list[tuple[SourceMeta, list[Chunk]]], list[str]]:
    """PubMedQA abstracts as documents of sliding five-sentence chunks, until N_CHUNKS chunks; plus the questions."""
    data = json.loads(DATA.read_text())
    docs, questions, total = [], [], 0
    for pmid, item in data.items():
        text = "\n\n".join(item["CONTEXTS"] + [item["LONG_ANSWER"]])
        sha = hashlib.sha256(text.encode()).hexdigest()
        src = SourceMeta(file_name=f"pubmed_{pmid}.txt", title=f"PubMed {pmid}", kind="txt", sha256=sha,
                         added_at="2026-11-01T00:00:00+00:00")
        spans = quotable_spans(text)
        chunks = []
        for i in range(0, max(1, len(spans) - WINDOW + 1)):
            s, e = spans[i][0], spans[min(i + WINDOW, len(spans)) - 1][1]
            chunks.append(Chunk(doc_id=sha[:16], index=len(chunks), text=text[s:e], char_start=s, char_end=e,
                                page_start=None, page_end=None, heading_path=(), source=src))
        chunks = chunks[:N_CHUNKS - total]
        if chunks:
            docs.append((src, chunks))
            questions.append(item["QUESTION"])
            total += len(chunks)
        if total >= N_CHUNKS:
            break
    if total < N_CHUNKS:  # not enough abstracts: repeat them as further documents (distinct ids)
        base, rep = list(docs), 1
        while total < N_CHUNKS:
            for src, chunks in base:
                sha = hashlib.sha256(f"{rep}:{src.sha256}".encode()).hexdigest()
                extra = [Chunk(sha[:16], c.index, c.text, c.char_start, c.char_end, None, None, (), src)
                         for c in chunks][:N_CHUNKS - total]
                if not extra:
                    break
                docs.append((src, extra))
                total += len(extra)
            rep += 1
    return docs, questions


def open_library(embedder: Embedder, settings: Settings) -> tuple[Library, list[str]]:
    """The cached 10k-chunk library (built on first use) and PubMedQA questions about it."""
    docs, questions = _documents()
    lib = Library(settings, embedder=embedder)
    have = lib.store.count_chunks()
    if have < N_CHUNKS:
        print(f"building the {N_CHUNKS}-chunk library in {settings.library.data_dir} (once) ...", file=sys.stderr)
        t = time.perf_counter()
        done = {d.doc_id for d in lib.documents()}
        todo = [(s, c) for s, c in docs if c[0].doc_id not in done]
        flat = [c for _, cs in todo for c in cs]
        dense, sparse = lib.store.embed_chunks(flat)
        pos = 0
        for src, chunks in todo:
            n = len(chunks)
            lib.store.add_chunks(src, chunks, None, vectors=(dense[pos:pos + n], sparse[pos:pos + n]))
            pos += n
        print(f"built in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return lib, questions


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 2) if xs else float("nan")


def run(runs: int) -> dict:
    embedder = Embedder()
    settings = Settings(data_dir=CACHE, top_k=5)
    lib, questions = open_library(embedder, settings)
    try:
        chunks = lib.store.count_chunks()
        with OllamaServer(models=[MODEL], default=Reply("The study found a clear effect [1].")) as srv:
            s = settings.with_overrides(ollama_host=srv.url, ollama_model=MODEL)
            qs = questions[:runs + 3]
            for q in qs[:3]:  # warm-up: model, Qdrant caches, HTTP connection pool
                gen.answer(lib, q, s)
            first, modes, breakdown = [], {}, {k: [] for k in
                                               ("embed_query", "retrieve", "prompt_build")}
            for q in qs[3:]:
                t0 = time.perf_counter()
                stream = gen.start_answer(lib, q, s)
                it = iter(stream)
                next(it)
                t_first = time.perf_counter() - t0
                for _ in it:
                    pass
                ans = stream.answer
                modes[ans.mode] = modes.get(ans.mode, 0) + 1
                if ans.mode != "model":
                    continue
                first.append(_ms(t_first))
                for k in breakdown:
                    breakdown[k].append(stream.timings[k])
            # bare baselines, same run, same questions: the parts the pipeline cannot avoid
            base = {"embed_query": [], "dense_search": [], "retrieve": [], "chat_first_token": []}
            llm = chat_model(s)
            for q in qs[3:]:
                t = time.perf_counter()
                qv = embed_queries(lib.store, [q])[0]
                base["embed_query"].append(_ms(time.perf_counter() - t))
                t = time.perf_counter()
                lib.store.query(qv.dense, None, 1)
                base["dense_search"].append(_ms(time.perf_counter() - t))
                t = time.perf_counter()
                retrieve(lib.store, q, 5, vectors=qv)
                base["retrieve"].append(_ms(time.perf_counter() - t))
                t = time.perf_counter()
                stream = llm.stream(chat_messages("system", "user"), options={"num_ctx": 4096})
                next(iter(stream))
                base["chat_first_token"].append(_ms(time.perf_counter() - t))
                for _ in stream:
                    pass
    finally:
        lib.close()
    med = _median(first)
    return {"chunks": chunks, "runs": len(first), "modes": modes,
            "first_token_ms": {"median": med, "min": min(first) if first else None,
                               "max": max(first) if first else None},
            "breakdown_median_ms": {k: _median(v) for k, v in breakdown.items()},
            "baseline_median_ms": {k: _median(v) for k, v in base.items()},
            "ratio_to_bare_parts": round(med / sum(_median(v) for v in base.values()), 3),
            "goal_ms": GOAL_MS, "goal_met": med <= GOAL_MS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args.runs)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"library: {r['chunks']} chunks; {r['runs']} questions answered by the scripted server; modes {r['modes']}")
    f = r["first_token_ms"]
    print(f"question -> first token: median {f['median']} ms (min {f['min']}, max {f['max']}); goal <= {GOAL_MS} ms: "
          f"{'met' if r['goal_met'] else 'NOT met'}")
    print("breakdown (median ms): " + ", ".join(f"{k} {v}" for k, v in r["breakdown_median_ms"].items()))
    print("bare baselines (median ms): " + ", ".join(f"{k} {v}" for k, v in r["baseline_median_ms"].items()))
    print(f"first token / sum of the bare parts (embed + dense top-1 + retrieve + chat round trip) = "
          f"{r['ratio_to_bare_parts']}")


if __name__ == "__main__":
    main()
