"""App latency in a real browser: cold start to first paint, first visit to a usable chat with a 10k-chunk library,
and question to first streamed token.

    .venv/bin/python -m benchmarks.app_latency [--runs 5] [--cold 3] [--json]

"First visit": the app is started on a copy of the 10,000-chunk PubMedQA library of benchmarks.answer_latency (built
and cached on first use), and the time is taken from the browser's first request to the moment the chat input is
enabled (goal: <= 5 s), next to the one-line app's first paint.

Baselines measured in the same run: a one-line Streamlit app's cold start (what Streamlit itself costs), and
the same question answered in-process through rag_core.answer.generation (what the pipeline costs without the UI).
The LLM is the scripted Ollama-compatible server from tests/ (instant replies), so the figures are DocChat's
own overhead. Needs Debian's Chromium at /usr/bin/chromium.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.service.library import Library
from tests.e2e.e2e_helpers import MODEL, free_port, start_app, wait_for_health
from tests.ollama_server import OllamaServer, Reply

ROOT = Path(__file__).resolve().parents[1]

PDF = ROOT / "tests" / "fixtures" / "documents" / "pdf_text_multicolumn_3-pages.pdf"
QUESTION = "What is the capital of Belgium?"
ANSWER = Reply("The capital of Belgium is Brussels [1]. Its population is about 11.5 million [1].",
               delay_between=0.02)
HELLO_APP = 'import streamlit as st\nst.title("Hello")\n'


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


TITLE = '[data-testid="stMainBlockContainer"] h1'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
CHAT_ENABLED = '[data-testid="stChatInput"] textarea:not([disabled])'


def _timed_visit(browser, start, ready_selector: str, from_process_start: bool) -> tuple[float, float, float]:
    """(seconds to /_stcore/health, to the title, to `ready_selector`), counted from the process start or from the
    browser's first request."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    t_start = time.perf_counter()
    proc, url = start()
    try:
        health = wait_for_health(url, proc=proc)
        t0 = t_start if from_process_start else time.perf_counter()
        page.goto(url)
        page.wait_for_selector(TITLE, timeout=180_000)
        title = time.perf_counter() - t0
        page.wait_for_selector(ready_selector, timeout=180_000)
        ready = time.perf_counter() - t0
    finally:
        page.close()
        _stop(proc)
    return health, title, ready


def cold_start(browser, start) -> dict:
    """Seconds from process start to /_stcore/health, to the first heading painted, and to the script idle."""
    health, paint, ready = _timed_visit(browser, start, IDLE, from_process_start=True)
    return {"health_s": round(health, 3), "first_paint_s": round(paint, 3), "ready_s": round(ready, 3)}


def first_visit(browser, start) -> dict:
    """Seconds from the first browser visit of a freshly started app (health already answered) to the title and to
    an enabled chat input."""
    _health, title, ready = _timed_visit(browser, start, CHAT_ENABLED, from_process_start=False)
    return {"title_s": round(title, 3), "chat_enabled_s": round(ready, 3)}


def _library_10k(work: Path) -> Path:
    """A copy of the cached 10k-chunk library (benchmarks.answer_latency builds it on first use)."""
    from benchmarks.answer_latency import CACHE, open_library
    from rag_core.store.embeddings import Embedder

    lib, _ = open_library(Embedder(), Settings(data_dir=CACHE, top_k=5))
    lib.close()
    shutil.copytree(CACHE, work / "data-10k")
    return work / "data-10k"


