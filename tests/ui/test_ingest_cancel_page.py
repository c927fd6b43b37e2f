"""The Library page's Stop button (issue 16, "a cancel button"): it shows beside a running file and beside one
waiting its turn, and pressing it stops the file; the page then says it was stopped and nothing was added. Real app
(AppTest), real ingest queue; the work checks a real per-file Deadline like the library does."""
from __future__ import annotations

import time

from ui_helpers import new_app, plain

from rag_core.core.deadline import Deadline
from rag_core.service.library import IngestResult


def _slow_work(name: str):
    """Work that reports progress and checks its deadline every 20 ms, as loaders and the library do."""

    def work(progress):
        deadline = Deadline(60, name)
        for i in range(3000):
            deadline.check()  # IngestCancelled once Stop was pressed
            progress("ocr", i, 3000)
            time.sleep(0.02)
        return IngestResult(name, "added", "d1", 3)

    return work


def test_stop_buttons_show_beside_running_and_waiting_files_and_stop_them(app):
    running = app.queue.submit("scan.pdf", _slow_work("scan.pdf"))
    waiting = app.queue.submit("later.pdf", _slow_work("later.pdf"))  # same owner locally: waits its turn
    try:
        deadline = time.monotonic() + 10
        while app.queue.jobs([running])[0].stage != "ocr" and time.monotonic() < deadline:
            time.sleep(0.05)
        at = new_app("pages/library.py")
        at.session_state["upload_jobs"] = [running, waiting]
        at.run()
        assert not at.exception
        stops = [b for b in at.button if b.label == "Stop"]
        assert [b.key for b in stops] == [f"stop_{running}", f"stop_{waiting}"]
        assert "Reading scanned pages (OCR)…" in [plain(p.proto.text) for s in at.status for p in s.get("progress")]
        started = time.monotonic()
        stops[0].click().run()
        assert not at.exception
        assert app.queue.wait([running], 5)
        took = time.monotonic() - started
        [b for b in at.button if b.key == f"stop_{waiting}"][0].click().run()
        assert app.queue.wait([waiting], 5)
    finally:
        for job in (running, waiting):
            app.queue.cancel(job)
    assert took < 3
    for job, name in ((running, "scan.pdf"), (waiting, "later.pdf")):
        [view] = app.queue.jobs([job])
        assert view.result.status == "stopped", view.result
        assert view.result.error == f"Adding “{name}” was stopped; nothing was added."
    at.run()
    assert not at.exception
    assert not [b for b in at.button if b.label == "Stop"]
    shown = [plain(i.value) for i in at.info]
    assert "Adding “scan.pdf” was stopped; nothing was added." in shown
    assert "Adding “later.pdf” was stopped; nothing was added." in shown
    assert not [e for e in at.error if "scan.pdf" in plain(e.value)]
