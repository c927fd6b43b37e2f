"""Idle CPU of the app: CPU seconds the Streamlit server burns over 20 s with one tab open and nobody typing.

    .venv/bin/python -m benchmarks.idle_cpu [--seconds 20] [--json]

Goal: <= 0.2 CPU seconds over 20 s, on the Chat page and on the Library page (a library with one document).
Baseline in the same run: the same app started with Streamlit's default file watcher (`--server.fileWatcherType
auto`, what DocChat did before `.streamlit/config.toml` turned it off), which watches the checkout including
`.venv` and `data/`. CPU time is read from /proc/<pid>/stat (user + system, the server and its children), after start-up work has settled (a 2 s window under 0.1 s). The LLM is
the scripted Ollama-compatible server from tests/. Needs Debian's Chromium at /usr/bin/chromium.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.e2e.e2e_helpers import MODEL, free_port, open_page, settle, stop_app, wait_for_health
from tests.ollama_server import OllamaServer

ROOT = Path(__file__).resolve().parents[1]
DOC = ("# Opening hours\n\nThe museum opens at nine in the morning and closes at five in the afternoon. "
       "On Mondays it is closed.\n")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its waited-for children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime + cutime + cstime) / TICKS


def _start(data_dir: Path, ollama_url: str, watcher: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "DOCCHAT_DATA_DIR": str(data_dir), "OLLAMA_HOST": ollama_url,
           "DOCCHAT_OLLAMA_MODEL": MODEL, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true"]
    if watcher:
        cmd += ["--server.fileWatcherType", watcher]
    log = (data_dir.parent / f"idle-{port}.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_for_health(url, proc=proc)
    return proc, url


def _wait_quiet(pid: int, window: float = 2.0, limit: float = 0.1, timeout: float = 90.0) -> None:
    """Wait until a `window` passes with less than `limit` CPU seconds (start-up work done), at most `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < limit:
            return


def measure(browser, data_dir: Path, ollama_url: str, watcher: str | None, page_path: str,
            seconds: float) -> float:
    """CPU seconds of the server over `seconds` of idle with one tab open on `page_path`."""
    proc, url = _start(data_dir, ollama_url, watcher)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        open_page(page, url, page_path)
        settle(page)
        _wait_quiet(proc.pid)  # the embedding model loads in the background after the first paint
        before = cpu_seconds(proc.pid)
        time.sleep(seconds)
        used = cpu_seconds(proc.pid) - before
        page.close()
        return used
    finally:
        stop_app(proc)


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from rag_core.core.config import Settings
    from rag_core.service.library import Library

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, OllamaServer() as ollama, sync_playwright() as pw:
        data = Path(tmp) / "data"
        lib = Library(Settings(data_dir=data))
        lib.ingest_bytes(DOC.encode(), "hours.md")
        lib.close()
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            for label, watcher, path in (("chat", None, ""), ("library", None, "library"),
                                         ("library, watcher auto (baseline)", "auto", "library")):
                results[label] = round(measure(browser, data, ollama.url, watcher, path, args.seconds), 3)
        finally:
            browser.close()
    if args.json:
        print(json.dumps({"seconds": args.seconds, "cpu_seconds": results}))
        return
    print(f"CPU seconds of the app server over {args.seconds:.0f} s idle with one tab open (goal <= 0.2):")
    for label, used in results.items():
        print(f"  {label:36s} {used:6.3f} s  ({100 * used / args.seconds:.1f} % of one core)")


if __name__ == "__main__":
    main()
