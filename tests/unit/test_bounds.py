"""Bounded work per file, whatever its structure: the pathological inputs of the hardening issue, scaled down and
generated here. Each case has a time limit and checks the chunk count and that no chunk exceeds the token budget,
counted again with the real tokenizer of the bundled embedding model."""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import rag_core.ingest.chunking as chunking
import rag_core.ingest.loaders as loaders
from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import (
    DocChatError,
    FileTooLarge,
    IngestTimedOut,
    NotARegularFile,
    SettingsError,
    TooManyPassages,
)
from rag_core.ingest.chunking import MAX_PASSAGES, chunk_document, estimate
from rag_core.ingest.loaders import load_bytes, load_file, read_file

SETTINGS = Settings()
MB = 1024 * 1024
# Each time limit below (func_only) bounds the test's own work, not the embedding model loading in a fixture: the
# first test of a worker process that needs the model waits for it.


def _chunks(embedder, data: bytes, name: str, max_tokens: int = 200):
    doc = load_bytes(data, name, SETTINGS)
    return doc, chunk_document(doc, embedder, max_tokens)


def _assert_within_window(embedder, doc, chunks, max_tokens: int = 200) -> None:
    budget = max_tokens - 2  # [CLS] and [SEP]
    assert max(embedder.count_tokens([c.text for c in chunks])) <= budget
    assert max(len(c.text) for c in chunks) <= budget * chunking._MAX_CHARS_PER_TOKEN
    assert all(doc.text[c.char_start:c.char_end] == c.text for c in chunks)


def _one_sentence_about(err: DocChatError, name: str) -> None:
    msg = str(err)
    assert msg.startswith(f"“{name}”") and "\n" not in msg and "Traceback" not in msg and len(msg) < 300


# --------------------------------------------------------------------------- chunking, linear and bounded
@pytest.mark.timeout(60, func_only=True)
def test_one_line_without_sentence_end(embedder):
    data = (b"lorem ipsum dolor sit amet " * 40_000)[:MB]  # one line, no full stop
    t = time.perf_counter()
    doc, chunks = _chunks(embedder, data, "lorem.txt")
    assert time.perf_counter() - t < 20  # was 2 s per 400 KB and superlinear (10 MB: > 600 s)
    assert len(data) / 1000 < len(chunks) < len(data) / 300
    _assert_within_window(embedder, doc, chunks)


@pytest.mark.timeout(60, func_only=True)
def test_endless_headings_are_merged(embedder):
    data = b"".join(b"# H%d\n" % i for i in range(100_000))  # 889 KB, 100,000 headings and nothing else
    doc, chunks = _chunks(embedder, data, "headings.md")
    assert len(doc.sections) == 100_000
    assert len(chunks) < 10_000  # was one chunk per heading
    _assert_within_window(embedder, doc, chunks)
    assert chunks[-1].text.endswith("# H99999")


def test_heading_only_section_goes_with_its_body(embedder):
    text = "# Part\n## Chapter\n\nThe body of the chapter. It has two sentences.\n# Next\n\nMore text here."
    doc, chunks = _chunks(embedder, text.encode(), "parts.md")
    assert [c.text.splitlines()[0] for c in chunks] == ["# Part", "# Next"]
    assert chunks[0].heading_path == ("Part", "Chapter")


@pytest.mark.timeout(60, func_only=True)
def test_no_whitespace_is_cut_hard(embedder):
    data = b"x" * MB
    doc, chunks = _chunks(embedder, data, "xs.txt")
    assert len(chunks) > 100  # was one chunk of 1,048,576 characters
    _assert_within_window(embedder, doc, chunks)
    assert sum(len(c.text) for c in chunks) == MB  # nothing lost, nothing doubled


@pytest.mark.timeout(60, func_only=True)
def test_long_word_pieces_without_spaces_fit_a_small_budget(embedder):
    data = ("漢字かな交じり文" * 20_000 + " " + "ab1-" * 50_000).encode()
    doc, chunks = _chunks(embedder, data, "cjk.txt", max_tokens=32)
    _assert_within_window(embedder, doc, chunks, 32)


