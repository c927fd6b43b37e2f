"""Browser-test harness: one `streamlit run app.py` per mode for the whole browser tier (local: `app_url`, with one
scripted Ollama server; hosted demo: `demo_url`), driven by Playwright with Debian's Chromium (never `playwright
install`). The fixtures are package-scoped (tests/e2e/__init__.py makes the tier a package): `make test` runs the tier
on one worker process before other tests, and Playwright, the apps and the servers end with the tier's last test (a
live sync Playwright keeps an event loop running in the thread, where a later `asyncio.run` would fail).

The local app's library fills up as the tests run, in file order: tests/e2e/test_app_browser.py adds the files it
needs first (its first test expects an empty library); later modules add what they need unless it is already there.
A module that needs other replies swaps the scripted server's `default` for its own and puts it back afterwards."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from e2e_helpers import MODEL, running_app
from ollama_server import OllamaServer, Reply

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
DOCS = ROOT / "tests" / "fixtures" / "documents"

pytestmark = pytest.mark.browser


def _last_user_text(body: dict) -> str:
    msgs = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(msgs[-1].get("content", "")) if msgs else ""


class ScriptedAnswers:
    """Answers by topic and remembers the page of source [1] in each prompt (the page the UI must show)."""

    def __init__(self) -> None:
        self.source1_pages: list[str | None] = []

    def __call__(self, body: dict) -> Reply:
        system = next((str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system"), "")
        user = _last_user_text(body)
        if system.startswith("You rewrite"):
            m = re.search(r"Latest message: (.*)\n", user)
            return Reply(m.group(1) if m else user)
        tag = re.search(r'<source n="1"[^>]*>', user)
        page = re.search(r' page="([\d-]+)"', tag.group(0)) if tag else None
        self.source1_pages.append(page.group(1) if page else None)
        question = user.rsplit("Question:", 1)[-1].lower()
        if "slowly" in question:
            return Reply("Brussels is the capital of Belgium [1]. " + "It has many old buildings. " * 12,
                         delay_between=0.25)
        if "belgium" in question:
            return Reply("The capital of Belgium is Brussels [1]. Its population is about 11.5 million [1].",
                         delay_first=0.3, delay_between=0.12)
        if "zebra" in question:
            return Reply("The zebra budget is 42 dollars [1].", delay_between=0.05)
        return Reply("I couldn't find the answer to this in your documents.")


@pytest.fixture(scope="package")
def chromium_path() -> str:
    """Debian's Chromium; a clear failure when missing (set DOCCHAT_SKIP_BROWSER=1 to skip instead)."""
    if os.environ.get("DOCCHAT_SKIP_BROWSER") == "1":
        pytest.skip("browser tests skipped: DOCCHAT_SKIP_BROWSER=1")
    if not CHROMIUM.exists():
        pytest.fail("Browser tests need Debian's Chromium at /usr/bin/chromium: run `make browser` (or "
                    "`apt-get install -y chromium`), or set DOCCHAT_SKIP_BROWSER=1 to skip them.", pytrace=False)
    return str(CHROMIUM)


@pytest.fixture(scope="package")
def ollama():
    """The scripted Ollama-compatible server the app talks to."""
    answers = ScriptedAnswers()
    with OllamaServer(models=[MODEL], default=answers) as srv:
        srv.answers = answers
        yield srv


@pytest.fixture(scope="package")
def app_data_dir(tmp_path_factory) -> Path:
    """The data folder of the shared local app (empty at first)."""
    data_dir = tmp_path_factory.mktemp("e2e") / "data"
    data_dir.mkdir()
    return data_dir


@pytest.fixture(scope="package")
def app_url(app_data_dir, ollama, chromium_path):
    """One local DocChat server for all browser tests, on `app_data_dir`."""
    with running_app(app_data_dir, ollama.url) as url:
        yield url


@pytest.fixture(scope="package")
def demo_url(tmp_path_factory, chromium_path):
    """One DocChat server in hosted-demo mode, without a model (extractive answers), on an empty data folder."""
    data_dir = tmp_path_factory.mktemp("e2e-demo") / "data"
    data_dir.mkdir()
    with running_app(data_dir, "http://127.0.0.1:9", extra_env={"DOCCHAT_MODE": "demo", "OLLAMA_API_KEY": ""}) as url:
        yield url


@pytest.fixture(scope="package")
def browser(chromium_path, tmp_path_factory):
    """Headless Chromium through Playwright, with its profile files in a temp folder."""
    from playwright.sync_api import sync_playwright

    home = tmp_path_factory.mktemp("chromium")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, headless=True,
                               env={**os.environ, "XDG_CONFIG_HOME": str(home), "XDG_CACHE_HOME": str(home)})
        yield b
        b.close()


@pytest.fixture
def page(browser, app_url):
    """A fresh browser tab (a new Streamlit session) at a desktop size."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()
