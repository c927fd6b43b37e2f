"""The Settings page in a real browser: after a model download the selector shows the new model at once (the
browser keeps a selector's value unless the page sets it, which AppTest cannot see). On the shared local app and
scripted Ollama: the download adds a model and changes the saved choices, so the test puts both back afterwards
(Restore defaults on the page, the server's model list and pull script), for the browser tests that follow."""
from __future__ import annotations

import pytest
from e2e_helpers import MODEL, open_page
from ollama_server import PullScript
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

NEW = "qwen2.5:1.5b"


@pytest.fixture
def pulls(ollama):
    """The shared scripted Ollama with a slow three-layer pull; its models and pull script are put back after."""
    models, pull = list(ollama.models), ollama.pull
    ollama.pull = PullScript(layers=3, total=300_000_000, steps=10, delay_between=0.03)
    yield ollama
    ollama.models[:] = models
    ollama.pull = pull


def test_the_selector_shows_a_downloaded_model_without_check_again(browser, app_url, pulls):
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.set_default_timeout(30_000)
    try:
        open_page(page, app_url, "settings")
        selector = page.get_by_role("combobox", name="Model", exact=True)
        expect(selector).to_have_value(MODEL)
        page.get_by_label("Model name", exact=True).fill(NEW)
        page.get_by_role("button", name="Download").click()
        expect(page.get_by_text(f"“{NEW}” is ready and now writes the answers.")).to_be_visible()
        expect(selector).to_have_value(NEW)  # no "Check again" needed
        expect(page.get_by_text("Ollama is running, with 2 models installed.")).to_be_visible()
        assert page.get_by_test_id("stProgress").count() == 1  # one bar for the three layers
        page.reload()  # a new browser session: the choice was kept
        expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value(NEW)
    finally:  # the saved choices back to the defaults, for the tests after this one
        open_page(page, app_url, "settings")
        page.get_by_role("button", name="Restore defaults").click()
        expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value(MODEL)
        page.close()