@pytest.mark.timeout(60, func_only=True)
def test_passages_are_capped(embedder, monkeypatch):
    monkeypatch.setattr(chunking, "MAX_PASSAGES", 50)
    doc = load_bytes(b"A short sentence about one thing. " * 30_000, "huge.txt", SETTINGS)
    t = time.perf_counter()
    with pytest.raises(TooManyPassages) as e:
        chunk_document(doc, embedder, 200)
    assert time.perf_counter() - t < 5  # stops at the cap, not after chunking everything
    _one_sentence_about(e.value, "huge.txt")
    assert "too large to index" in str(e.value) and "Split" in str(e.value)


def test_too_long_for_the_cap_is_refused_up_front(monkeypatch):
    class NoTokenizer:
        def count_tokens(self, texts):
            raise AssertionError("decided before any tokenizing")

        def token_offsets(self, text):
            raise AssertionError("decided before any tokenizing")

    monkeypatch.setattr(chunking, "MAX_PASSAGES", 10)
    doc = load_bytes(b"word " * 10_000, "big.txt", SETTINGS)
    with pytest.raises(TooManyPassages):
        chunk_document(doc, NoTokenizer(), 200)
    assert MAX_PASSAGES == 20_000


@pytest.mark.timeout(60, func_only=True)
def test_markdown_heading_patterns_are_linear():
    for line in (b"# " + b"[" * 200_000, b"# " + b" " * 200_000 + b"x", b"# " + b"](" * 100_000,
                 b"---\ntitle: a" + b" " * 200_000 + b"b\n---\ntext"):
        t = time.perf_counter()
        load_bytes(line, "h.md", SETTINGS)
        assert time.perf_counter() - t < 1


class _Counting:
    """The real tokenizer, counting how many characters it was given."""

    def __init__(self, tok) -> None:
        self.tok, self.chars = tok, 0

    def count_tokens(self, texts):
        self.chars += sum(map(len, texts))
        return self.tok.count_tokens(texts)

    def token_offsets(self, text):
        self.chars += len(text)
        return self.tok.token_offsets(text)


@pytest.mark.timeout(60, func_only=True)
def test_too_many_passages_is_judged_from_samples(embedder, monkeypatch):
    monkeypatch.setattr(chunking, "MAX_PASSAGES", 50)
    doc = load_bytes(b"A short sentence about one thing. " * 30_000, "huge.txt", SETTINGS)  # 1 MB
    tok = _Counting(embedder)
    with pytest.raises(TooManyPassages):
        chunk_document(doc, tok, 200)
    assert tok.chars <= chunking._SAMPLES * chunking._SAMPLE_CHARS  # 64 KB of 1 MB were tokenized


