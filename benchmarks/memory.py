"""Resident memory of the app's process: after start-up, after the first answer, after ingesting the 117-page PDF.

Run: .venv/bin/python -m benchmarks.memory [--json] [--demo] [--library-10k] [--runtime onnx|torch] [--model NAME]
Goals: RSS after the first answer with a 10k-chunk library (--library-10k) <= 600 MB; peak while ingesting the
117-page PDF <= 900 MB.

Each run is a fresh process doing what the Streamlit app does, in order: import Streamlit and rag_core, open the
Library (embedding model + embedded Qdrant on a temporary data folder; with --demo also the DemoHub and the shared
samples), answer one question through the scripted Ollama-compatible server (tests/ollama_server.py, on loopback),
then ingest tests/fixtures/documents/pdf_text_long_117-pages_german.pdf and answer again. Figures are read from
/proc/self/status: VmRSS (resident now) and VmHWM (the peak so far). The baseline is the bare interpreter.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


LONG_PDF = ROOT / "tests" / "fixtures" / "documents" / "pdf_text_long_117-pages_german.pdf"
SMALL = ROOT / "tests" / "fixtures" / "documents" / "docx_headings_toc.docx"
MB = 1024 * 1024
GOAL_MB = 1024


def status_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return round(fields["VmRSS"], 1), round(fields["VmHWM"], 1)


def stage_marker(stages: list[dict]) -> Callable[..., None]:
    """mark(name, seconds=None): append this process's RSS and peak (after a garbage collection) to `stages`."""
    def mark(name: str, seconds: float | None = None) -> None:
        gc.collect()
        rss, peak = status_mb()
        stages.append({"stage": name, "rss_mb": rss, "peak_mb": peak,
                       "seconds": None if seconds is None else round(seconds, 1)})

    return mark


def main() -> None:
    """Print RSS and peak at each stage."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--demo", action="store_true", help="demo mode: DemoHub + shared samples, answers via a session")
    ap.add_argument("--library-10k", action="store_true",
                    help="start from a copy of the 10,000-chunk library of benchmarks.answer_latency (built on first use)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="override rag_core.store.embeddings.BATCH_SIZE (texts per model forward pass) to see its effect")
    ap.add_argument("--runtime", choices=["onnx", "torch"], default="onnx",
                    help="the embedding model on ONNX EmbeddingRuntime (the app's) or on torch (the optional extra), to compare")
    ap.add_argument("--model", default=None, help="the embedding model (DOCCHAT_EMBEDDING_MODEL), e.g. multilingual-e5-small; "
                    "with --library-10k its own 10k library, answer_latency_10k-MODEL, built with that model")
    args = ap.parse_args()
    stages: list[dict] = []
    mark = stage_marker(stages)

    mark("python interpreter (baseline)")
    t = time.perf_counter()
    import streamlit  # noqa: F401 - the app process has it loaded

    import rag_core.store.embeddings as embeddings
    from rag_core.answer import generation
    from rag_core.core.config import Settings
    from rag_core.demo.hub import DemoHub, new_session_id
    from rag_core.service.library import Library
    from tests.ollama_server import OllamaServer, Reply
    if args.runtime == "torch":
        embeddings.RUNTIME = embeddings.EmbeddingRuntime.TORCH
    if args.batch_size:
        embeddings.BATCH_SIZE = args.batch_size

    with tempfile.TemporaryDirectory() as tmp, OllamaServer(models=["llama3.2:3b"],
                                                              default=Reply("Beautiful beats ugly [1].")) as srv:
        if args.library_10k:
            import shutil

            from benchmarks.answer_latency import CACHE
            if args.model:
                CACHE = CACHE.with_name(f"{CACHE.name}-{args.model}")
            if not CACHE.is_dir():
                raise SystemExit("Build the 10k library first: .venv/bin/python -m benchmarks.answer_latency --runs 3")
            shutil.copytree(CACHE, Path(tmp) / "data")
        settings = Settings(data_dir=Path(tmp) / "data", ollama_host=srv.url, ollama_model="llama3.2:3b",
                            mode="demo" if args.demo else "local", ollama_api_key="k" if args.demo else None,
                            demo_max_file_mb=10, **({"embedding_model": args.model} if args.model else {}))
        lib = Library(settings)
        ask = None
        if args.demo:
            hub = DemoHub(lib)
            hub.load_samples()
            session = hub.session(new_session_id())
            ask = session.answer
        mark("start-up: streamlit + rag_core imported, library opened" + (", samples loaded" if args.demo else ""),
             time.perf_counter() - t)

        t = time.perf_counter()
        if args.demo:
            answer = ask("Which is better, beautiful or ugly?")
        else:
            lib.ingest_path(SMALL)
            answer = generation.answer(lib, "Which is better, beautiful or ugly?", settings)
        assert answer.text, answer.notice  # written, or quoted when the scripted reply matches no passage of the 10k library
        mark("after the first answer" + (" (10k-chunk library)" if args.library_10k else ""), time.perf_counter() - t)

        t = time.perf_counter()
        data = LONG_PDF.read_bytes()
        result = session.ingest_bytes(data, LONG_PDF.name) if args.demo else lib.ingest_path(LONG_PDF)
        assert result.status == "added", result
        del data
        mark(f"after ingesting the 117-page PDF ({result.chunks} chunks)", time.perf_counter() - t)

        t = time.perf_counter()
        question = "Was ist ein topologischer Raum?"
        answer = ask(question) if args.demo else generation.answer(lib, question, settings)
        mark("after a question over the PDF", time.perf_counter() - t)
        lib.close()

    report = {"mode": "demo" if args.demo else "local", "runtime": args.runtime, "library_10k": args.library_10k, "batch_size": embeddings.BATCH_SIZE, "goal_mb": GOAL_MB,
              "stages": stages,
              "max_peak_mb": max(s["peak_mb"] for s in stages), "torch_threads": _torch_threads(),
              "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX")}
    report["under_goal"] = report["max_peak_mb"] < GOAL_MB
    if args.json:
        print(json.dumps(report, indent=2))
        return
    base = stages[0]["rss_mb"]
    print(f"mode: {report['mode']}   goal: every figure < {GOAL_MB} MiB   (MALLOC_ARENA_MAX={report['malloc_arena_max']}, "
          f"embedding batch {report['batch_size']})")
    print(f"{'stage':78} {'RSS MiB':>8} {'peak MiB':>9} {'x base':>7} {'s':>6}")
    for s in stages:
        secs = "" if s["seconds"] is None else f"{s['seconds']:.1f}"
        print(f"{s['stage']:78} {s['rss_mb']:8.0f} {s['peak_mb']:9.0f} {s['rss_mb'] / base:7.1f} {secs:>6}")
    print(f"highest peak: {report['max_peak_mb']:.0f} MiB -> {'under' if report['under_goal'] else 'OVER'} the goal")


def _torch_threads() -> int | None:
    try:
        import torch

        return torch.get_num_threads()
    except ImportError:
        return None


if __name__ == "__main__":
    main()
