"""Time to the first word of a question asked while a 117-page PDF is being added, against the same question on an
idle library (issue 24: a question must not wait for the upload; goal: at most 3 s more than on a quiet machine).

Set-up (not timed): a Runtime (library + ingest queue, as the app builds it) in a temp data dir with the real embedder
(MiniLM on the CPU) and Qdrant Edge, one small document (tests/fixtures/documents/eu_capitals.md) to answer from, and
the scripted Ollama-compatible server of tests/ollama_server.py replying at once on 127.0.0.1, so the figure is
DocChat's own wait, not a model's.

Quiet: the question asked `--runs` times through LocalWorkspace.answer_stream (the answer the chat page runs on its
thread) with nothing else running.
During an upload: tests/fixtures/documents/pdf_text_long_117-pages_german.pdf (354 chunks) is added through
Workspace.add_file (the IngestQueue worker, as the Library page does); once its job reports the embedding stage the
question is asked after a random pause (so it lands anywhere in a batch), again and again while the embedding lasts;
then the upload is stopped (the Stop button's path) and started again until `--runs` questions were timed.
Time to first word = from asking to the first non-empty piece the answer stream yields (the chat page shows it then).

`--batch app 32` runs one round per upload batching: "app" as the app does it now (rag_core.store.vector_store: at most
EMBED_BATCH = 8 passages per model call, fewer when the machine is slow, sized to take EMBED_STEP_S), a number N fixed
batches of N (32 before commit 72df6f6, 8 from then until the steps were sized by time). `--uploads 2` adds the PDF
for two people at once (the hosted demo with its two ingest workers); `--fifo` puts upload batches in the questions'
line, in arrival order (the embedder lock before its priority lane). Also printed: how long the upload's model calls
held the embedder (what a question may have to wait for), the query embedding step of the answer (lock wait
included), and the load average (others may be using the machine).

Run: .venv/bin/python -m benchmarks.ask_during_upload [--batch app 32] [--runs 15] [--uploads 1] [--fifo] [--json]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_core.adapters.runtime import Runtime
from rag_core.core.config import Settings
from rag_core.service.workspace import Workspace
from rag_core.store import vector_store
from rag_core.store.embeddings import Embedder
from tests.ollama_server import OllamaServer, Reply

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "tests" / "fixtures" / "documents"
LONG_PDF = DOCS / "pdf_text_long_117-pages_german.pdf"
SMALL_DOC = DOCS / "eu_capitals.md"
QUESTION = "What is the capital of France?"
REPLY = "The capital of France is Paris [1]."
MODEL = "llama3.2:3b"
GOAL_S = 3.0
PAUSE_S = (0.05, 1.0)  # random pause before each question asked during an upload
MODEL_MODES = ("model", "ollama")  # the model wrote the answer (AnswerMode.MODEL; "ollama" before 0.4)


def load() -> str:
    """The 1-minute load average (what else was running), or "n/a" where the system has none."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return "n/a"


