"""Helpers for the browser tests: start the app, wait for Streamlit, drop and upload files."""
from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "documents"
MODEL = "llama3.2:3b"
STARTUP_TIMEOUT_S = 60
INGEST_TIMEOUT = 400_000  # ms; a cold app's first file: >120 s on this 2-core machine (model load beside Chromium)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_health(url: str, timeout: float = STARTUP_TIMEOUT_S, proc: subprocess.Popen | None = None) -> float:
    """Poll /_stcore/health until it answers "ok"; returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return time.monotonic() - start
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("streamlit did not become healthy")


def start_app(data_dir: Path, ollama_url: str, port: int | None = None,
              extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str, Path]:
    """Start `streamlit run app.py` on a free loopback port; returns (process, base URL, log file).
    `extra_env` adds or replaces environment variables (e.g. DOCCHAT_MODE=demo)."""
    port = port or free_port()
    env = {**os.environ, "DOCCHAT_DATA_DIR": str(data_dir), "OLLAMA_HOST": ollama_url,
           "DOCCHAT_OLLAMA_MODEL": MODEL, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(extra_env or {})}
    log = data_dir.parent / f"streamlit-{port}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}", log


def stop_app(proc: subprocess.Popen) -> None:
    """Stop a started app: terminate, then kill if it has not ended within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def running_app(data_dir: Path, ollama_url: str, extra_env: dict | None = None):
    """Start `streamlit run app.py`, wait until healthy, yield its URL; stop it afterwards."""
    proc, url, log = start_app(data_dir, ollama_url, extra_env=extra_env)
    try:
        wait_for_health(url, proc=proc)
        yield url
    finally:
        stop_app(proc)
        if os.environ.get("DOCCHAT_E2E_LOG"):
            sys.stderr.write(log.read_text(errors="replace")[-20000:])


def wait_idle(page, timeout: float = 30_000) -> None:
    """Wait until Streamlit has finished running the script."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def open_page(page, app_url: str, path: str = "", idle_timeout: float = 30_000) -> None:
    """Navigate, wait for the first element of the page, then for the script to finish."""
    page.goto(f"{app_url}/{path}")
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    wait_idle(page, idle_timeout)


def drop_files(page, files: list[tuple[str, bytes, str]]) -> None:
    """Drag and drop files onto the uploader's dropzone (a real `drop` event carrying a DataTransfer)."""
    payload = [{"name": n, "b64": base64.b64encode(d).decode(), "type": t} for n, d, t in files]
    dt = page.evaluate_handle("""(files) => {
        const dt = new DataTransfer();
        for (const f of files) {
            const bytes = Uint8Array.from(atob(f.b64), c => c.charCodeAt(0));
            dt.items.add(new File([bytes], f.name, {type: f.type}));
        }
        return dt;
    }""", payload)
    zone = page.locator('[data-testid="stFileUploaderDropzone"]')
    zone.dispatch_event("dragenter", {"dataTransfer": dt})
    zone.dispatch_event("dragover", {"dataTransfer": dt})
    zone.dispatch_event("drop", {"dataTransfer": dt})


def upload(page, path_or_files) -> None:
    """Upload through the file input (the same code path as clicking "Browse files")."""
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(path_or_files)


def ensure_in_library(page, app_url: str, file_name: str) -> None:
    """Add a file of tests/fixtures/documents through the Library page unless it is already listed."""
    from playwright.sync_api import expect

    open_page(page, app_url, "library")
    stem = Path(file_name).stem
    main = page.locator('[data-testid="stMainBlockContainer"]')
    # Listed by its stem as title, or under its own title with the file name in the row's caption (issue 28).
    if main.get_by_text(stem, exact=True).count() or main.get_by_text(re.compile(rf"^{re.escape(file_name)} · ")).count():
        return
    upload(page, str(DOCS / file_name))
    # This file's own result line: a looser pattern ("Added.*name") also matches the box holding an earlier file's
    # "Added …" above this one's "Adding name…", and the test would go on before the file is in the library.
    name = re.escape(file_name)
    expect(main.get_by_text(re.compile(rf"Added {name} —|{name} is already in your library"))).to_be_visible(
        timeout=INGEST_TIMEOUT)


def settle(page) -> None:
    """Wait until the page is idle and fully drawn (no skeleton placeholders, navigation present)."""
    wait_idle(page)
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Chat", exact=True).wait_for()
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')")
    page.wait_for_timeout(300)
    wait_idle(page)


def screenshot(page, path, height: int = 1100) -> None:
    """A calm, fully drawn screenshot of the visible app (PNG)."""
    page.set_viewport_size({"width": 1400, "height": height})
    settle(page)
    page.screenshot(path=str(path))
