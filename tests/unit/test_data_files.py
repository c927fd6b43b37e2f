"""DocChat's own files in its data folder are not trusted (issue 23): a FIFO, a link to a device, a file larger than
its limit or of the wrong JSON shape is skipped and named in the log, never a hang, a memory blow-up or a crash; the
sidebar's list of conversations reads only a bounded head of a bounded number of files."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import ConversationUnreadable
from rag_core.core.safe_files import UnsafeFile, read_bytes, read_head
from rag_core.ingest.originals import load_original, original_path
from rag_core.service import conversations as conversations_module
from rag_core.service.conversations import Conversation, FileConversations, to_json
from rag_core.service.preferences import FilePreferences

POSIX_ONLY = pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(),
                                reason="FIFOs and /dev/zero exist on POSIX systems only")
ROOT = Path(__file__).resolve().parents[2]


def _returns_within(fn: Callable[[], Any], seconds: float = 20) -> Any:
    """fn()'s result (or its exception); fails, instead of hanging the test run, when fn has not returned within
    `seconds`."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            out.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{fn} did not return within {seconds} s (blocked on a FIFO?)"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _in_small_process(code: str) -> str:
    """Run `code` in a fresh interpreter limited to 1.5 GB of address space (a read that would never end fails there
    with MemoryError, not on this machine); its stdout."""
    script = ("import resource\ntry:\n    resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))\n"
              "except (ValueError, OSError):  # macOS does not enforce it\n    pass\n" + textwrap.dedent(code))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _conversation(conv_id: str = "0123456789abcdef", title: str = "Kept", turns: int = 1, text: str = "Hi?") -> Conversation:
    conv = Conversation(id=conv_id, title=title)
    for i in range(turns):
        conv.turns += [{"id": f"u{i}", "role": "user", "text": text},
                       {"id": f"a{i}", "role": "assistant", "text": text, "answer": None, "error": None}]
    return conv


# -- the bounded reader ------------------------------------------------------------------------------------------
def test_read_bytes_reads_up_to_its_limit_and_refuses_one_byte_more(tmp_path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, 100) == b"x" * 100
    with pytest.raises(UnsafeFile, match="larger than 99 bytes"):
        read_bytes(path, 99)
    assert read_head(path, 10) == b"x" * 10
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing", 10)
    with pytest.raises(UnsafeFile, match="folder"):
        read_bytes(tmp_path, 10)


@POSIX_ONLY
def test_read_bytes_refuses_a_fifo_and_a_link_to_a_device_without_reading(tmp_path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UnsafeFile, match="named pipe"):
        _returns_within(lambda: read_bytes(tmp_path / "pipe", 10))
    with pytest.raises(UnsafeFile, match="device"):
        read_head(tmp_path / "zero", 10)


# -- preferences.json --------------------------------------------------------------------------------------------
@POSIX_ONLY
def test_preferences_that_are_a_fifo_do_not_hang_the_page(tmp_path, caplog) -> None:
    os.mkfifo(tmp_path / "preferences.json")
    prefs = FilePreferences(Settings(data_dir=tmp_path))
    with caplog.at_level(logging.WARNING):
        assert _returns_within(prefs.load) == {}
    assert "preferences.json" in caplog.text
    prefs.save({"top_k": 7})  # saving replaces the pipe with a regular file
    assert FilePreferences(Settings(data_dir=tmp_path)).load() == {"top_k": 7}


@POSIX_ONLY
def test_preferences_linked_to_dev_zero_are_ignored_without_reading_them(tmp_path) -> None:
    (tmp_path / "preferences.json").symlink_to("/dev/zero")
    out = _in_small_process(f"""
        from pathlib import Path
        from rag_core.core.config import Settings
        from rag_core.service.preferences import FilePreferences
        print(FilePreferences(Settings(data_dir=Path({str(tmp_path)!r}))).load())
    """)
    assert out == "{}"


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "null", "{" * 50_000])
def test_preferences_of_the_wrong_shape_are_ignored(tmp_path, content) -> None:
    (tmp_path / "preferences.json").write_text(content, encoding="utf-8")
    assert FilePreferences(Settings(data_dir=tmp_path)).load() == {}


