"""Why a passage was chosen (Passage.match): the match kind, level and scores that retrieval sets for every method,
through real Qdrant on both backends and the real embedding model; kept through merges and saved conversations; the
workspace's retrieval test, scoped to its owner in the demo."""
from __future__ import annotations

import json

import pytest
from store_helpers import BACKENDS, open_library

from rag_core.core.config import Settings
from rag_core.core.errors import LimitReached
from rag_core.core.models import Document, MatchKind, MatchLevel, Section, SourceMeta
from rag_core.demo.hub import DemoHub, new_session_id
from rag_core.demo.workspace import DemoWorkspace
from rag_core.retrieve.search import METHODS, retrieve, retrieve_scored
from rag_core.service.conversation_data import answer_from_dict, answer_to_dict
from rag_core.service.jobs import IngestQueue
from rag_core.service.workspace import TEST_EMPTY_LIBRARY, TEST_NO_QUESTION, LocalWorkspace

pytestmark = pytest.mark.remembered_vectors  # the same texts are embedded again and again: each vector computed once

TOPICS = {
    "bees": ("Honey bees", "Honey bees live in colonies ruled by a single queen. Worker bees collect nectar and pollen "
             "from flowers and turn the nectar into honey inside the hive. Drones exist only to mate with the queen."),
    "volcano": ("Volcanoes", "A volcano is a rupture in the crust of a planet through which lava, ash and gases "
                "escape. Stratovolcanoes such as Mount Fuji are built from many layers of hardened lava."),
    "pump": ("Pump manual", "Maintenance of the XQ-7731 centrifugal pump: replace the impeller seal every 2,000 "
             "operating hours and check the bearing temperature monthly. Never run the pump dry."),
}
RARE_WORDS = "How often is the impeller seal of the XQ-7731 replaced?"  # only the pump manual has these words
PARAPHRASE = "What comes out of a mountain that erupts?"  # the volcano passage, with none of its words


def _doc(key: str) -> Document:
    title, text = TOPICS[key]
    return Document(doc_id=f"doc-{key}", text=text, sections=(Section((), 0, len(text)),),
                    source=SourceMeta(file_name=f"{key}.txt", title=title, kind="txt", sha256=key))


@pytest.fixture(scope="module", params=BACKENDS)
def topical(request, tmp_path_factory, embedder):
    """One library per backend with three short documents on unrelated topics (read-only tests)."""
    lib = open_library(request.param, Settings(data_dir=tmp_path_factory.mktemp("match")), embedder)
    for key in TOPICS:
        assert lib.ingest_document(_doc(key)).status == "added"
    yield lib
    lib.close()


def test_shared_rare_words_make_a_words_or_both_match(topical):
    [top, *rest] = retrieve(topical.store, RARE_WORDS, k=3)
    assert top.chunk.doc_id == "doc-pump"
    assert top.match is not None and top.match.kind in (MatchKind.WORDS, MatchKind.BOTH)
    assert {"impeller", "seal", "XQ", "7731", "replaced"} <= set(top.match.words)  # as the question writes them
    assert "How" not in top.match.words and "the" not in top.match.words  # stop words never count as "your words"
    assert top.match.lexical is not None and top.match.lexical > 0  # the search by words listed it
    # The two unrelated documents share only stop words with the question: found by meaning, and far from it.
    assert [p.match.kind for p in rest] == [MatchKind.MEANING, MatchKind.MEANING]
    assert all(p.match.weak and p.match.level == MatchLevel.LOW for p in rest)


def test_a_paraphrase_without_shared_words_is_a_meaning_match(topical):
    top = retrieve(topical.store, PARAPHRASE, k=3)[0]
    assert top.chunk.doc_id == "doc-volcano"
    assert top.match is not None and top.match.kind == MatchKind.MEANING and top.match.words == ()
    assert not top.match.weak and top.match.cosine is not None and top.match.cosine > 0.4


