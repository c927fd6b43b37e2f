"""Questions per second and median latency with 1, 4 and 8 concurrent sessions (one thread each, as Streamlit runs
them) against one embedded Qdrant store and the instant scripted Ollama-compatible server.

Run: .venv/bin/python -m benchmarks.concurrency [--sessions 1 4 8] [--questions 8] [--json]

Set-up (not timed): a demo library (DemoHub) with the shared samples and, per session, one private fixture file.
Each session then asks `--questions` questions back to back through SessionLibrary.answer() (rate limit lifted):
rewrite-free question -> query embedding -> relevance check -> hybrid retrieval (owner-filtered) -> streamed reply
from tests/ollama_server.py (instant) -> citation resolution. Throughput = all answers / wall time of the round;
latency = per-answer wall time. Ratios are against the 1-session round of the same run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.demo.hub import DemoHub, new_session_id
from rag_core.service.library import Library
from tests.ollama_server import OllamaServer, Reply

ROOT = Path(__file__).resolve().parents[1]

DOCS = ROOT / "tests" / "fixtures" / "documents"
FILES = ["docx_headings_toc.docx", "docx_paragraphs-and-tables.docx", "docx_table_merged-cells.docx",
         "docx_headings-lists-tables-images.docx", "pdf_text_4-pages_pdflatex.pdf", "pdf_text_multicolumn_3-pages.pdf",
         "pdf_text_outline-bookmarks_4-pages.pdf", "pdf_non-latin_arabic.pdf"]
QUESTIONS = ["Which is better, beautiful or ugly?", "Who designed Python?", "What does the demo guide say about limits?",
             "What is in the table?", "What does a blind text tell you?", "How is Python's memory managed?",
             "What happens to my documents when I leave?", "What is the Zen of Python about?"]
MODEL = "llama3.2:3b"


def run_round(hub: DemoHub, sessions: list, questions: int) -> dict:
    """All sessions ask `questions` questions at the same time; returns throughput and latency figures."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(sessions))

    def worker(i: int) -> None:
        s = hub.session(sessions[i])
        barrier.wait()
        for q in range(questions):
            t = time.perf_counter()
            try:
                ans = s.answer(QUESTIONS[(i + q) % len(QUESTIONS)])
                if ans.mode not in ("model", "not_found"):
                    raise RuntimeError(f"unexpected mode {ans.mode}: {ans.notice}")
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                latencies.append(time.perf_counter() - t)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(sessions))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = sorted(latencies)
    return {"sessions": len(sessions), "answers": len(lat), "errors": len(errors), "wall_s": round(wall, 2),
            "questions_per_s": round(len(lat) / wall, 2),
            "median_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
            "p95_ms": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))] * 1000, 1) if lat else None,
            "first_errors": errors[:3]}


def main() -> None:
    """Print q/s and median latency per concurrency level."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--questions", type=int, default=8, help="questions per session per round")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    most = max(args.sessions)

    with tempfile.TemporaryDirectory() as tmp, OllamaServer(models=[MODEL], default=Reply("From the sources [1].")) as srv:
        settings = Settings(data_dir=Path(tmp) / "data", mode="demo", ollama_host=srv.url, ollama_model=MODEL,
                            ollama_api_key="bench", demo_questions_per_minute=10**6, llm_timeout_s=60,
                            demo_client_questions_per_minute=100_000, demo_questions_per_minute_total=1_000_000)
        lib = Library(settings)
        hub = DemoHub(lib)
        hub.load_samples()
        sessions = [new_session_id() for _ in range(most)]
        for i, sid in enumerate(sessions):
            f = DOCS / FILES[i % len(FILES)]
            r = hub.session(sid).ingest_bytes(f.read_bytes(), f.name)
            assert r.status == "added", r
        hub.session(sessions[0]).answer(QUESTIONS[0])  # warm-up (first ChatOllama, first query)
        rounds = [run_round(hub, sessions[:n], args.questions) for n in args.sessions]
        chunks = lib.store.count_chunks()
        lib.close()

    base = rounds[0]["questions_per_s"] or 1.0
    for r in rounds:
        r["throughput_vs_first"] = round(r["questions_per_s"] / base, 2)
    report = {"store_chunks": chunks, "questions_per_session": args.questions, "rounds": rounds}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"embedded Qdrant, {chunks} chunks; {args.questions} questions per session; instant scripted LLM")
    print(f"{'sessions':>8} {'answers':>8} {'errors':>7} {'q/s':>7} {'x first':>8} {'median ms':>10} {'p95 ms':>8}")
    for r in rounds:
        print(f"{r['sessions']:>8} {r['answers']:>8} {r['errors']:>7} {r['questions_per_s']:>7.2f} "
              f"{r['throughput_vs_first']:>8.2f} {r['median_ms']:>10.1f} {r['p95_ms']:>8.1f}")
        for e in r["first_errors"]:
            print("   error:", e)


if __name__ == "__main__":
    main()
