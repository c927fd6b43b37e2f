"""The Settings page in a real browser: after a model download the selector shows the new model at once (the
browser keeps a selector's value unless the page sets it, which AppTest cannot see). Its own app server and
scripted Ollama: the download changes the saved choices, which the shared app of the other browser tests must not
inherit."""
from __future__ import annotations

from e2e_helpers import MODEL, open_page, running_app
from ollama_server import OllamaServer, PullScript
from playwright.sync_api import expect

NEW = "qwen2.5:1.5b"


def test_the_selector_shows_a_downloaded_model_without_check_again(browser, tmp_path):
    with OllamaServer(models=[MODEL]) as srv, running_app(tmp_path / "data", srv.url) as url:
        srv.pull = PullScript(layers=3, total=300_000_000, steps=10, delay_between=0.03)
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(30_000)
        open_page(page, url, "settings")
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
        page.close()
