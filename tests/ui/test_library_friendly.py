"""The Library page says each file's state truthfully and in plain words (issue 14, "friendly everywhere"): a file
waiting for its turn shows a waiting icon (never a done tick), a failed file shows an error with its sentence in
view, technical details (setting names) sit in a folded "Details" part, documents with the same title show their
file names, and counts read "1 second", "1 minute". Real app (AppTest), real library and ingest queue."""
from __future__ import annotations

import re
import threading

import pytest
from ui_helpers import new_app, plain, texts

from rag_core.core.errors import FileTooLarge
from rag_core.service.library import IngestResult

WAITING_ICON = ":material/hourglass_top:"
ONE_S = re.compile(r"\b1 (second|minute|attempt|question|page image|file|document|passage|page)s\b")


def _blocked_work(release: threading.Event, result: IngestResult, stage: str = ""):
    """Work for the ingest queue that reports `stage` (if any), then waits for `release` before returning."""

    def work(progress):
        if stage:
            progress(stage, 1, 4)
        assert release.wait(30), "the test never released the job"
        return result

    return work


def _statuses(at) -> dict[str, object]:
    return {plain(s.label): s for s in at.status}


def test_a_waiting_file_shows_a_waiting_icon_and_a_failed_one_its_sentence(app):
    release = threading.Event()
    too_big = FileTooLarge("big.pdf", 1)
    try:
        # Locally every upload has the same owner, so the second file waits while the first one runs.
        first = app.queue.submit("first.txt", _blocked_work(release, IngestResult("first.txt", "added", "d1", 3),
                                                            stage="embedding"))
        failed = IngestResult("big.pdf", "failed", error=str(too_big), details=too_big.details)
        second = app.queue.submit("big.pdf", _blocked_work(release, failed))
        at = new_app("pages/library.py")
        at.session_state["upload_jobs"] = [first, second]
        at.run()
        assert not at.exception
        statuses = _statuses(at)
        running = statuses["Adding **first.txt**"]
        assert running.state == "running"  # a spinner while it works, not a tick
        assert "Learning what each passage is about…" in [plain(p.proto.text) for p in running.get("progress")]
        assert "Adding **big.pdf**" not in statuses  # the waiting file is no status at all (a status ends ticked)...
        [waiting] = [e for e in at.expander if plain(e.label) == "Adding **big.pdf**"]
        assert waiting.icon == WAITING_ICON  # ...but a box with an hourglass
        assert "Waiting for its turn…" in [plain(p.proto.text) for p in waiting.get("progress")]
        assert not [s for s in at.status if s.state == "complete"]
    finally:
        release.set()
    assert app.queue.wait([first, second], 30)
    at.run()
    assert not at.exception
    statuses = _statuses(at)
    assert statuses["Added **first.txt** — 3 passages"].state == "complete"
    assert not [s for s in at.status if "big.pdf" in plain(s.label)]  # the failure is not folded into a status
    [error] = [e for e in at.error if "big.pdf" in plain(e.proto.title)]
    assert plain(error.proto.title) == "Could not add big.pdf"
    assert error.icon == ":material/error:"
    body = plain(error.value)
    assert body.startswith("“big.pdf”: the file is larger than the 1 MB limit. Split it into smaller files")
    assert "ask whoever runs DocChat to raise the limit." in body
    assert "DOCCHAT_" not in body  # the setting's name only in the folded details
    [details] = [e for e in at.expander if e.label == "Details"]
    assert "DOCCHAT_MAX_UPLOAD_MB" in plain(" ".join(texts(details.caption)))
    assert not details.proto.expanded


def test_a_real_oversized_upload_keeps_the_setting_name_in_details(app, monkeypatch):
    """Through the real library: FileTooLarge says what to do, and names the setting only in its details."""
    from ui import state

    monkeypatch.setenv("DOCCHAT_MAX_UPLOAD_MB", "1")
    state.reset_runtime()  # the library reads the limit when it starts
    at = new_app("pages/library.py")
    at.get("file_uploader")[0].set_value([("huge.txt", b"word " * 300_000, "text/plain")]).run()
    assert state.runtime().queue.wait(at.session_state["upload_jobs"], 60)
    at.run()
    [error] = at.error
    assert plain(error.proto.title) == "Could not add huge.txt"
    assert "larger than the 1 MB limit" in plain(error.value) and "DOCCHAT_" not in error.value
    [details] = [e for e in at.expander if e.label == "Details"]
    assert "DOCCHAT_MAX_UPLOAD_MB" in plain(" ".join(texts(details.caption)))


def _ingest(app, name: str, text: str) -> None:
    result = app.library.ingest_bytes(text.encode(), name)
    assert result.status == "added", result


def test_documents_with_the_same_title_show_their_file_names(app):
    _ingest(app, "report-2023.md", "# Annual report\n\nSales grew by four percent in 2023 thanks to the new shop.")
    _ingest(app, "report-2024.md", "# Annual report\n\nSales fell by two percent in 2024 after the shop closed.")
    _ingest(app, "notes.md", "# Meeting notes\n\nThe team agreed to meet every Tuesday morning.")
    at = new_app("pages/library.py")
    assert not at.exception
    captions = [plain(c) for c in texts(at.caption) if " passage" in c]
    assert len(captions) == 3
    same = [c for c in captions if "report-20" in c]
    assert sorted(c.split(" · ")[0] for c in same) == ["report-2023.md", "report-2024.md"]
    assert all("added " in c for c in same)  # with the date and time each was added
    [other] = [c for c in captions if c not in same]
    assert other.startswith("notes.md · ")  # a title of its own ("Meeting notes") still names the file added
    # Asking to delete one of them names the file too, so the right copy goes.
    doc = next(d for d in app.library.documents() if d.file_name == "report-2023.md")
    at.button(key=f"del_{doc.doc_id}").click().run()
    [warning] = texts(at.warning)
    assert "Annual report" in plain(warning) and "report-2023.md" in plain(warning)


def test_counts_of_one_are_singular():
    from rag_core.core.config import Settings
    from rag_core.core.errors import IngestTimedOut, LimitReached, LLMTimeout, WikipediaServerError
    from rag_core.demo.answers import demo_banner, usage_line
    from rag_core.demo.quotas import Ledger, Usage

    now = [0.0]
    ledger = Ledger(Settings(demo_questions_per_minute=1), clock=lambda: now[0])
    ledger.count_question("s-" + "a" * 20)
    now[0] = 59.5
    with pytest.raises(LimitReached) as hit:
        ledger.count_question("s-" + "a" * 20)
    assert "asked 1 question in the last minute" in str(hit.value)
    assert "please wait about 1 second, then ask again" in str(hit.value)
    sentences = [str(hit.value), str(LLMTimeout(1)), str(WikipediaServerError(503, 1)), str(IngestTimedOut("a", 1)),
                 demo_banner(Settings(demo_session_idle_minutes=1)),
                 usage_line(Usage(1, 1, 0, 1 << 20, 1, 1, 1, 0, 1 << 20), per_file_mb=1)]
    for sentence in sentences:
        assert not ONE_S.search(sentence), sentence
    assert "within 1 second." in sentences[1] and "1 attempt)" in sentences[2]
    assert "after 1 minute without activity" in sentences[4]