@pytest.mark.parametrize("method", METHODS)
def test_every_method_explains_every_passage_with_the_same_cosines(topical, method):
    vector = {p.chunk.doc_id: p.match.cosine for p in retrieve(topical.store, RARE_WORDS, k=3, method="vector")}
    found = retrieve_scored(topical.store, RARE_WORDS, k=3, method=method)
    assert found.passages and all(p.match is not None for p in found.passages)
    for p in found.passages:  # the lexical and fused lists carry no cosine: it is fetched for the chosen chunks
        assert p.match.cosine == pytest.approx(vector[p.chunk.doc_id], abs=1e-4)
    top = found.passages[0]
    assert top.chunk.doc_id == "doc-pump" and top.match.kind in (MatchKind.WORDS, MatchKind.BOTH)
    listed = method in ("lexical", "zscore", "rerank")  # the methods whose own lexical list gives the BM25 score
    assert (top.match.lexical is not None) == listed


def test_the_match_is_kept_in_a_saved_conversation_and_old_ones_still_load(topical):
    from rag_core.core.models import Answer, AnswerMode

    passages = tuple(retrieve(topical.store, RARE_WORDS, k=2))
    saved = json.loads(json.dumps(answer_to_dict(Answer("Every 2,000 hours.", AnswerMode.QUOTES, passages=passages))))
    back = answer_from_dict(saved)
    assert back.passages == passages and back.passages[0].match.kind in (MatchKind.WORDS, MatchKind.BOTH)
    for p in saved["passages"]:  # an answer saved before passages had a match
        del p["match"]
    old = answer_from_dict(saved)
    assert [p.match for p in old.passages] == [None, None] and old.passages[0].chunk == passages[0].chunk
    saved["passages"][0]["match"] = {"kind": "telepathy", "level": "high"}  # a damaged one loses only the reason
    assert answer_from_dict(saved).passages[0].match is None


def test_local_retrieval_test_ranks_passages_and_answers_empty_cases(topical, tmp_path):
    queue = IngestQueue(topical)
    try:
        ws = LocalWorkspace(topical, queue)
        test = ws.test_retrieval(f"  {RARE_WORDS}\n")
        assert test.message is None and test.question == RARE_WORDS
        assert len(test.passages) == 3  # the top 5 (DOCCHAT_TOP_K) of a library of three one-passage documents
        assert test.passages[0].chunk.doc_id == "doc-pump" and test.passages[0].match is not None
        assert [p.score for p in test.passages] == sorted((p.score for p in test.passages), reverse=True)
        assert (test.low_below, test.high_from) == (ws.settings.retrieval.min_relevance, 0.5)
        assert ws.test_retrieval("   ").message == TEST_NO_QUESTION
    finally:
        queue.close()


def test_the_demo_retrieval_test_sees_only_its_own_documents(library, embedder):
    settings = library.settings.with_overrides(mode="demo", demo_questions_per_minute=2)
    hub = DemoHub(library, settings)
    queue = IngestQueue(library)
    try:
        mine, theirs = hub.session(new_session_id()), hub.session(new_session_id())
        mine.ingest_bytes(TOPICS["pump"][1].encode(), "pump.txt")
        ws, other = DemoWorkspace(mine, queue), DemoWorkspace(theirs, queue)
        assert [p.chunk.source.file_name for p in ws.test_retrieval(RARE_WORDS).passages] == ["pump.txt"]
        assert other.test_retrieval(RARE_WORDS).message == TEST_EMPTY_LIBRARY  # another visitor's file is not theirs
        ws.test_retrieval(PARAPHRASE)
        with pytest.raises(LimitReached):  # a test counts against the demo's question limits, like a question
            ws.test_retrieval(PARAPHRASE)
        assert ws.test_retrieval("").message == TEST_NO_QUESTION  # nothing searched, nothing counted
    finally:
        queue.close()
