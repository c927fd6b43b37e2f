"""The rerank server as DocChat's reranker (rag_core/retrieve/reranker_endpoint.py, reranker.py, search.py).

The server here is SCRIPTED: no reranker GGUF ships in any package this project can install, so a real
`llama-server --reranking` cannot be started in a test. Looked for in the env package lists
(`grep -i rerank /work/.library/env/packages/pypi.tsv`, and "gguf", "cross-encoder", "ms-marco" in the same list):
a package that ships a reranker GGUF, or an ONNX / safetensors cross-encoder; there is none (flashrank downloads its
ONNX files from a hub at run time, small-hybrid-reranker bundles a LightGBM model over static embeddings, the others
are API clients, servers without weights, or code that downloads them). The scripted server speaks both wire shapes:
the standard `POST /v1/rerank` {"model", "query", "documents", "top_n"} -> {"results": [{"index",
"relevance_score"}]} (llama.cpp, Infinity, vLLM) and TEI's `POST /rerank` {"query", "texts"} -> [{"index", "score"}].
"""
from __future__ import annotations

import time
from typing import Any

import pytest
from protocol_server import JSONHandler, ThreadedServer
from store_helpers import open_library

from rag_core.answer import generation as gen
from rag_core.core.config import Settings
from rag_core.core.models import Document, Section, SourceMeta
from rag_core.retrieve import reranker
from rag_core.retrieve.search import retrieve_scored

QUESTION = "Where do honey bees live?"
TEXTS = ["Honey bees live in hives.", "Bees make honey.", "A volcano erupts.", "Tea grows on hills."]


class RerankServer(ThreadedServer):
    """A scripted rerank server: `mode` is "standard", "tei", "slow", "error" or a malformed body to send; the
    scores reverse the order the passages came in (the last one is the most relevant)."""

    thread_name = "rerank-test-server"

    def __init__(self) -> None:
        super().__init__()
        self.mode: Any = "standard"
        self.requests: list[tuple[str, Any]] = []


class _Handler(JSONHandler):
    owner: RerankServer

    def do_POST(self) -> None:  # http.server naming
        body, mode = self._read_body(), self.owner.mode
        self.owner.requests.append((self.path, body))
        if mode == "slow":
            time.sleep(2)
        if mode == "error":
            return self._send_json(500, {"error": {"message": "model crashed"}})
        if mode == "tei":
            if self.path != "/rerank":
                return self._send_json(404, {"error": "Not Found"})
            if "texts" not in body:
                return self._send_json(422, {"error": "missing field `texts`", "error_type": "Validation"})
            return self._send_json(200, [{"index": i, "score": float(i)} for i in reversed(range(len(body["texts"])))])
        if mode not in ("standard", "slow"):
            return self._send_json(200, mode) if not isinstance(mode, bytes) else self._send_bytes(200, mode, "text/plain")
        if self.path != "/v1/rerank":
            return self._send_json(404, {"error": "Not Found"})
        docs = body["documents"]
        return self._send_json(200, {"model": body.get("model"), "object": "list", "results": [
            {"index": i, "relevance_score": i / len(docs)} for i in reversed(range(len(docs)))]})


RerankServer.handler = _Handler


@pytest.fixture(scope="module")
def server():
    with RerankServer() as srv:
        yield srv


@pytest.fixture
def scripted(server):
    server.mode, server.requests[:] = "standard", []
    return server


def _settings(url: str, **kw: Any) -> Settings:
    return Settings(reranker=url, **{"rerank_timeout_s": 5, **kw})


def test_off_by_default_nothing_is_asked(scripted):
    out = reranker.reorder(Settings(), QUESTION, TEXTS)  # DOCCHAT_RERANKER unset: the search's order, no notice
    assert out is reranker.UNCHANGED and out.apply(TEXTS) is TEXTS and not scripted.requests


def test_a_rerank_server_reorders_the_candidates(scripted):
    out = reranker.reorder(_settings(scripted.url, rerank_model="bge-reranker-v2-m3"), QUESTION, TEXTS)
    assert out.notice is None and out.order == (3, 2, 1, 0)
    path, body = scripted.requests[-1]
    assert path == "/v1/rerank"
    assert body == {"model": "bge-reranker-v2-m3", "query": QUESTION, "documents": TEXTS, "top_n": 4}


def test_a_slow_server_falls_back_within_the_deadline(scripted):
    scripted.mode = "slow"
    started = time.monotonic()
    out = reranker.reorder(_settings(scripted.url, rerank_timeout_s=0.3), QUESTION, TEXTS)
    assert time.monotonic() - started < 1.5  # the server takes 2 s
    assert out.order == ()
    assert out.notice == "The reranker took longer than 0.3 seconds, so the passages are in search order."
    # the budget is also bounded by the answer's own deadline: a quarter of DOCCHAT_LLM_TIMEOUT
    out = reranker.reorder(_settings(scripted.url, rerank_timeout_s=60, llm_timeout_s=1), QUESTION, TEXTS)
    assert out.notice == "The reranker took longer than 0.25 seconds, so the passages are in search order."


