"""The reader helper (rag_core/ingest/loaders/_zygote.py): reader children forked from a process that imported the
readers once, with real processes throughout. Each read still ends at its deadline, its memory ceiling or Stop,
and the helper survives its children, comes back when killed, and goes when its parent is killed."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline, cancellable
from rag_core.core.errors import CorruptFile, IngestCancelled, IngestTimedOut, ReaderOutOfMemory
from rag_core.ingest.loaders import _zygote_link as zygote
from rag_core.ingest.loaders import load_bytes
from rag_core.ingest.loaders._isolated import run_isolated
from tests.portable_helpers import answer_when, die, echo, environment, grow, hang

pytestmark = pytest.mark.skipif(not zygote.available(), reason="the reader helper needs fork (Linux, macOS)")

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "documents"
PDFS = ["pdf_text_4-pages_pdflatex.pdf", "pdf_text_multicolumn_3-pages.pdf", "pdf_non-latin_arabic.pdf",
        "pdf_text_outline-bookmarks_4-pages.pdf"]
OTHERS = ["docx_headings-lists-tables-images.docx", "office_slides_table-notes-untitled.pptx",
          "office_workbook_budget-formula-hidden.xlsx", "sheet_semicolon_latin1.csv",
          "odt_headings-lists-table-footnote.odt", "rtf_memo_headings-list-table.rtf", "epub_toc_three-chapters.epub",
          "web_saved-page_nav-cookie-table.html"]
WAIT_S = 60


def _wait_until(condition, timeout: float = WAIT_S) -> bool:
    """Poll `condition` until it holds (True) or `timeout` passes (False)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _helper_pid() -> int:
    """The helper's pid, after a read that goes through it."""
    assert run_isolated(echo, ("hello",), Deadline(WAIT_S, "a.txt"), "test") == "hello"
    pid = zygote.helper().pid
    assert pid is not None and psutil.Process(pid).is_running()
    return pid


def _read(name: str):
    return load_bytes((DOCS / name).read_bytes(), name, Settings(), Deadline(WAIT_S, name))


def _as_seen(doc) -> tuple:
    return doc.doc_id, doc.text, doc.sections, doc.page_count, doc.page_starts, doc.hidden_text


def test_a_read_through_the_helper_gives_what_a_fresh_interpreter_gives(monkeypatch):
    helper = _helper_pid()
    forked = [_as_seen(_read(name)) for name in PDFS + OTHERS + PDFS]  # the second time with the reader imported
    assert zygote.helper().pid == helper
    assert psutil.Process(helper).num_threads() == 1  # it forks: one thread only, with every reader imported
    assert forked[:len(PDFS)] == forked[-len(PDFS):]
    monkeypatch.setattr(zygote, "available", lambda: False)  # today's path: a fresh interpreter per read
    assert [_as_seen(_read(name)) for name in PDFS + OTHERS] == forked[:-len(PDFS)]


def test_progress_and_the_current_environment_reach_a_forked_child(monkeypatch):
    _helper_pid()
    reports: list[tuple] = []
    assert run_isolated(echo, ("hi",), Deadline(WAIT_S, "a.txt"), "test", progress=lambda *r: reports.append(r)) == "hi"
    assert reports == [("reading", 1, 1)]
    monkeypatch.setenv("DOCCHAT_TEST_READER_HELPER", "set after the helper started")
    got = run_isolated(environment, ("DOCCHAT_TEST_READER_HELPER",), Deadline(WAIT_S, "a.txt"), "test")
    assert got == "set after the helper started"


def test_a_forked_child_that_dies_without_an_answer_is_one_sentence(caplog):
    helper = _helper_pid()
    caplog.set_level(logging.WARNING, logger="rag_core.ingest.loaders._isolated")
    with pytest.raises(CorruptFile, match="the PDF reader stopped while reading it"):
        run_isolated(die, (), Deadline(WAIT_S, "crash.pdf"), "PDF")
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "(exit code 3): Fatal error in the parser" in warning
    assert _helper_pid() == helper


