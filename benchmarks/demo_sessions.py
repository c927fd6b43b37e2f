"""The hosted demo's memory with many visitors: one process, as the app runs it, with N active demo sessions.

Run: MALLOC_ARENA_MAX=2 .venv/bin/python -m benchmarks.demo_sessions [--sessions 20] [--json]

What it does, through the code the pages use (no browser): import Streamlit and rag_core, build the server's
`rag_core.adapters.runtime.Runtime` in demo mode on an empty data folder (DemoHub loads and embeds the shared samples), then
N visitors at once, one thread each as Streamlit runs sessions: each gets its `Workspace` from
`Runtime.workspace(Runtime.new_session_key(), client=…)`, adds one small document with `Workspace.add_file` (the
Library page's call; a Markdown note, a 4-page PDF or a DOCX in turn), waits for its ingest job, then asks a
question with `Workspace.ask` and reads the streamed answer to the end (extractive: no model key, as a Space
without secrets). Resident set (VmRSS) and peak (VmHWM) from /proc/self/status at each stage.

Not included: Streamlit's own per-session state (widgets, the websocket, the message cache). `--server` measures
that too: it starts the real app (`streamlit run app.py`, demo mode, empty data folder) and drives N visitors in
Chromium (Playwright, one browser context each, all kept open): each adds its note on the Library page and asks its
question on the Chat page; the server process's VmRSS / VmHWM are read from /proc/<pid>/status.

Run: MALLOC_ARENA_MAX=2 .venv/bin/python -m benchmarks.demo_sessions --server [--sessions 20]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.memory import stage_marker

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "tests" / "fixtures" / "documents"
# (file, question about it); None: a generated Markdown note with a question only that visitor's note answers
FILES = [(None, "What did visitor {i} record about the river level?"),
         ("pdf_text_4-pages_pdflatex.pdf", "What does a blind text give you information about?"),
         ("docx_headings_toc.docx", "Which is better, simple or complex?")]
GOAL_MB = 1536


def note(i: int) -> bytes:
    """A small private Markdown document for visitor `i` (about 2 KB, with a code only this visitor knows)."""
    lines = [f"# Field notes of visitor {i}", ""]
    for p in range(6):
        lines.append(f"Visitor {i} recorded observation {p}: the river level rose by {i + p} centimetres after "
                     f"the storm, and the secret code for this note is K{i:03d}-{p}. The ferry kept running, "
                     "the market moved uphill, and the school opened an hour late.")
        lines.append("")
    return "\n".join(lines).encode()


def visitor(runtime, i: int, out: dict, errors: list[str]) -> None:
    """One visitor: open a session, add one document, wait for it, ask one question and read the whole answer."""
    try:
        t0 = time.perf_counter()
        ws = runtime.workspace(runtime.new_session_key(), client=f"198.51.100.{i + 1}")
        name, question = FILES[i % len(FILES)]
        data, file_name = (note(i), f"notes-{i}.md") if name is None else ((DOCS / name).read_bytes(), name)
        job = ws.add_file(data, file_name)
        while True:
            (view,) = ws.jobs([job])
            if view.state == "done":
                break
            time.sleep(0.05)
        result = view.result
        if getattr(result, "status", None) not in ("added", "unchanged"):
            raise RuntimeError(f"{file_name}: {getattr(result, 'status', result)} {getattr(result, 'error', '')}")
        t1 = time.perf_counter()
        stream = ws.answer_stream(question.format(i=i))
        text = "".join(str(piece) for piece in stream)
        answer = stream.answer
        if answer is None or not (text or answer.text):
            raise RuntimeError("no answer")
        out[i] = {"file": file_name, "ingest_s": round(t1 - t0, 2), "answer_s": round(time.perf_counter() - t1, 2),
                  "mode": answer.mode, "citations": len(answer.citations)}
    except Exception as e:  # noqa: BLE001 - counted and reported
        errors.append(f"visitor {i}: {type(e).__name__}: {e}")


def proc_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process `pid` in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return round(fields["VmRSS"], 1), round(fields["VmHWM"], 1)


def run_server(sessions: int, chromium: str) -> None:
    """The real app with `sessions` Chromium visitors; prints the server's memory after start, the first visitor
    (samples embedded) and all of them."""
    import re

    from playwright.sync_api import sync_playwright

    from tests.e2e.e2e_helpers import start_app, stop_app, upload, wait_for_health, wait_idle

    with tempfile.TemporaryDirectory(prefix="docchat-demo-server-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        proc, url, _log = start_app(data, "http://127.0.0.1:9", extra_env={"DOCCHAT_MODE": "demo",
                                                                          "OLLAMA_API_KEY": ""})
        rows: list[tuple[str, float, float, float]] = []
        try:
            wait_for_health(url, timeout=120, proc=proc)
            rows.append(("server started (healthy)", *proc_mb(proc.pid), 0.0))
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium)
                for i in range(sessions):
                    t = time.perf_counter()
                    page = browser.new_context().new_page()
                    page.set_default_timeout(300_000)
                    page.goto(f"{url}/library")
                    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1')
                    wait_idle(page, timeout=300_000)
                    note_path = Path(tmp) / f"notes-{i}.md"
                    note_path.write_bytes(note(i))
                    upload(page, str(note_path))
                    page.get_by_text(re.compile(rf"Added notes-{i}\.md")).first.wait_for()
                    wait_idle(page, timeout=300_000)
                    page.locator('[data-testid="stSidebarNav"]').get_by_text("Chat", exact=True).click()
                    page.get_by_role("heading", name="Chat with your documents").wait_for()
                    wait_idle(page, timeout=300_000)
                    box = page.locator('[data-testid="stChatInput"] textarea')
                    box.fill(f"What did visitor {i} record about the river level?")
                    box.press("Enter")
                    page.locator('[data-testid="stChatMessage"]').nth(1).wait_for()
                    wait_idle(page, timeout=300_000)
                    if i == 0 or i == sessions - 1:
                        label = "first visitor (samples embedded)" if i == 0 else f"{sessions} visitors"
                        rows.append((label, *proc_mb(proc.pid), time.perf_counter() - t))
                browser.close()
        finally:
            stop_app(proc)
    print(f"{'Streamlit server process':<40} {'RSS MiB':>8} {'peak MiB':>9} {'last visitor s':>15}")
    for label, rss, peak, secs in rows:
        print(f"{label:<40} {rss:>8} {peak:>9} {secs:>15.1f}")


def main() -> None:
    """Print RSS and peak at each stage, and the per-visitor timings."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--server", action="store_true", help="the real app with Chromium visitors (see above)")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    if args.server:
        run_server(args.sessions, args.chromium)
        return
    stages: list[dict] = []
    mark = stage_marker(stages)

    mark("python interpreter (baseline)")
    t = time.perf_counter()
    import streamlit  # noqa: F401 - the app imports it first

    from rag_core.adapters.runtime import Runtime
    from rag_core.core.config import load_settings
    mark("imports (streamlit, rag_core)", time.perf_counter() - t)

    with tempfile.TemporaryDirectory(prefix="docchat-demo-sessions-") as tmp:
        env = {"DOCCHAT_MODE": "demo", "DOCCHAT_DATA_DIR": str(Path(tmp) / "data"), "OLLAMA_API_KEY": ""}
        settings = load_settings({**{k: v for k, v in os.environ.items() if k.startswith("DOCCHAT_DEMO")}, **env})
        t = time.perf_counter()
        runtime = Runtime(settings)  # DemoHub embeds the shared samples into the empty folder
        mark("runtime + samples embedded (empty data folder)", time.perf_counter() - t)

        results: dict[int, dict] = {}
        errors: list[str] = []
        threads = [threading.Thread(target=visitor, args=(runtime, i, results, errors)) for i in range(args.sessions)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        mark(f"{args.sessions} sessions: one document and one answer each", time.perf_counter() - t)
        active = len(runtime.hub.active_sessions()) if runtime.hub else 0
        docs = len(runtime.library.documents())
        runtime.close()

    report = {"sessions": args.sessions, "active_sessions": active, "documents": docs, "errors": errors,
              "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"), "goal_mb": GOAL_MB, "stages": stages,
              "visitors": [results[i] for i in sorted(results)]}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{'stage':<52} {'RSS MiB':>8} {'peak MiB':>9} {'seconds':>8}")
    for s in stages:
        print(f"{s['stage']:<52} {s['rss_mb']:>8} {s['peak_mb']:>9} {s['seconds'] if s['seconds'] is not None else '':>8}")
    ingest = sorted(v["ingest_s"] for v in results.values())
    answer = sorted(v["answer_s"] for v in results.values())
    if ingest:
        print(f"visitors: {len(results)} ok, {len(errors)} errors; active sessions {active}; documents {docs}; "
              f"ingest median {ingest[len(ingest) // 2]} s (max {ingest[-1]}), "
              f"answer median {answer[len(answer) // 2]} s (max {answer[-1]})")
        modes: dict[str, int] = {}
        for v in results.values():
            modes[v["mode"]] = modes.get(v["mode"], 0) + 1
        print("answer modes: " + ", ".join(f"{m} {n}" for m, n in sorted(modes.items())))
    for e in errors:
        print("ERROR", e)
    peak = max(s["peak_mb"] for s in stages)
    print(f"peak {peak} MiB: {'within' if peak <= GOAL_MB else 'OVER'} the {GOAL_MB} MiB goal")


if __name__ == "__main__":
    main()
