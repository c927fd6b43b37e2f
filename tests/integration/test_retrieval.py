"""Retrieval: every method through real Qdrant (embedded, on disk) and the real model; de-duplication, scoping,
fusion arithmetic, and the small benchmark smoke runs of `python -m rag_core eval`."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rag_core import retrieval
from rag_core.__main__ import main as cli_main
from rag_core.models import Chunk, Document, Passage, Section, SourceMeta
from rag_core.retrieval import METHODS, dedupe, merge_chunks, retrieve, zscore_fuse

TOPICS = {
    "bees": ("Honey bees", "Honey bees live in colonies ruled by a single queen. Worker bees collect nectar and pollen "
             "from flowers and turn the nectar into honey inside the hive. Drones exist only to mate with the queen."),
    "volcano": ("Volcanoes", "A volcano is a rupture in the crust of a planet through which lava, ash and gases "
                "escape. Stratovolcanoes such as Mount Fuji are built from many layers of hardened lava."),
    "pump": ("Pump manual", "Maintenance of the XQ-7731 centrifugal pump: replace the impeller seal every 2,000 "
             "operating hours and check the bearing temperature monthly. Never run the pump dry."),
}


def _doc(key: str, text: str | None = None, title: str | None = None) -> Document:
    title_, text_ = TOPICS.get(key, (title or key, text or ""))
    text_ = text or text_
    return Document(doc_id=f"doc-{key}", text=text_, sections=(Section((), 0, len(text_)),),
                    source=SourceMeta(file_name=f"{key}.txt", title=title or title_, kind="txt", sha256=key))


@pytest.fixture(scope="module")
def topical(tmp_path_factory, embedder):
    """One library (shared by the read-only tests of this module) with three short documents on unrelated topics."""
    from rag_core.config import Settings
    from rag_core.library import Library

    lib = Library(Settings(data_dir=tmp_path_factory.mktemp("topical")), embedder=embedder)
    for key in TOPICS:
        assert lib.ingest_document(_doc(key)).status == "added"
    yield lib
    lib.close()


def _chunk(doc_id: str, start: int, end: int, text: str, index: int = 0, page: int | None = None) -> Chunk:
    return Chunk(doc_id=doc_id, index=index, text=text, char_start=start, char_end=end, page_start=page,
                 page_end=page, heading_path=(), source=SourceMeta("f.txt", "T", "txt", "x"))


# -- pure parts ----------------------------------------------------------------------------------------
def test_dedupe_merges_overlapping_neighbours_and_drops_repeats():
    text = "Alpha one. Beta two. Gamma three. Delta four. Epsilon five."
    a = _chunk("d", 0, 33, text[0:33], index=0, page=1)  # Alpha..Gamma
    b = _chunk("d", 21, 45, text[21:45], index=1, page=2)  # Gamma..Delta (overlaps a)
    c = _chunk("d", 34, 59, text[34:59], index=2, page=2)  # Delta..Epsilon (overlaps b only)
    far = _chunk("e", 0, 10, text[0:10], index=0)  # another document, same words as a's start
    same_text = _chunk("f", 0, 33, text[0:33], index=0)  # a copy of a's text in another document
    out = dedupe([Passage(b, 0.9), Passage(a, 0.8), Passage(far, 0.7), Passage(same_text, 0.6), Passage(c, 0.5)])
    assert [p.chunk.doc_id for p in out] == ["d", "e"]
    merged = out[0]
    assert merged.score == 0.9 and merged.chunk.index == 1  # the best chunk's identity and score
    assert (merged.chunk.char_start, merged.chunk.char_end) == (0, 45)
    assert merged.chunk.text == text[0:45]
    assert (merged.chunk.page_start, merged.chunk.page_end) == (1, 2)
    # c overlaps the merged passage, which already holds MAX_MERGED (2) chunks: it takes no slot of its own.


def test_dedupe_never_bridges_two_passages():
    text = "abcdefghijklmnopqrstuvwxyz0123"
    a = _chunk("d", 0, 10, text[0:10])
    b = _chunk("d", 20, 30, text[20:30], index=2)
    bridge = _chunk("d", 8, 22, text[8:22], index=1)
    out = dedupe([Passage(a, 3.0), Passage(b, 2.0), Passage(bridge, 1.0)])
    assert [(p.chunk.char_start, p.chunk.char_end) for p in out] == [(0, 10), (20, 30)]


def test_merge_of_contained_chunk_keeps_the_outer_text():
    outer = _chunk("d", 0, 20, "x" * 20)
    inner = _chunk("d", 5, 10, "x" * 5, index=1)
    m = merge_chunks(inner, outer)
    assert (m.char_start, m.char_end, m.text, m.index) == (0, 20, "x" * 20, 1)


def test_dedupe_keeps_non_overlapping_chunks_of_one_document():
    a = _chunk("d", 0, 10, "0123456789")
    b = _chunk("d", 10, 20, "abcdefghij", index=1)
    assert len(dedupe([Passage(a, 1.0), Passage(b, 0.5)])) == 2


def test_zscore_fusion_weights_and_missing_candidates():
    c = {n: _chunk(n, 0, 1, n) for n in "abcd"}
    dense = [Passage(c["a"], 0.9), Passage(c["b"], 0.5), Passage(c["c"], 0.1)]
    lexical = [Passage(c["c"], 12.0), Passage(c["d"], 3.0), Passage(c["b"], 0.0)]
    assert [p.chunk.doc_id for p in zscore_fuse(dense, lexical, 1.0)][:2] == ["a", "b"]
    assert [p.chunk.doc_id for p in zscore_fuse(dense, lexical, 0.0)][:2] == ["c", "d"]
    even = {p.chunk.doc_id: p.score for p in zscore_fuse(dense, lexical, 0.5)}
    # z-scores: dense a/b/c = 1.2247/0/-1.2247; lexical c/d/b = 1.3728/-0.3922/-0.9806.
    # "a" is missing from the lexical list and gets its lowest z-score; "d" likewise for the dense list.
    assert even["a"] == pytest.approx(0.5 * 1.2247449 + 0.5 * -0.9805807, abs=1e-6)
    assert even["d"] == pytest.approx(0.5 * -1.2247449 + 0.5 * -0.3922323, abs=1e-6)
    assert even["c"] == pytest.approx(0.5 * -1.2247449 + 0.5 * 1.3728129, abs=1e-6)
    assert zscore_fuse([], [], 0.5) == []


# -- through the store ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_every_method_finds_the_right_document(topical, method):
    hits = retrieve(topical.store, "How do worker bees make honey from nectar?", k=3, method=method)
    assert hits and hits[0].chunk.doc_id == "doc-bees"
    assert all(isinstance(h.score, float) for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_exact_rare_term_is_found_by_the_default(topical):
    hits = retrieve(topical.store, "XQ-7731 impeller", k=3)
    assert hits[0].chunk.doc_id == "doc-pump"
    lexical = retrieve(topical.store, "XQ-7731 impeller", k=3, method="lexical")
    assert [h.chunk.doc_id for h in lexical] == ["doc-pump"]  # only documents sharing a word score lexically


def test_scoping_by_document_and_owner(library):
    bees = library.ingest_document(_doc("bees"), owner="alice").doc_id
    volcano = library.ingest_document(_doc("volcano"), owner="bob").doc_id
    pump = library.ingest_document(_doc("pump")).doc_id
    q = "How do worker bees make honey in the hive?"  # "the" is in every document: lexical scopes are not empty
    for method in METHODS:
        everything = {h.chunk.doc_id for h in retrieve(library.store, q, k=5, method=method)}
        assert bees in everything, method
        scoped = retrieve(library.store, q, k=5, doc_ids=[volcano, pump], method=method)
        assert scoped and {h.chunk.doc_id for h in scoped} <= {volcano, pump}, method
        assert retrieve(library.store, q, k=5, doc_ids=[], method=method) == []
        assert retrieve(library.store, q, k=5, doc_ids=["no-such-document"], method=method) == []
        mine = {h.chunk.doc_id for h in retrieve(library.store, q, k=5, owners=["bob", None], method=method)}
        assert mine and bees not in mine, method
    assert retrieve(library.store, q, k=5, owners=["alice"])[0].chunk.doc_id == bees
    assert retrieve(library.store, q, k=5, doc_ids=[bees, pump])[0].chunk.doc_id == bees


def test_overlapping_chunks_never_share_slots(library, settings):
    # One long paragraph: the chunker repeats a sentence between neighbouring chunks.
    sentences = [f"Sentence {i} tells how the lighthouse keeper logged storm number {i} with care." for i in range(120)]
    text = " ".join(sentences)
    doc = _doc("lighthouse", text=text, title="Lighthouse log")
    r = library.ingest_document(doc)
    assert r.chunks >= 4
    for method in METHODS:
        hits = retrieve(library.store, "lighthouse keeper logged storm", k=r.chunks, method=method)
        assert hits
        for i, a in enumerate(hits):
            assert a.chunk.text == text[a.chunk.char_start:a.chunk.char_end]
            for b in hits[i + 1:]:
                assert a.chunk.char_end <= b.chunk.char_start or b.chunk.char_end <= a.chunk.char_start, method


def test_query_without_words_and_unknown_method(topical):
    assert retrieve(topical.store, "?!", k=3, method="lexical") == []
    assert retrieve(topical.store, "?!", k=3)  # the dense side still answers
    with pytest.raises(ValueError, match="unknown retrieval method"):
        retrieve(topical.store, "bees", method="bm42")


def test_half_indexed_documents_are_invisible(library):
    from qdrant_client import models

    from rag_core.chunking import chunk_document
    from rag_core.store import _chunk_payload

    library.ingest_document(_doc("bees"))
    store = library.store
    chunks = chunk_document(replace(_doc("bees"), doc_id="doc-pending"), store.embedder)
    store._put_entry({"doc_id": "doc-pending", "status": "pending", "started": 0})  # as a crashed ingest leaves it
    dense, sparse = store.embed_chunks(chunks)
    store.client.upsert(store.collection, points=[models.PointStruct(id=c.point_id, vector={
        "dense": dense[i].tolist(), "lexical": models.SparseVector(indices=sparse[i].indices, values=sparse[i].values)},
        payload=_chunk_payload(c, None)) for i, c in enumerate(chunks)])
    for method in METHODS:
        found = {h.chunk.doc_id for h in retrieve(store, "worker bees honey", k=5, method=method)}
        assert "doc-bees" in found and "doc-pending" not in found, method


# -- evaluation harness and CLI ------------------------------------------------------------------------
def _eval_json(capsys, *args: str) -> tuple[int, dict]:
    code = cli_main(["eval", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_smoke_xquad_hybrid_default_beats_vector(tmp_path, capsys):
    """50 XQuAD questions (2 articles): telling paragraphs of one article apart is where words matter."""
    code, rep = _eval_json(capsys, "--dataset", "xquad", "--limit", "50", "--cache-dir", str(tmp_path),
                           "--methods", "vector", retrieval.DEFAULT_METHOD)
    assert code == 0 and rep["dataset"] == "xquad" and rep["default"] == retrieval.DEFAULT_METHOD
    assert rep["questions"] == 50
    vec, best = rep["methods"]["vector"], rep["methods"][retrieval.DEFAULT_METHOD]
    assert set(best) == {"recall@1", "recall@5", "mrr@10"}
    assert best["recall@1"] >= vec["recall@1"] + 0.1  # measured 0.96 vs 0.76
    assert best["mrr@10"] > vec["mrr@10"] and best["recall@5"] >= vec["recall@5"]
    for f in rep["failures"]:
        assert f["method"] == retrieval.DEFAULT_METHOD and f["rank"] != 1 and len(f["top"]) <= 5
        assert {"question", "expected", "top"} <= set(f)
    # A rerun reuses the cached collection (nothing is embedded again) and gives the same numbers.
    code, again = _eval_json(capsys, "--dataset", "xquad", "--limit", "50", "--cache-dir", str(tmp_path),
                             "--methods", "vector", retrieval.DEFAULT_METHOD)
    assert again["methods"] == rep["methods"]


@pytest.mark.slow
def test_smoke_pubmedqa_default_keeps_vector_recall(tmp_path, capsys):
    """50 PubMedQA questions over their own 50 abstracts, through `eval --dataset pubmedqa --limit 50`.

    Measured here: vector 1.00/1.00/1.00, zscore 0.96/1.00/0.977 (R@1/R@5/MRR@10). On so few, easy questions
    the dense side is already perfect at rank 1 and the fused ranking moves two of them to rank 2 (analysed in
    docs/retrieval.md); over all 1,000 the default wins (R@1 0.983 vs 0.972). So this smoke run asserts what
    holds at this size - no loss at Recall@5, and absolute floors that a broken pipeline cannot meet - and the
    XQuAD smoke run above asserts the default beating vector search.
    """
    code, rep = _eval_json(capsys, "--dataset", "pubmedqa", "--limit", "50", "--cache-dir", str(tmp_path),
                           "--methods", "vector", retrieval.DEFAULT_METHOD)
    assert code == 0 and rep["questions"] == 50
    vec, best = rep["methods"]["vector"], rep["methods"][retrieval.DEFAULT_METHOD]
    assert best["recall@5"] >= vec["recall@5"] and best["recall@5"] >= 0.98
    assert best["recall@1"] >= 0.94 and best["mrr@10"] >= 0.96
    assert len(rep["failures"]) == round(50 * (1 - best["recall@1"]))


def test_eval_on_own_questions_jsonl(library, settings, tmp_path, capsys):
    for key in TOPICS:
        library.ingest_document(_doc(key))
    library.close()
    qs = tmp_path / "mine.jsonl"
    qs.write_text("\n".join(json.dumps(x) for x in [
        {"question": "When should the impeller seal be replaced?", "expected": "Pump manual"},
        {"question": "What is Mount Fuji built from?", "expected": "layers of hardened lava"},
        {"question": "Who rules a bee colony?", "expected": "a phrase that appears nowhere"},
    ]) + "\n", encoding="utf-8")
    code, rep = _eval_json(capsys, "--dataset", str(qs), "--data-dir", str(settings.data_dir),
                           "--methods", "vector", retrieval.DEFAULT_METHOD)
    assert code == 0 and rep["dataset"] == "mine" and rep["questions"] == 3
    assert rep["methods"][retrieval.DEFAULT_METHOD]["recall@5"] == pytest.approx(2 / 3, abs=1e-3)
    missed = [f for f in rep["failures"] if f["expected"] == "a phrase that appears nowhere"]
    assert missed and missed[0]["rank"] is None and missed[0]["top"][0]["title"] == "Honey bees"


def test_eval_rejects_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "no expected field"}\n', encoding="utf-8")
    code, rep = _eval_json(capsys, "--dataset", str(bad))
    assert code == 2 and "line 1" in rep["error"]
    code, rep = _eval_json(capsys, "--dataset", "squad")
    assert code == 2 and "pubmedqa" in rep["error"]
    empty = tmp_path / "q.jsonl"
    empty.write_text('{"question": "anything?", "expected": "x"}\n', encoding="utf-8")
    code = cli_main(["eval", "--dataset", str(empty), "--data-dir", str(tmp_path / "nothing-here")])
    assert code == 2 and "library is empty" in capsys.readouterr().err


def test_library_with_old_lexical_vectors_is_re_encoded_on_open(library, settings, embedder):
    """A collection written by an earlier lexical encoder gets its sparse vectors rebuilt (dense ones kept)."""
    from qdrant_client import models

    from rag_core.embeddings import LEXICAL_VERSION
    from rag_core.library import Library

    pump = library.ingest_document(_doc("pump")).doc_id
    library.ingest_document(_doc("bees"))
    store = library.store
    points, _ = store.client.scroll(store.collection, limit=100, with_vectors=["dense"])
    dense_before = {p.id: p.vector["dense"] for p in points}
    store.client.update_vectors(store.collection, points=[models.PointVectors(id=p.id, vector={
        "lexical": models.SparseVector(indices=[7, 8], values=[1.0, 1.0])}) for p in points])  # an old encoding
    meta = store.client.get_collection(store.collection).config.metadata
    store.client.update_collection(store.collection, metadata={**meta, "lexical": "wordpiece-tf-1"})
    assert retrieve(store, "XQ-7731 impeller", k=3, method="lexical") == []
    library.close()

    reopened = Library(settings, embedder=embedder)
    try:
        s = reopened.store
        assert s.client.get_collection(s.collection).config.metadata["lexical"] == LEXICAL_VERSION
        assert [h.chunk.doc_id for h in retrieve(s, "XQ-7731 impeller", k=3, method="lexical")] == [pump]
        points, _ = s.client.scroll(s.collection, limit=100, with_vectors=["dense"])
        assert {p.id: p.vector["dense"] for p in points} == dense_before
    finally:
        reopened.close()
