"""Chunking: structure first, token budget measured with the model's own tokenizer, exact offsets."""
from __future__ import annotations

import pytest

from rag_core.core.models import Document, Section, SourceMeta
from rag_core.ingest.chunking import chunk_document

SRC = SourceMeta(file_name="t.md", title="T", kind="md", sha256="x")


def _doc(text: str, sections=None, page_starts=()) -> Document:
    sections = sections or (Section((), 0, len(text)),)
    return Document(doc_id="d1", text=text, sections=tuple(sections), source=SRC,
                    page_count=len(page_starts) or None, page_starts=tuple(page_starts))


def _check_invariants(doc, chunks, embedder, max_tokens):
    for i, c in enumerate(chunks):
        assert c.index == i
        assert doc.text[c.char_start:c.char_end] == c.text
        assert c.text.strip() == c.text and c.text
        # the model adds [CLS] and [SEP]; nothing may be silently truncated at 256
        assert embedder.count_tokens([c.text])[0] + 2 <= max_tokens
        assert c.source == SRC and c.doc_id == "d1"


def test_sections_are_never_crossed_and_heading_path_kept(embedder):
    a = "# Intro\n\nShort intro sentence. Another one.\n\n"
    b = "## Details\n\nThe details paragraph is here."
    text = a + b
    doc = _doc(text, [Section(("Intro",), 0, len(a)), Section(("Intro", "Details"), len(a), len(text))])
    chunks = chunk_document(doc, embedder, max_tokens=200)
    assert [c.heading_path for c in chunks] == [("Intro",), ("Intro", "Details")]
    assert chunks[0].text.endswith("Another one.")
    assert chunks[1].text.startswith("## Details")
    _check_invariants(doc, chunks, embedder, 200)


def test_budget_packs_sentences_with_one_sentence_overlap(embedder):
    sentences = [f"Sentence number {i} talks about topic {i} in a few plain words." for i in range(60)]
    text = " ".join(sentences)
    doc = _doc(text)
    chunks = chunk_document(doc, embedder, max_tokens=64)
    assert len(chunks) > 5
    _check_invariants(doc, chunks, embedder, 64)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        last_sentence = prev.text.rsplit(". ", 1)[-1]
        assert nxt.text.startswith(last_sentence)  # one-sentence overlap inside a paragraph
        assert nxt.char_start < prev.char_end
    # never split mid-sentence: every chunk starts at a sentence start and ends at a sentence end
    for c in chunks:
        assert c.text.startswith("Sentence number") and c.text.endswith("words.")


def test_paragraph_boundaries_preferred(embedder):
    para = "This paragraph has a handful of sentences. " * 6
    text = "\n\n".join(para.strip() for _ in range(6))
    doc = _doc(text)
    chunks = chunk_document(doc, embedder, max_tokens=180)
    _check_invariants(doc, chunks, embedder, 180)
    for c in chunks[:-1]:
        assert doc.text[c.char_end:c.char_end + 2] == "\n\n"  # ends exactly at a paragraph end


def test_overlong_sentence_is_split_at_word_boundaries(embedder):
    text = " ".join(f"word{i}" for i in range(3000))  # one sentence, no punctuation
    doc = _doc(text)
    chunks = chunk_document(doc, embedder, max_tokens=100)
    _check_invariants(doc, chunks, embedder, 100)
    assert "".join(c.text + " " for c in chunks).split() == text.split()  # nothing lost, nothing doubled


def test_pages_follow_character_offsets(embedder):
    p1 = "First page text. " * 40
    p2 = "Second page text. " * 40
    text = p1.strip() + "\n\n" + p2.strip()
    doc = _doc(text, page_starts=(0, len(p1.strip()) + 2))
    chunks = chunk_document(doc, embedder, max_tokens=100)
    _check_invariants(doc, chunks, embedder, 100)
    assert chunks[0].page_start == 1 and chunks[-1].page_end == 2
    for c in chunks:
        expected = {1} if "First" in c.text and "Second" not in c.text else None
        if expected:
            assert (c.page_start, c.page_end) == (1, 1)


def test_abbreviations_do_not_end_sentences(embedder):
    text = ("Dr. Smith wrote e.g. this line. " * 30).strip()
    chunks = chunk_document(_doc(text), embedder, max_tokens=40)
    assert all(not c.text.startswith("Smith") and not c.text.startswith("this") for c in chunks)


@pytest.mark.slow
def test_ten_megabyte_single_line_is_linear_and_bounded(embedder):
    import time

    text = ("A plain sentence about nothing in particular. " * 230_000)[:10_000_000].strip()
    doc = _doc(text)
    t = time.perf_counter()
    chunks = chunk_document(doc, embedder, max_tokens=200)
    elapsed = time.perf_counter() - t
    assert elapsed < 120
    assert chunks[-1].char_end == len(text) or text[chunks[-1].char_end:].strip() == ""
    sample = chunks[:: max(1, len(chunks) // 50)]
    assert all(text[c.char_start:c.char_end] == c.text for c in sample)
    assert max(embedder.count_tokens([c.text for c in sample])) <= 198