def test_a_server_error_falls_back_with_one_sentence(scripted):
    scripted.mode = "error"
    out = reranker.reorder(_settings(scripted.url), QUESTION, TEXTS)
    assert out.order == ()
    assert out.notice == ("The reranker could not be used (its server answered HTTP 500), so the passages are in "
                          "search order.")


@pytest.mark.parametrize("body", [
    {"results": [{"index": 0}]},  # no score
    {"results": [{"index": i, "relevance_score": 1.0} for i in (0, 0, 1, 2)]},  # an index twice
    {"results": [{"index": i, "relevance_score": 1.0} for i in range(3)]},  # a passage left out
    {"results": [{"index": 9, "relevance_score": 1.0}]},  # an index out of range
    {"results": [{"index": i, "relevance_score": "high"} for i in range(4)]},  # a score that is not a number
    {"object": "error"},  # no results
    b"<html>not json</html>",
])
def test_a_malformed_answer_falls_back(scripted, body):
    scripted.mode = body
    out = reranker.reorder(_settings(scripted.url), QUESTION, TEXTS)
    assert out.order == ()
    assert out.notice == ("The reranker could not be used (its answer was not a list of scores), so the passages "
                          "are in search order.")


def test_a_tei_server_is_asked_in_its_own_shape(scripted):
    scripted.mode = "tei"
    settings = _settings(scripted.url + "/")
    assert reranker.reorder(settings, QUESTION, TEXTS).order == (3, 2, 1, 0)
    assert [p for p, _ in scripted.requests] == ["/v1/rerank", "/rerank"]
    assert scripted.requests[-1][1] == {"query": QUESTION, "texts": TEXTS, "truncate": True}
    scripted.requests.clear()
    assert reranker.reorder(settings, QUESTION, TEXTS).order == (3, 2, 1, 0)
    assert [p for p, _ in scripted.requests] == ["/rerank"]  # the shape that worked is remembered


def test_a_full_endpoint_address_is_used_as_given(scripted):
    out = reranker.reorder(_settings(scripted.url + "/v1/rerank"), QUESTION, TEXTS)
    assert out.order == (3, 2, 1, 0) and [p for p, _ in scripted.requests] == ["/v1/rerank"]


def test_an_unreachable_server_falls_back():
    with RerankServer() as gone:
        url = gone.url
    out = reranker.reorder(_settings(url), QUESTION, TEXTS)
    assert out.order == () and out.notice == (f"The reranker could not be used (its server at {url} could not be "
                                              f"reached), so the passages are in search order.")


# -- through retrieval and the answer -------------------------------------------------------------------------------
TOPICS = {
    "bees": ("Honey bees", "Honey bees live in hives ruled by a single queen. Worker bees collect nectar from flowers "
             "and turn it into honey inside the hive."),
    "wasps": ("Wasps", "Wasps build paper nests and hunt other insects. Unlike honey bees they make no honey."),
    "volcano": ("Volcanoes", "A volcano is a rupture in the crust through which lava, ash and gases escape."),
}


@pytest.fixture(scope="module")
def library(server, tmp_path_factory, embedder):
    lib = open_library("edge", _settings(server.url, data_dir=tmp_path_factory.mktemp("rerank"), ollama_model=""),
                       embedder)
    for key, (title, text) in TOPICS.items():
        doc = Document(doc_id=f"doc-{key}", text=text, sections=(Section((), 0, len(text)),),
                       source=SourceMeta(file_name=f"{key}.txt", title=title, kind="txt", sha256=key))
        assert lib.ingest_document(doc).status == "added"
    yield lib
    lib.close()


@pytest.mark.slow  # a library with the real embedding model, and two answers
def test_retrieval_reranks_the_fused_candidates_and_marks_them(scripted, library):
    fused = retrieve_scored(library.store, QUESTION, k=3, model_rerank=False)
    assert fused.notice is None and not any(p.match.reranked for p in fused.passages)
    found = retrieve_scored(library.store, QUESTION, k=3)
    assert [p.chunk.doc_id for p in found.passages] == [p.chunk.doc_id for p in reversed(fused.passages)]
    assert all(p.match.reranked for p in found.passages) and found.notice is None
    assert found.relevance == fused.relevance  # the honesty check's cosine is the search's, not the reranker's
    assert scripted.requests[-1][1]["documents"] == [p.chunk.text for p in fused.passages]


@pytest.mark.slow  # a library with the real embedding model, and two answers
def test_a_failing_reranker_keeps_the_fused_order_and_the_reply_says_so(scripted, library):
    fused = retrieve_scored(library.store, QUESTION, k=3, model_rerank=False)
    scripted.mode = "error"
    found = retrieve_scored(library.store, QUESTION, k=3)
    assert found.passages == fused.passages and found.notice == reranker.NOTICE_FAILED.format(
        why="its server answered HTTP 500")
    ans = gen.answer(library, QUESTION, library.settings, use_llm=False)
    assert ans.passages and not any(p.match.reranked for p in ans.passages)
    assert ans.notice is not None and ans.notice.endswith(found.notice)
    scripted.mode = "standard"
    ans = gen.answer(library, QUESTION, library.settings, use_llm=False)
    assert ans.passages[0].match.reranked and found.notice not in (ans.notice or "")