def ask_in_browser(browser, url: str) -> dict:
    """Milliseconds (browser clock) from pressing Enter to the first words of the reply and to its sources."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(url)
        page.wait_for_selector('[data-testid="stChatInput"] textarea:not([disabled])', timeout=120_000)
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
        page.evaluate("""() => {
            window.__t = {};
            const box = document.querySelector('[data-testid="stChatInput"] textarea');
            box.addEventListener('keydown', e => { if (e.key === 'Enter') window.__t.sent = performance.now(); },
                                 {capture: true});
            new MutationObserver(() => {
                const msgs = document.querySelectorAll('[data-testid="stChatMessage"]');
                const last = msgs[msgs.length - 1];
                if (!last || msgs.length < 2) return;
                if (!window.__t.first && last.innerText.includes('The capital')) window.__t.first = performance.now();
                if (!window.__t.sources && last.innerText.includes('Sources')) window.__t.sources = performance.now();
            }).observe(document.body, {childList: true, subtree: true, characterData: true});
        }""")
        box = page.locator('[data-testid="stChatInput"] textarea')
        box.fill(QUESTION)
        box.press("Enter")
        page.wait_for_function("() => window.__t.sources", timeout=120_000)
        t = page.evaluate("() => window.__t")
    finally:
        page.close()
    return {"first_token_ms": round(t["first"] - t["sent"], 1), "sources_ms": round(t["sources"] - t["sent"], 1)}


def ask_in_process(data_dir: Path, ollama_url: str, runs: int) -> list[float]:
    """Milliseconds from start_answer to the first streamed delta, through rag_core alone."""
    from rag_core.answer.generation import start_answer
    from rag_core.core.config import Settings
    from rag_core.service.library import Library

    lib = Library(Settings(data_dir=data_dir, ollama_host=ollama_url, ollama_model=MODEL))
    out = []
    try:
        for _ in range(runs + 1):  # the first run warms the model and the HTTP client up
            t0 = time.perf_counter()
            stream = start_answer(lib, QUESTION, lib.settings.with_overrides(ollama_host=ollama_url))
            first = None
            for _delta in stream:
                if first is None:
                    first = (time.perf_counter() - t0) * 1000
            out.append(round(first, 1))
    finally:
        lib.close()
    return out[1:]


def main() -> None:
    """Run the measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="questions per measurement (default 5)")
    ap.add_argument("--cold", type=int, default=3, help="cold starts per app (default 3)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="docchat-latency-"))
    hello = work / "hello.py"
    hello.write_text(HELLO_APP)
    data = work / "data"
    lib = Library(Settings(data_dir=data))
    lib.ingest_bytes(PDF.read_bytes(), PDF.name)
    lib.close()
    shutil.copytree(data, work / "data-core")
    big = _library_10k(work)

    results: dict = {"runs": args.runs, "cold_starts": args.cold}
    with OllamaServer(models=[MODEL], default=ANSWER) as srv, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     env={"XDG_CONFIG_HOME": str(work), "XDG_CACHE_HOME": str(work)})

        def start_hello():
            port = free_port()
            proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(hello), "--server.port", str(port),
                                     "--server.address", "127.0.0.1", "--server.headless", "true",
                                     "--browser.gatherUsageStats", "false"], cwd=work,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return proc, f"http://127.0.0.1:{port}"

        def start_docchat():
            proc, url, _log = start_app(data, srv.url)
            return proc, url

        def start_big():
            proc, url, _log = start_app(big, srv.url)
            return proc, url

        hello_runs = [cold_start(browser, start_hello) for _ in range(args.cold)]
        app_runs = [cold_start(browser, start_docchat) for _ in range(args.cold)]
        visits = [first_visit(browser, start_big) for _ in range(args.cold)]
        proc, url, _log = start_app(data, srv.url)
        try:
            wait_for_health(url, proc=proc)
            ask_in_browser(browser, url)  # warm-up: loads the model, opens the store
            asks = [ask_in_browser(browser, url) for _ in range(args.runs)]
        finally:
            _stop(proc)
        browser.close()
        core = ask_in_process(work / "data-core", srv.url, args.runs)

    med = statistics.median
    results["baseline_hello_first_paint_s"] = med(r["first_paint_s"] for r in hello_runs)
    results["app_health_s"] = med(r["health_s"] for r in app_runs)
    results["app_first_paint_s"] = med(r["first_paint_s"] for r in app_runs)
    results["app_ready_s"] = med(r["ready_s"] for r in app_runs)
    results["first_paint_ratio_vs_hello"] = round(results["app_first_paint_s"] / results["baseline_hello_first_paint_s"], 2)
    results["first_visit_10k_title_s"] = med(v["title_s"] for v in visits)
    results["first_visit_10k_chat_enabled_s"] = med(v["chat_enabled_s"] for v in visits)
    results["browser_first_token_ms"] = med(a["first_token_ms"] for a in asks)
    results["browser_sources_ms"] = med(a["sources_ms"] for a in asks)
    results["core_first_token_ms"] = med(core)
    results["first_token_ratio_vs_core"] = round(results["browser_first_token_ms"] / results["core_first_token_ms"], 2)
    results["raw"] = {"hello": hello_runs, "app": app_runs, "visits_10k": visits, "asks": asks, "core_ms": core}
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"cold start, one-line Streamlit app (baseline): first paint {results['baseline_hello_first_paint_s']:.2f} s")
    print(f"cold start, DocChat: health {results['app_health_s']:.2f} s, first paint {results['app_first_paint_s']:.2f} s "
          f"({results['first_paint_ratio_vs_hello']}x baseline), ready {results['app_ready_s']:.2f} s")
    print(f"first visit with a 10k-chunk library: title {results['first_visit_10k_title_s']:.2f} s, chat input "
          f"enabled {results['first_visit_10k_chat_enabled_s']:.2f} s (goal <= 5 s)")
    print(f"question -> first token in the browser: {results['browser_first_token_ms']:.0f} ms "
          f"(rag_core alone: {results['core_first_token_ms']:.0f} ms, ratio {results['first_token_ratio_vs_core']}); "
          f"sources shown after {results['browser_sources_ms']:.0f} ms")


if __name__ == "__main__":
    main()
