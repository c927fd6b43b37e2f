"""The Library page after a reload (issue 24, "jobs a person can see and stop"): a new session of the same person
(a reload, a second tab) shows the files still being added, with their progress and Stop buttons, then their result
or error sentence, until they are dismissed. Real app (AppTest), real library and queue."""
from __future__ import annotations

import threading

from ui_helpers import button, new_app, plain

from rag_core.core.deadline import Deadline
from rag_core.core.models import IngestStatus
from rag_core.service.library import IngestResult

TEXT = ("The lighthouse keeper of Port Elspeth winds the great clock every Tuesday at dawn. " * 40).encode()


def _progress_texts(at) -> list[str]:
    return [plain(p.proto.text) for s in at.status for p in s.get("progress")]


def test_a_reload_shows_the_files_being_added_with_stop_then_their_result_and_error(app):
    gate, embedding = threading.Event(), threading.Event()
    real_embed = app.library.store.embed_chunks

    def held_embed(chunks, progress=None):  # the file stays in its embedding stage until the test lets it go
        out = real_embed(chunks, progress)
        embedding.set()
        gate.wait(60)
        return out

    app.library.store.embed_chunks = held_embed
    try:
        first = new_app("pages/library.py")
        first.get("file_uploader")[0].set_value([("keeper.txt", TEXT, "text/plain"),
                                                 ("broken.pdf", b"%PDF-1.4\n%%EOF\n", "application/pdf")]).run()
        assert embedding.wait(60)
        reloaded = new_app("pages/library.py")  # a new session: it knows no job id of the first one
        assert not reloaded.exception
        [running] = [s for s in reloaded.status if plain(s.label) == "Adding **keeper.txt**"]
        assert running.state == "running"
        assert "Learning what each passage is about…" in _progress_texts(reloaded)
        assert [e for e in reloaded.expander if plain(e.label) == "Adding **broken.pdf**"]  # waiting its turn
        assert len([b for b in reloaded.button if b.label == "Stop"]) == 2
    finally:
        gate.set()
    jobs = [j.id for j in app.queue.owner_jobs(None)]
    assert app.queue.wait(jobs, 60)
    again = new_app("pages/library.py")
    assert not again.exception
    labels = [plain(s.label) for s in again.status]
    assert any(label.startswith("Added **keeper.txt** — ") for label in labels), labels
    [error] = [e for e in again.error if "broken.pdf" in plain(e.proto.title)]
    assert plain(error.value).startswith("“broken.pdf”: the file is damaged and could not be read")
    assert not [b for b in again.button if b.label == "Stop"]
    button(again, "Clear these messages").click().run()  # dismissed for every session of this person
    assert app.queue.owner_jobs(None) == []
    first.run()
    assert not [s for s in first.status if "keeper.txt" in plain(s.label)] and not first.error


def test_stop_pressed_in_another_tab_says_stopping_until_the_file_has_ended(app):
    stopped_seen, finish = threading.Event(), threading.Event()

    def stubborn(progress):  # checks its deadline only when told to: it is "still stopping" meanwhile
        deadline = Deadline(60, "scan.pdf")
        progress("ocr", 3, 40)
        while not finish.wait(0.02):
            if deadline.cancelled():
                stopped_seen.set()
        deadline.check()
        return IngestResult("scan.pdf", IngestStatus.ADDED, "d1", 3)

    job = app.queue.submit("scan.pdf", stubborn)
    try:
        tab = new_app("pages/library.py")
        [stop] = [b for b in tab.button if b.label == "Stop"]
        stop.click().run()
        assert not tab.exception
        assert stopped_seen.wait(10)
        other = new_app("pages/library.py")
        assert "Stopping… nothing of it will be kept." in _progress_texts(other)
        assert not [b for b in other.button if b.label == "Stop"]  # pressed once is enough
    finally:
        finish.set()
    assert app.queue.wait([job], 10)
    other.run()
    assert "Adding “scan.pdf” was stopped; nothing was added." in [plain(i.value) for i in other.info]