class HoldTimer:
    """Records how long each model call held the embedder (calls made under its lock), and whether an ingest
    worker made it."""

    def __init__(self, embedder: Embedder) -> None:
        self.calls: list[tuple[bool, float]] = []
        self._lock = threading.Lock()
        model = embedder._model  # the loaded SentenceTransformer: its encode() runs while the embedder lock is held
        inner: Callable[..., Any] = model.encode

        def timed(texts: list[str], *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(texts, *args, **kwargs)
            finally:
                with self._lock:
                    ingest = threading.current_thread().name.startswith("docchat-ingest")
                    self.calls.append((ingest, time.perf_counter() - t))

        model.encode = timed  # type: ignore[method-assign,assignment]

    def take(self) -> list[tuple[bool, float]]:
        """The calls recorded since the last take."""
        with self._lock:
            calls, self.calls = self.calls, []
        return calls


def _one_line(embedder: Embedder, texts: list[str], background: bool = False) -> Any:
    return Embedder.encode(embedder, texts)


def ask(ws: Workspace) -> tuple[float, float, str]:
    """Ask QUESTION; (seconds to the first non-empty piece, query embedding ms incl. the lock wait, answer mode)."""
    t0 = time.perf_counter()
    stream = ws.answer_stream(QUESTION)
    first = None
    for piece in stream:
        if first is None and piece.strip():
            first = time.perf_counter() - t0
    answer = stream.answer
    assert answer is not None and first is not None
    return first, float(answer.extra.get("timings", {}).get("embed_query", float("nan"))), str(answer.mode)


def _stage(ws: Workspace, job_ids: list[str]) -> str:
    jobs = ws.queue.jobs(job_ids)
    return jobs[0].stage if jobs and jobs[0].state == "running" else (jobs[0].state if jobs else "gone")


def _start_uploads(runtime: Runtime, ws: Workspace, data: bytes, uploads: int) -> list[tuple[str, str | None]]:
    """Queue the PDF `uploads` times (the first as this person, the others as other people); (job id, owner)."""
    jobs: list[tuple[str, str | None]] = [(ws.add_file(data, LONG_PDF.name), None)]
    for i in range(1, uploads):
        owner = f"someone-else-{i}"
        jobs.append((runtime.queue.submit_bytes(data, LONG_PDF.name, owner=owner), owner))
    return jobs


def _stop_uploads(runtime: Runtime, jobs: list[tuple[str, str | None]]) -> None:
    """Stop the uploads (or delete what finished meanwhile), so the next round adds the file again."""
    for job_id, owner in jobs:
        runtime.queue.cancel(job_id, owner=owner)
    if not runtime.queue.wait([j for j, _ in jobs], timeout=120):
        raise SystemExit("the uploads did not stop within 2 minutes")
    for view in runtime.queue.jobs([j for j, _ in jobs]):
        result = view.result
        if getattr(result, "status", None) == "added":
            runtime.library.delete(result.doc_id)


def during_upload(runtime: Runtime, ws: Workspace, runs: int, uploads: int, rng: random.Random) -> dict:
    """Ask while the PDF is being embedded until `runs` questions were timed."""
    data = LONG_PDF.read_bytes()
    firsts: list[float] = []
    embeds: list[float] = []
    modes: dict[str, int] = {}
    rounds = 0
    while len(firsts) < runs:
        rounds += 1
        jobs = _start_uploads(runtime, ws, data, uploads)
        ids = [j for j, _ in jobs]
        while _stage(ws, ids) not in ("embedding", "saving", "done", "gone"):
            time.sleep(0.02)
        while len(firsts) < runs:
            time.sleep(rng.uniform(*PAUSE_S))
            if _stage(ws, ids) != "embedding":
                break
            first, embed_ms, mode = ask(ws)
            modes[mode] = modes.get(mode, 0) + 1
            if mode in MODEL_MODES:
                firsts.append(first)
                embeds.append(embed_ms)
        _stop_uploads(runtime, jobs)
        if rounds > 3 * runs:
            raise SystemExit("the questions never met the upload's embedding stage")
    return {"firsts": firsts, "embeds": embeds, "modes": modes, "uploads_started": rounds}


def quiet(ws: Workspace, runs: int) -> dict:
    """The same question with nothing else running."""
    firsts: list[float] = []
    embeds: list[float] = []
    modes: dict[str, int] = {}
    for _ in range(runs):
        first, embed_ms, mode = ask(ws)
        modes[mode] = modes.get(mode, 0) + 1
        if mode in MODEL_MODES:
            firsts.append(first)
            embeds.append(embed_ms)
    return {"firsts": firsts, "embeds": embeds, "modes": modes}


def _summary(r: dict, holds: list[tuple[bool, float]] | None = None) -> dict:
    f = sorted(r["firsts"])
    out = {"runs": len(f), "modes": r["modes"],
           "first_word_median_s": round(statistics.median(f), 3) if f else None,
           "first_word_max_s": round(f[-1], 3) if f else None,
           "embed_query_median_ms": round(statistics.median(r["embeds"]), 1) if r["embeds"] else None}
    if holds is not None:
        batch = sorted(s for ingest, s in holds if ingest)
        out["upload_call_median_s"] = round(statistics.median(batch), 3) if batch else None
        out["upload_call_max_s"] = round(batch[-1], 3) if batch else None
        out["uploads_started"] = r["uploads_started"]
    return out


def batching(value: str) -> str:
    """argparse: "app" or a number of passages."""
    if value != "app" and not (value.isdigit() and int(value) > 0):
        raise argparse.ArgumentTypeError(f'"app" or a number of passages, not {value!r}')
    return value


def _batching(batch: str, shipped: dict[str, Any]) -> None:
    """Set the upload's batching: "app" (as shipped) or fixed batches of N passages."""
    for name, value in shipped.items():
        setattr(vector_store, name, value)
    if batch != "app":
        vector_store.EMBED_BATCH = int(batch)
        if "EMBED_STEP_S" in shipped:
            vector_store.EMBED_STEP_S = 1e9  # never smaller: fixed batches


def run(batches: list[str], runs: int, uploads: int, seed: int, fifo: bool = False) -> dict:
    """Quiet figure, then one round per batch size; all in one process and one library."""
    rng = random.Random(seed)
    embedder = Embedder()
    holds = HoldTimer(embedder)
    if fifo:  # every call in one line, in arrival order: an upload's batch is not sent behind the questions
        embedder.encode = functools.partial(_one_line, embedder)  # type: ignore[method-assign]
    out: dict[str, Any] = {"uploads_at_once": uploads, "fifo": fifo, "rounds": []}
    shipped = {n: getattr(vector_store, n) for n in ("EMBED_BATCH", "EMBED_STEP_S") if hasattr(vector_store, n)}
    with tempfile.TemporaryDirectory() as tmp, OllamaServer(models=[MODEL], default=Reply(REPLY)) as srv:
        settings = Settings(data_dir=Path(tmp) / "data", ollama_host=srv.url, ollama_model=MODEL, llm_timeout_s=60)
        runtime = Runtime(settings, embedder=embedder)
        try:
            ws = runtime.workspace(runtime.new_session_key())
            job = ws.add_file(SMALL_DOC.read_bytes(), SMALL_DOC.name)
            runtime.queue.wait([job], timeout=120)
            for _ in range(3):  # warm-up: the model's first calls, Qdrant, the HTTP connection
                ask(ws)
            load_before = load()
            holds.take()
            before = quiet(ws, runs)
            out["quiet"] = {**_summary(before), "load": load_before}
            for batch in batches:
                _batching(batch, shipped)
                load_before = load()
                holds.take()
                r = during_upload(runtime, ws, runs, uploads, rng)
                out["rounds"].append({"batch": batch, **_summary(r, holds.take()), "load": f"{load_before}-{load()}"})
            after = quiet(ws, runs)  # again at the end: did the machine get busier meanwhile?
            out["quiet_after"] = {**_summary(after), "load": load()}
        finally:
            runtime.close()
            _batching("app", shipped)
    # the quiet figure: the median of both quiet rounds (others' work on the machine comes and goes)
    base = out["quiet_median_s"] = round(statistics.median(before["firsts"] + after["firsts"]), 3)
    for r in out["rounds"]:
        r["extra_median_s"] = round(r["first_word_median_s"] - base, 3)
        r["extra_max_s"] = round(r["first_word_max_s"] - base, 3)
        r["goal_met"] = r["extra_max_s"] <= GOAL_S
    return out


def main() -> None:
    """Print the quiet figure and one line per upload batch size."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", nargs="+", type=batching, default=["app", "32"],
                    help='upload batching to compare: "app" (as shipped) or a fixed number of passages per batch')
    ap.add_argument("--runs", type=int, default=15, help="questions timed per figure")
    ap.add_argument("--uploads", type=int, default=1, help="the PDF added by this many people at once")
    ap.add_argument("--fifo", action="store_true",
                    help="upload batches wait in one line with questions (as before the priority lane)")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args.batch, args.runs, args.uploads, args.seed, args.fifo)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    q, qa = r["quiet"], r["quiet_after"]
    print(f"question -> first word, instant scripted model; {args.runs} questions per line; "
          f"{r['uploads_at_once']} upload(s) of the 117-page PDF at once"
          f"{'; no priority lane (FIFO)' if args.fifo else ''}")
    print(f"quiet: median {r['quiet_median_s']:.3f} s (first {q['first_word_median_s']:.3f} s, max "
          f"{q['first_word_max_s']:.3f} s, query embedding {q['embed_query_median_ms']} ms, load {q['load']}; at the "
          f"end {qa['first_word_median_s']:.3f} s, load {qa['load']})")
    print(f"{'batch':>5} {'median s':>9} {'max s':>7} {'+median':>8} {'+max':>7} {'embed q ms':>10} "
          f"{'upload call med/max s':>22} {'uploads':>7} {'load':>11}  goal +max <= {GOAL_S:.0f} s")
    for x in r["rounds"]:
        print(f"{x['batch']:>5} {x['first_word_median_s']:>9.3f} {x['first_word_max_s']:>7.3f} "
              f"{x['extra_median_s']:>8.3f} {x['extra_max_s']:>7.3f} {x['embed_query_median_ms']:>10} "
              f"{x['upload_call_median_s']:>10} / {x['upload_call_max_s']:<9} {x['uploads_started']:>7} "
              f"{x['load']:>11}  {'met' if x['goal_met'] else 'NOT met'}")
        if set(x["modes"]) - set(MODEL_MODES):
            print(f"      answers not written by the model: {x['modes']}")


if __name__ == "__main__":
    main()