# -- conversations -----------------------------------------------------------------------------------------------
@POSIX_ONLY
def test_a_conversation_fifo_or_device_link_is_skipped_and_named(tmp_path) -> None:
    folder = tmp_path / "c"
    store = FileConversations(folder)
    store.save(_conversation())
    os.mkfifo(folder / "00000000000000f1.json")
    (folder / "00000000000000f2.json").symlink_to("/dev/zero")
    listing = _returns_within(store.listing)
    assert [i.id for i in listing.items] == ["0123456789abcdef"]
    assert sorted(listing.unreadable) == ["00000000000000f1.json", "00000000000000f2.json"]
    assert _returns_within(lambda: store.load("00000000000000f1")) is None
    with pytest.raises(ConversationUnreadable, match="00000000000000f2.json"):
        store.open("00000000000000f2")
    out = _in_small_process(f"""
        from pathlib import Path
        from rag_core.service.conversations import FileConversations
        store = FileConversations(Path({str(folder)!r}))
        print(len(store.list()), store.load("00000000000000f2"))
    """)
    assert out == "1 None"


@pytest.mark.parametrize("content", [
    "[1,2]",
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [1]}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": {"a": 1}}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [{"role": "user", "text": 5}]}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [{"role": "assistant", "answer": [1]}]}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [{"role": "assistant", "answer": '
    '{"text": "a", "mode": "m", "citations": [1]}}]}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [{"role": "assistant", "answer": '
    '{"text": "a", "mode": "m", "passages": [{"chunk": 1, "score": 1}]}}]}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [{"role": "assistant", "answer": '
    '{"text": "a", "mode": "m", "notice": ["![x](http://127.0.0.1:9/p.png)"]}}]}',
    '{"format": 1, "id": "00000000000000b1", "title": "x", "turns": [{"role": "assistant", "answer": '
    '{"text": "a", "mode": "m", "extra": [1]}}]}',
    '{"format": 1, "id": "0000000000000bad", "title": "x", "turns": []}',
])
def test_a_conversation_of_the_wrong_shape_is_skipped_and_named(tmp_path, caplog, content) -> None:
    folder = tmp_path / "c"
    store = FileConversations(folder)
    store.save(_conversation())
    (folder / "00000000000000b1.json").write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        listed = [i.id for i in store.list()]  # never raises
        assert store.load("00000000000000b1") is None
    assert "0123456789abcdef" in listed
    assert "00000000000000b1.json" in caplog.text
    with pytest.raises(ConversationUnreadable, match="00000000000000b1.json"):
        store.open("00000000000000b1")


def test_the_listing_names_files_it_could_not_read(tmp_path) -> None:
    folder = tmp_path / "c"
    store = FileConversations(folder)
    store.save(_conversation())
    (folder / "00000000000000b1.json").write_text("[1,2]", encoding="utf-8")
    (folder / "00000000000000b2.json").write_text("{broken", encoding="utf-8")
    (folder / "00000000000000b3.json").write_text('{"format": 1, "id": "0000000000000bad", "turns": [{}]}')
    listing = store.listing()
    assert [i.id for i in listing.items] == ["0123456789abcdef"]
    assert sorted(listing.unreadable) == ["00000000000000b1.json", "00000000000000b2.json", "00000000000000b3.json"]
    assert listing.folder == str(folder)


def test_listing_reads_a_bounded_head_of_each_file(tmp_path) -> None:
    folder = tmp_path / "c"
    store = FileConversations(folder)
    for i in range(3):  # about 6 MB each: parsing one whole would take far more memory than the listing may
        store.save(_conversation(f"{i + 1:016x}", f"Big {i}", turns=700, text="word " * 900))
    assert all(p.stat().st_size > 5_000_000 for p in folder.glob("*.json"))
    tracemalloc.start()
    try:
        infos = store.list()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sorted(i.title for i in infos) == ["Big 0", "Big 1", "Big 2"]
    assert all(i.questions == 700 for i in infos)
    assert peak < 1_000_000, f"listing took {peak} bytes"