@pytest.mark.timeout(60, func_only=True)
def test_a_run_without_sentence_end_makes_full_chunks_and_is_estimated_up_front(embedder):
    data = (b"lorem ipsum " * 45_000)[:MB // 2]  # one line, no sentence end
    doc, chunks = _chunks(embedder, data, "lorem.txt")
    full = -(-embedder.count_tokens([doc.text])[0] // 198)
    assert full <= len(chunks) <= full * 1.02  # was ~20% more: a short leftover at every 1,980-character window
    assert abs(estimate(doc, embedder, 200).passages - len(chunks)) <= 0.03 * len(chunks)
    _assert_within_window(embedder, doc, chunks)
    assert "".join(c.text for c in chunks).replace(" ", "") == doc.text.replace(" ", "")  # nothing lost or doubled


class _Clock:
    """A clock that remembers when it was read (the deadline's checks): the CPU time of the thread doing the work,
    so a gap measures that work, not how busy the machine is with other processes."""

    def __init__(self) -> None:
        self.reads: list[float] = []

    def __call__(self) -> float:
        self.reads.append(time.thread_time())
        return self.reads[-1]

    def longest_gap(self) -> float:
        return max(b - a for a, b in zip(self.reads, self.reads[1:], strict=False))


@pytest.mark.timeout(120, func_only=True)
@pytest.mark.parametrize("name, data", [
    ("sentences.txt", b"Ab. " * 150_000),  # one 600 KB line of 150,000 sentences: more than two windows
    ("lines.txt", b"Ab.\n" * 120_000),
    ("paragraphs.txt", b"a\n\n" * 150_000),
    ("xs.txt", b"x" * MB),
    ("headings.md", b"".join(b"# H%d\n" % i for i in range(20_000))),
])
def test_no_step_between_two_deadline_checks_is_long(embedder, name, data):
    clock = _Clock()
    deadline = Deadline(3600, name, clock=clock)
    t = time.perf_counter()
    doc = load_bytes(data, name, SETTINGS, deadline)
    chunk_document(doc, embedder, 200, deadline=deadline)
    assert len(clock.reads) > 5
    took = time.perf_counter() - t
    print(f"{name}: {len(clock.reads)} checks in {took:.1f} s, longest gap {clock.longest_gap():.2f} s")
    assert clock.longest_gap() < 2.5, f"{name}: {clock.longest_gap():.1f} s without a check (in {took:.1f} s)"


@pytest.mark.timeout(60, func_only=True)
def test_chunking_stops_at_the_deadline(embedder):
    now = [0.0]
    doc = load_bytes(b"Ab. " * 200_000, "late.txt", SETTINGS)

    def clock() -> float:
        now[0] += 0.1  # every step between two checks "takes" 100 ms
        return now[0]

    deadline = Deadline(0.5, "late.txt", clock=clock)
    with pytest.raises(IngestTimedOut) as e:
        chunk_document(doc, embedder, 200, deadline=deadline)
    _one_sentence_about(e.value, "late.txt")
    assert "took longer than 0.5 seconds" in str(e.value)


def test_deadline_and_its_messages():
    now = [100.0]
    d = Deadline(300, "report.pdf", clock=lambda: now[0])
    seen = []
    watch = d.watch(lambda *a: seen.append(a))
    watch("embedding", 1, 2)
    d.check()
    assert d.left() == 300 and seen == [("embedding", 1, 2)]
    d.refuse_if_longer(299)
    with pytest.raises(IngestTimedOut, match="would take longer than 5 minutes") as e:
        d.refuse_if_longer(301)
    assert e.value.projected and e.value.limit_s == 300
    now[0] = 400.0
    assert d.left() == 0
    with pytest.raises(IngestTimedOut) as e:
        watch("saving", 1, 2)
    assert seen == [("embedding", 1, 2)]  # not passed on once stopped
    assert str(e.value) == ("“report.pdf”: indexing it took longer than 5 minutes, so it was stopped and your library "
                            "was left as it was; split it into smaller files and add them one at a time.")
    assert "90 seconds" in str(IngestTimedOut("a", 90)) and "1 second," in str(IngestTimedOut("a", 1))
    assert Deadline.never().left() == float("inf")
    child = Deadline(300, "x", left=5)  # the part of a budget a child process still has
    assert child.left() <= 5 and "5 minutes" in str(IngestTimedOut(child.file_name, child.seconds))


@pytest.mark.parametrize("field, bad", [("ingest_timeout_s", 0), ("ingest_timeout_s", 10**6), ("ingest_workers", 0),
                                        ("ingest_workers", 100)])
def test_budget_settings_are_bounded(field, bad):
    with pytest.raises(SettingsError):
        Settings(**{field: bad})
    assert Settings().ingest.timeout_s == 300 and Settings().ingest.workers == 2


# --------------------------------------------------------------------------- reading a path
@pytest.mark.timeout(10, func_only=True)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_hanging(tmp_path, library):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    t = time.perf_counter()
    with pytest.raises(NotARegularFile) as e:
        load_file(fifo, SETTINGS)
    _one_sentence_about(e.value, "pipe.txt")
    assert "named pipe" in str(e.value)
    r = library.ingest_path(fifo)
    assert r.status == "failed" and r.error == str(e.value)
    assert time.perf_counter() - t < 1


@pytest.mark.timeout(10, func_only=True)
@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused(path):
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    t = time.perf_counter()
    with pytest.raises(NotARegularFile) as e:
        read_file(Path(path), SETTINGS)
    assert time.perf_counter() - t < 1
    _one_sentence_about(e.value, Path(path).name)
    assert "a device" in str(e.value)


def test_folder_is_refused(tmp_path):
    with pytest.raises(NotARegularFile, match="a folder"):
        read_file(tmp_path, SETTINGS)


@pytest.mark.timeout(10, func_only=True)
def test_oversize_read_stops_at_the_limit_whatever_stat_says(tmp_path, monkeypatch):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(64 * MB)  # sparse: 64 MB of zeros that take no disk
    real_stat = os.stat

    def lying_stat(path, *args, **kwargs):  # like /proc files and pipes: size 0
        st = real_stat(path, *args, **kwargs)
        return os.stat_result((st.st_mode, *st[1:6], 0, *st[7:])) if Path(path) == big else st

    read = []
    real_read = os.read

    def counted(fd, n):  # every read of the file's bytes (rag_core.core.safe_files.read_up_to)
        block = real_read(fd, n)
        read.append(len(block))
        return block

    monkeypatch.setattr(loaders.os, "stat", lying_stat)
    monkeypatch.setattr(os, "read", counted)
    limit = Settings(max_upload_mb=1)
    with pytest.raises(FileTooLarge) as e:
        read_file(big, limit)
    assert sum(read) == limit.max_upload_bytes + 1
    _one_sentence_about(e.value, "big.txt")


@pytest.mark.linux_only("reads /proc, whose files say size 0")
def test_files_whose_stat_size_is_zero_are_read_in_full():
    st_info = os.stat("/proc/self/status")
    assert stat.S_ISREG(st_info.st_mode) and st_info.st_size == 0
    assert b"Name:" in read_file(Path("/proc/self/status"), SETTINGS)


# --------------------------------------------------------------------------- property: any input, bounded
_WORD = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=30)
_MD_LINE = st.one_of(
    st.builds(lambda n, w: "#" * n + " " + w, st.integers(1, 7), _WORD),
    st.builds(lambda w: w + "\n" + "=" * 3, _WORD),
    st.sampled_from(["```", "~~~", "---", "", "   ", "- item", "1. item", "> quote", "[a](b)", "**x**", "title: t"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "#", "[", "*", ".", " ", "\t", "é", "字", "\u200b"]),
              st.integers(0, 3000)),
    _WORD,
)
_MARKDOWN = st.lists(_MD_LINE, max_size=80).map("\n".join)


def _check_any(embedder, data: bytes, name: str, max_tokens: int) -> None:
    t = time.perf_counter()
    try:
        doc = load_bytes(data, name, SETTINGS)
        chunks = chunk_document(doc, embedder, max_tokens)
    except DocChatError:
        return
    assert time.perf_counter() - t < 10
    if chunks:
        _assert_within_window(embedder, doc, chunks, max_tokens)


@pytest.mark.timeout(300, func_only=True)
@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=20_000), st.text(max_size=20_000).map(lambda s: s.encode("utf-8"))),
       name=st.sampled_from(["a.txt", "a.md", "a.pdf", "a.docx", "a"]), max_tokens=st.integers(32, 256))
def test_any_bytes_load_and_chunk_within_bounds(embedder, data, name, max_tokens):
    _check_any(embedder, data, name, max_tokens)


@pytest.mark.timeout(300, func_only=True)
@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_MARKDOWN, max_tokens=st.integers(32, 256))
def test_any_markdown_structure_chunks_within_bounds(embedder, text, max_tokens):
    _check_any(embedder, text.encode("utf-8"), "random.md", max_tokens)
