"""LangChain integration through real Qdrant (embedded) and the real model: the example in docs/langchain.md runs
as written, DocChatRetriever is scoped and citable, DocChatVectorStore round-trips, and chunks are stored as
LangChain Documents that langchain-qdrant itself can read."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from rag_core.adapters.langchain import DocChatRetriever, DocChatVectorStore
from rag_core.store.vector_store import chunk_to_document, document_payload, document_to_chunk

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

DOC = Path(__file__).resolve().parents[2] / "docs" / "langchain.md"
BEES = ("# Honey bees\n\n## Hive life\n\nHoney bees live in colonies ruled by a single queen. Worker bees collect "
        "nectar and pollen from flowers and turn the nectar into honey inside the hive.\n")
VOLCANO = ("A volcano is a rupture in the crust of a planet through which lava, ash and gases escape. "
           "Stratovolcanoes such as Mount Fuji are built from many layers of hardened lava.\n")
PUMP = ("Maintenance of the XQ-7731 centrifugal pump: replace the impeller seal every 2,000 operating hours and "
        "check the bearing temperature monthly. Never run the pump dry.\n")
Q_BEES = "How do worker bees make honey in the hive?"
CITATION_KEYS = {"doc_id", "index", "title", "page", "page_start", "page_end", "section", "heading_path", "anchor",
                 "char_start", "char_end", "url", "license", "source", "score"}


def python_blocks(markdown: str) -> list[str]:
    """The fenced ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)