def test_listing_looks_at_a_bounded_number_of_newest_files(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(conversations_module, "MAX_LISTED", 5)
    folder = tmp_path / "c"
    store = FileConversations(folder)
    for i in range(8):
        store.save(_conversation(f"{i + 1:016x}", f"Conversation {i}"))
        os.utime(folder / f"{i + 1:016x}.json", (1_000_000 + i, 1_000_000 + i))
    listing = store.listing()
    assert [i.title for i in listing.items] == [f"Conversation {i}" for i in (7, 6, 5, 4, 3)]
    assert listing.left_out == 3


def test_files_written_before_the_question_count_was_saved_are_still_listed(tmp_path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    data = to_json(_conversation())
    del data["questions"]  # the key order of the previous release: format, id, title, created, updated, ..., turns
    (folder / "0123456789abcdef.json").write_text(json.dumps(data), encoding="utf-8")
    empty = {**data, "id": "00000000000000e1", "turns": []}
    (folder / "00000000000000e1.json").write_text(json.dumps(empty), encoding="utf-8")
    [info] = FileConversations(folder).list()
    assert (info.id, info.title, info.questions) == ("0123456789abcdef", "Kept", 1)


def test_a_conversation_file_over_the_limit_is_refused_whatever_its_size_says(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(conversations_module, "MAX_FILE_BYTES", 2000)
    folder = tmp_path / "c"
    store = FileConversations(folder)
    store.save(_conversation(turns=40))
    assert (folder / "0123456789abcdef.json").stat().st_size > 2000
    assert store.load("0123456789abcdef") is None
    with pytest.raises(ConversationUnreadable, match="larger than"):
        store.open("0123456789abcdef")


# -- saved originals ---------------------------------------------------------------------------------------------
@POSIX_ONLY
def test_a_saved_original_that_is_a_fifo_or_device_link_is_not_read(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path)
    pipe = original_path(settings, "pipe1")
    pipe.parent.mkdir(parents=True)
    os.mkfifo(pipe)
    original_path(settings, "zero1").symlink_to("/dev/zero")
    assert _returns_within(lambda: load_original(settings, "pipe1")) is None
    out = _in_small_process(f"""
        from pathlib import Path
        from rag_core.core.config import Settings
        from rag_core.ingest.originals import load_original
        print(load_original(Settings(data_dir=Path({str(tmp_path)!r})), "zero1"))
    """)
    assert out == "None"


def test_a_saved_original_over_the_upload_limit_is_not_read(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, max_upload_mb=1)
    path = original_path(settings, "big1")
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.truncate(settings.max_upload_bytes + 1)
    assert load_original(settings, "big1") is None
    path.write_bytes(b"%PDF-1.4 small")
    assert load_original(settings, "big1") == b"%PDF-1.4 small"


@pytest.mark.parametrize("path, value", [
    (("citations", 0, "n"), "1](http://127.0.0.1:9/x.png)"),
    (("citations", 0, "passage", "chunk", "source", "revision_id"), "![x](http://127.0.0.1:9/r.png)"),
    (("citations", 0, "passage", "chunk", "heading_path"), [1, 2]),
    (("passages", 0, "chunk", "page_start"), "3"),
    (("citations", 0, "answer_spans"), ["ab"]),
    (("text",), 5),
])
def test_an_answer_with_a_field_of_the_wrong_type_is_refused(path, value) -> None:
    """A hand-edited file cannot slip text where the pages expect a number (a citation number goes into Markdown)."""
    from rag_core.core.models import Answer, Chunk, Citation, Passage, SourceMeta
    from rag_core.service.conversations import answer_from_dict, answer_to_dict

    src = SourceMeta(file_name="a.pdf", title="A", kind="pdf", sha256="a" * 64, revision_id=3)
    p = Passage(Chunk("d1", 0, "Text here.", 0, 10, 1, 1, ("H",), src), 0.5)
    d = json.loads(json.dumps(answer_to_dict(Answer(text="Text [1].", mode="model", passages=(p,),
                                                    citations=(Citation(1, p, "verified", 0, 4, 0.9, ((0, 4),)),)))))
    assert answer_from_dict(json.loads(json.dumps(d))).citations[0].n == 1
    target = d
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    with pytest.raises((ValueError, TypeError)):
        answer_from_dict(d)