def test_a_hung_child_is_killed_at_the_deadline_and_the_helper_serves_the_next_read(tmp_path):
    helper = _helper_pid()
    started = time.monotonic()
    with pytest.raises(IngestTimedOut):
        run_isolated(hang, (str(tmp_path / "started"),), Deadline(2.0, "slow.pdf"), "PDF")
    assert (tmp_path / "started").exists() and time.monotonic() - started < 2.0 + 1.0 + 5
    assert psutil.Process(helper).children() == []  # killed and reaped
    assert _helper_pid() == helper


def test_a_child_past_its_memory_ceiling_is_killed_and_the_helper_survives():
    helper = _helper_pid()
    with pytest.raises(ReaderOutOfMemory):
        run_isolated(grow, (Settings(reader_memory_mb=256),), Deadline(WAIT_S, "huge.docx"), "Word")
    assert psutil.Process(helper).children() == []
    assert _helper_pid() == helper


def test_stop_kills_a_forked_child(tmp_path):
    helper = _helper_pid()
    cancel, started = threading.Event(), tmp_path / "started"
    threading.Thread(target=lambda: _wait_until(started.exists) and cancel.set(), daemon=True).start()
    with pytest.raises(IngestCancelled), cancellable(cancel):
        run_isolated(hang, (str(started),), Deadline(WAIT_S, "stuck.pdf"), "PDF")
    assert started.exists()
    assert psutil.Process(helper).children() == []
    assert _helper_pid() == helper


def test_after_the_helper_is_killed_the_next_read_still_works():
    helper = _helper_pid()
    os.kill(helper, signal.SIGKILL)
    assert _wait_until(lambda: _gone(helper))
    assert run_isolated(echo, ("again",), Deadline(WAIT_S, "a.txt"), "test") == "again"
    assert _helper_pid() != helper  # started once more


def test_a_child_whose_helper_is_killed_meanwhile_still_answers(tmp_path):
    helper = _helper_pid()
    started, go = tmp_path / "started", tmp_path / "go"
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(run_isolated, answer_when, (str(started), str(go), "answered"),
                              Deadline(WAIT_S, "a.txt"), "test")
        assert _wait_until(started.exists)
        os.kill(helper, signal.SIGKILL)
        assert _wait_until(lambda: _gone(helper))
        assert _helper_pid() != helper  # started again meanwhile
        go.touch()
        assert reading.result(WAIT_S) == "answered"


PARENT = """
import os, sys, time
from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders import _zygote_link
from rag_core.ingest.loaders._isolated import run_isolated
from tests.portable_helpers import echo
assert run_isolated(echo, ("x",), Deadline(60, "a.txt"), "test") == "x"
copy = os.fork()  # a copy of this process, living on: it must not keep the helper alive
if copy == 0:
    time.sleep(600)
    os._exit(0)
print(_zygote_link.helper().pid, copy, flush=True)
time.sleep(600)
"""


def test_the_helper_ends_when_its_parent_is_killed_even_if_a_forked_copy_lives_on():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    copy = None
    try:
        helper, copy = map(int, parent.stdout.readline().split())
        assert psutil.Process(helper).ppid() == parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait(WAIT_S)
        assert _wait_until(lambda: _gone(helper))
        assert not _gone(copy)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if copy is not None and not _gone(copy):
            os.kill(copy, signal.SIGKILL)


def test_four_threads_read_at_once_through_one_helper():
    helper = _helper_pid()
    expected = {name: _as_seen(_read(name)) for name in PDFS}
    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(lambda name: (name, _as_seen(_read(name))), PDFS * 3))
    assert all(got == expected[name] for name, got in seen)
    assert zygote.helper().pid == helper and psutil.Process(helper).children() == []


NO_HELPER = """
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders import _zygote_link
from rag_core.ingest.loaders._isolated import run_isolated
from tests.portable_helpers import echo
_zygote_link.STARTUP_S = 0.001  # the helper is never ready in time: it fails to start, every time
print([run_isolated(echo, (str(n),), Deadline(60, "a.txt"), "test") for n in range(4)], _zygote_link.helper().pid)
"""


def test_when_the_helper_cannot_start_reads_use_fresh_interpreters_after_one_more_try():
    done = subprocess.run([sys.executable, "-c", NO_HELPER], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "['0', '1', '2', '3'] None"
    assert len([line for line in lines if "The reader helper could not start" in line]) == 2
    assert "Traceback" not in done.stdout + done.stderr