class PromptRecorder(BaseCallbackHandler):
    """Keeps the messages every chat model run was given."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
        self.prompts.extend(m.content for batch in messages for m in batch)


@pytest.fixture
def three(library):
    """Bees (Markdown, owner alice), volcano (owner bob) and the pump manual (shared): their doc ids."""
    bees = library.ingest_bytes(BEES.encode(), "bees.md", owner="alice")
    volcano = library.ingest_bytes(VOLCANO.encode(), "volcano.txt", owner="bob")
    pump = library.ingest_bytes(PUMP.encode(), "pump.txt")
    assert {bees.status, volcano.status, pump.status} == {"added"}
    return bees.doc_id, volcano.doc_id, pump.doc_id


def test_docs_example_runs_against_a_library(tmp_path, monkeypatch, capsys, embedder):
    from rag_core.core.config import load_settings
    from rag_core.service.library import Library

    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    lib = Library(load_settings(), embedder=embedder)
    assert lib.ingest_bytes(BEES.encode(), "bees.md").status == "added"
    assert lib.ingest_bytes(VOLCANO.encode(), "volcano.txt").status == "added"
    lib.close()

    recorder = PromptRecorder()
    reply = "Worker bees turn nectar into honey inside the hive [1]."
    monkeypatch.setattr("langchain_ollama.ChatOllama",
                        lambda **kw: FakeListChatModel(responses=[reply], callbacks=[recorder]))
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 2 and "DocChatRetriever" in blocks[0] and "DocChatVectorStore" in blocks[1]
    namespace: dict = {"__name__": "docs_langchain"}
    try:
        exec(compile(blocks[0], str(DOC), "exec"), namespace)  # the documented example, as written
        assert namespace["answer"] == reply and capsys.readouterr().out.strip() == reply
        prompt = recorder.prompts[-1]
        assert "[1] Honey bees: " in prompt and "turn the nectar into honey" in prompt
        assert "What do worker bees make from nectar?" in prompt

        exec(compile(blocks[1], str(DOC), "exec"), namespace)
        assert capsys.readouterr().out == "Pump notes - Replace the XQ-7731 impeller seal every 2,000 operating hours.\n"
    finally:
        if "library" in namespace:
            namespace["library"].close()
    reopened = Library(load_settings(), embedder=embedder)
    try:
        assert sorted(d.title for d in reopened.documents()) == ["Honey bees", "volcano"]  # pump notes deleted
    finally:
        reopened.close()


def test_readme_example_runs_against_a_library(tmp_path, monkeypatch, capsys, embedder):
    import rag_core.service.library
    from rag_core.core.config import load_settings
    from rag_core.service.library import Library

    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    lib = Library(load_settings(), embedder=embedder)
    assert lib.ingest_bytes(BEES.encode(), "bees.md").status == "added"
    lib.close()
    opened: list[Library] = []

    class _Library(Library):  # the README opens its own Library: share the loaded model and close it afterwards
        def __init__(self, settings, **kw):
            super().__init__(settings, embedder=embedder)
            opened.append(self)

    monkeypatch.setattr(rag_core.service.library, "Library", _Library)
    recorder = PromptRecorder()
    reply = "Worker bees make honey from nectar [1]."
    monkeypatch.setattr("langchain_ollama.ChatOllama",
                        lambda **kw: FakeListChatModel(responses=[reply], callbacks=[recorder]))
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use DocChat from LangChain", 1)[1].split("\n## ", 1)[0]
    [block] = python_blocks(section)
    assert len([line for line in block.splitlines() if line.strip()]) <= 12  # a short example, as promised
    try:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})  # the README's example
    finally:
        for lib in opened:
            lib.close()
    assert capsys.readouterr().out.strip() == reply
    assert "[1] Honey bees: " in recorder.prompts[-1] and "What do worker bees make from nectar?" in recorder.prompts[-1]


def test_retriever_is_scoped_and_citable(library, three):
    bees, volcano, pump = three

    def ids(**scope) -> list[str]:
        return [d.metadata["doc_id"] for d in DocChatRetriever(store=library.store, **scope).invoke(Q_BEES)]

    assert bees in ids() and ids()[0] == bees
    assert ids(doc_ids=[volcano, pump]) and set(ids(doc_ids=[volcano, pump])) <= {volcano, pump}
    assert ids(doc_ids=[]) == []
    assert ids(owners=["bob", None]) and bees not in ids(owners=["bob", None])
    assert set(ids(owners=["alice"])) == {bees}
    assert len(ids(k=1)) == 1

    top = DocChatRetriever(store=library.store, k=3).invoke(Q_BEES)
    assert [d.metadata["score"] for d in top] == sorted((d.metadata["score"] for d in top), reverse=True)
    d = top[0]
    assert set(d.metadata) >= CITATION_KEYS
    assert d.metadata["title"] == "Honey bees" and d.metadata["section"] == "Honey bees › Hive life"
    assert d.metadata["heading_path"] == ["Honey bees", "Hive life"] and d.metadata["page"] is None
    chunk = document_to_chunk(d)  # retrieved Documents convert back to DocChat chunks
    assert chunk.doc_id == bees and d.id == chunk.point_id and "turn the nectar into honey" in d.page_content
    assert d.metadata["char_end"] - d.metadata["char_start"] == len(d.page_content)

    with pytest.raises(ValueError, match="unknown retrieval method"):
        DocChatRetriever(store=library.store, method="bm42")


def test_vector_store_add_search_delete_round_trip(library, three):
    bees, volcano, pump = three
    alice = DocChatVectorStore(library.store, owner="alice", owners=["alice"])
    before = library.store.count_chunks()
    ids = alice.add_texts(
        ["Replace the filter cartridge of the AquaPure 300 every six months.", "# Sourdough\n\nFeed the starter daily."],
        metadatas=[{"title": "Filter notes", "url": "https://example.org/filter", "license": "CC0", "colour": "red"},
                   {"source": "notes/bread.md"}])
    assert len(ids) == 2 and library.store.count_chunks() == before + 2
    assert alice.add_texts(["Replace the filter cartridge of the AquaPure 300 every six months."],
                           metadatas=[{"title": "Filter notes"}]) == ids[:1]  # deterministic: nothing added again
    assert library.store.count_chunks() == before + 2
    listed = {d.doc_id: d for d in library.documents(owners=["alice"])}
    assert set(ids) <= set(listed) and listed[ids[1]].title == "Sourdough" and listed[ids[1]].kind == "md"
    assert listed[ids[0]].owner == "alice"

    hits = alice.similarity_search_with_score("How often is the AquaPure filter cartridge replaced?", k=2)
    doc, score = hits[0]
    assert doc.metadata["doc_id"] == ids[0] and isinstance(score, float) and doc.metadata["score"] == score
    assert (doc.metadata["title"], doc.metadata["url"], doc.metadata["license"]) == (
        "Filter notes", "https://example.org/filter", "CC0")
    assert "colour" not in doc.metadata
    assert {d.metadata["doc_id"] for d in alice.similarity_search(Q_BEES, k=5)} <= {bees, *ids}  # alice's only
    assert [d.metadata["doc_id"] for d in alice.similarity_search(Q_BEES, k=5, doc_ids=[ids[1]])] == [ids[1]]
    assert alice.as_retriever(search_kwargs={"k": 1}).invoke("filter cartridge")[0].metadata["doc_id"] == ids[0]
    vec = library.embedder.embed_query("filter cartridge")
    assert alice.similarity_search_by_vector(vec, k=1)[0].metadata["doc_id"] == ids[0]
    with pytest.raises(TypeError, match="filter"):
        alice.similarity_search("x", filter={"a": 1})

    # add_documents with explicit ids, shared library (owner None).
    shared = DocChatVectorStore(library.store)
    assert shared.add_documents([Document(page_content="Tea grows on the slopes of Darjeeling.", id="tea-1")]) == [
        "tea-1"]
    assert library.store.get("tea-1").owner is None and library.store.get("tea-1").title.startswith("Tea grows")

    # Relevance scores: only by cosine ("vector"), mapped into 0..1.
    with pytest.raises(NotImplementedError, match="method='vector'"):
        alice.similarity_search_with_relevance_scores("filter", k=1)
    cosine = DocChatVectorStore(library.store, owners=["alice"], method="vector")
    rel = cosine.similarity_search_with_relevance_scores("filter cartridge replacement", k=2)
    assert rel and all(0.0 <= r <= 1.0 for _, r in rel) and rel[0][0].metadata["doc_id"] == ids[0]
    thresholded = cosine.as_retriever(search_type="similarity_score_threshold",
                                      search_kwargs={"score_threshold": 0.99, "k": 2})
    assert thresholded.invoke("filter cartridge replacement") == []

    # Delete: scoped to the store's owners; True only when every id existed.
    bob = DocChatVectorStore(library.store, owners=["bob"])
    assert bob.delete([ids[0]]) is False and library.store.get(ids[0]) is not None
    assert alice.delete(ids) is True
    assert library.store.get(ids[0]) is None and library.store.count_chunks() == before + 1  # tea stays
    assert not {d.metadata["doc_id"] for d in alice.similarity_search("filter cartridge", k=5)} & set(ids)
    assert alice.delete(ids) is False
    with pytest.raises(ValueError, match="ids"):
        alice.delete()


class NotAnEmbedder:
    """Stands in for a foreign LangChain Embeddings: from_texts refuses it before touching the store."""


def test_vector_store_from_texts(library):
    vs = DocChatVectorStore.from_texts(["Kiwi birds cannot fly and live in New Zealand."], library.embedder,
                                       [{"title": "Kiwi"}], store=library.store, owner="carol", owners=["carol"])
    assert vs.embeddings is library.embedder and vs.owner == "carol"
    assert vs.similarity_search("flightless bird", k=1)[0].metadata["title"] == "Kiwi"
    with pytest.raises(TypeError, match="Embedder"):
        DocChatVectorStore.from_texts(["x"], NotAnEmbedder(), store=library.store)


def test_store_writes_and_reads_langchain_documents(settings, embedder):
    """What the store writes is chunk_to_document's Document in langchain-qdrant's layout (plus DocChat's completeness
    status), which it reads back; on a Qdrant server, langchain-qdrant's own QdrantVectorStore reads it too."""
    from langchain_qdrant import QdrantVectorStore, RetrievalMode
    from store_helpers import open_library

    from rag_core.store.vector_store import DENSE, LEXICAL

    library = open_library("server", settings, embedder)
    try:
        r = library.ingest_bytes(BEES.encode(), "bees.md", owner="alice")
        points = [p for batch in library.store.backend.points(with_vectors=False) for p in batch]
        assert len(points) == r.chunks
        for p in points:
            payload = {**p.payload, "metadata": {k: v for k, v in p.payload["metadata"].items() if k != "status"}}
            assert p.payload["metadata"]["status"] == "complete"
            chunk = document_to_chunk(Document(page_content=payload["page_content"], metadata=payload["metadata"]))
            doc = chunk_to_document(chunk, "alice")
            assert doc.id == str(p.id) and document_payload(doc) == payload  # written exactly as chunk_to_document
            assert document_to_chunk(doc) == chunk and doc.metadata["owner"] == "alice"

        lc_store = QdrantVectorStore(client=library.store.backend.client, collection_name=library.store.collection,
                                     embedding=library.embedder, retrieval_mode=RetrievalMode.HYBRID,
                                     vector_name=DENSE, sparse_embedding=library.store.lexical,
                                     sparse_vector_name=LEXICAL)
        found = lc_store.similarity_search(Q_BEES, k=1)
        assert found and found[0].metadata["title"] == "Honey bees" and found[0].metadata["owner"] == "alice"
        mine = DocChatRetriever(store=library.store, k=1).invoke(Q_BEES)[0]
        assert document_to_chunk(found[0]) == document_to_chunk(mine)
    finally:
        library.close()
