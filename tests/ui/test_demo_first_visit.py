"""The demo's first visit after a restart (issue 28, item 4): the shared samples are prepared on a thread started with
the server's runtime, and the page says what is being prepared (a spinner with one plain sentence) instead of waiting
silently; once they are ready the page goes on and lists them. After a restart with the samples already in the library,
nobody waits while they are checked."""
from __future__ import annotations

import threading

import pytest

from rag_core.demo import hub as demo_hub
from rag_core.demo import samples
from rag_core.demo.samples import PREPARING_SAMPLES


def test_the_first_visit_says_the_samples_are_being_prepared(tmp_path, monkeypatch):
    from ui import state

    monkeypatch.setenv("DOCCHAT_MODE", "demo")
    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    folder = tmp_path / "samples"  # one small sample: the test is about the wait, not about the bundled files
    folder.mkdir()
    (folder / "kettle.md").write_text("# Kettles\n\nThe spare kettle is in the cupboard by the door.")
    monkeypatch.setattr(demo_hub, "SAMPLES_DIR", folder)
    gate, reading = threading.Event(), threading.Event()
    real = samples.sample_document

    def held(data, name, settings):  # the samples take as long as the test says
        reading.set()
        assert gate.wait(120)
        return real(data, name, settings)

    monkeypatch.setattr(samples, "sample_document", held)
    monkeypatch.setattr(demo_hub, "sample_document", held, raising=False)  # where it was looked up before
    said: list[str] = []
    spinning = threading.Event()

    class Spinner:
        def __init__(self, text: str, **_kw) -> None:
            said.append(text)
            spinning.set()

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

    monkeypatch.setattr(state.st, "spinner", Spinner)
    got: list = []
    visit = threading.Thread(target=lambda: got.append(state.runtime()), daemon=True)
    visit.start()
    try:
        assert reading.wait(120), "the samples were never started"
        assert spinning.wait(60), "the page waited without saying what for"
        assert said == [PREPARING_SAMPLES] and "sample documents" in said[0] and "up to a minute" in said[0]
        assert not got  # the page waits for the samples (with the sentence on screen) ...
    finally:
        gate.set()
    visit.join(180)
    assert got, "the page never went on"
    rt = got[0]
    try:
        assert rt.preparing() is None  # ... and goes on once they are ready
        assert [d.file_name for d in rt.hub.shared_documents()] == ["kettle.md"]
        # A restart with the samples in the library: the page goes on at once while they are checked.
        gate.clear()
        reading.clear()
        state.reset_runtime()
        again = state.runtime()
        assert reading.wait(60) and not gate.is_set()  # the check is still held ...
        assert said == [PREPARING_SAMPLES] and again.preparing() is None  # ... and nobody waited for it
        assert [d.file_name for d in again.hub.shared_documents()] == ["kettle.md"]
    finally:
        gate.set()
        state.reset_runtime()


@pytest.mark.parametrize("background", [False, True])
def test_a_runtime_closed_while_preparing_stops_cleanly(tmp_path, monkeypatch, background):
    """Closing the server while the samples are being added ends the preparation after its current file."""
    from rag_core.adapters.runtime import Runtime
    from rag_core.core.config import Settings
    from tests.shared_model import remembering_embedder

    rt = Runtime(Settings(data_dir=tmp_path / "data", mode="demo"), embedder=remembering_embedder(),
                 load_samples=background, samples_in_background=background)
    rt.close()
    assert rt.preparing() is None
