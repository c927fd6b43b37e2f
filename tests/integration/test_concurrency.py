"""Eight demo sessions at once, as Streamlit runs them (one thread per session), against ONE embedded Qdrant store:
each ingests two different files and asks questions while the others are still ingesting. Real model, real Qdrant
local mode, real files; Ollama is the scripted server in tests/ollama_server.py (remote mode, with an API key).

How the embedded client is made safe: qdrant-client's local mode is not thread-safe, so rag_core.store.vector_store.Store makes
every client call under one RLock (registry writes, upserts, deletes, queries); the slow parts (embedding, chunking,
loading) run outside that lock, so sessions overlap everywhere except inside Qdrant itself."""
from __future__ import annotations

import threading
import traceback
from pathlib import Path

import pytest
from ollama_server import OllamaServer, Reply

from rag_core.core.config import Settings
from rag_core.demo.hub import SHARED_OWNER, DemoHub, new_session_id
from rag_core.service.library import Library

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
FILES = ["docx_headings_toc.docx", "docx_paragraphs-and-tables.docx", "docx_table_merged-cells.docx",
         "docx_headings-lists-tables-images.docx", "pdf_text_4-pages_pdflatex.pdf", "pdf_text_multicolumn_3-pages.pdf",
         "pdf_text_outline-bookmarks_4-pages.pdf", "pdf_non-latin_arabic.pdf"]
SESSIONS = len(FILES)
MODEL = "llama3.2:3b"
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "glacier", "harbor"]


def secret_note(i: int) -> bytes:
    """A file only session i has: its vault code, in words no other file contains."""
    return (f"Vault note for the {WORDS[i]} team. The vault code of the {WORDS[i]} team is {4000 + i * 37}. "
            f"The {WORDS[i]} team keeps its spare keys in locker {i + 10}.").encode()


@pytest.mark.slow
def test_eight_sessions_ingest_and_ask_at_the_same_time(tmp_path, embedder):
    with OllamaServer(models=[MODEL], default=Reply("From the sources [1].")) as srv:
        settings = Settings(data_dir=tmp_path / "data", mode="demo", ollama_host=srv.url, ollama_model=MODEL,
                            ollama_api_key="k", demo_questions_per_minute=100, llm_timeout_s=30,
                            demo_client_questions_per_minute=100)  # 8 visitors, one (unknown) address
        lib = Library(settings, embedder=embedder)
        try:
            hub = DemoHub(lib)
            samples = hub.load_samples()
            assert all(r.status == "added" for r in samples)
            shared_ids = {d.doc_id for d in hub.shared_documents()}
            sessions = [hub.session(new_session_id()) for _ in range(SESSIONS)]
            start = threading.Barrier(SESSIONS)
            errors: list[str] = []
            added: dict[int, set[str]] = {i: set() for i in range(SESSIONS)}
            seen: dict[int, set[str]] = {i: set() for i in range(SESSIONS)}
            answers: dict[int, list] = {i: [] for i in range(SESSIONS)}

            def run(i: int) -> None:
                s = sessions[i]
                try:
                    start.wait(timeout=60)
                    answers[i].append(s.answer("Which is better, beautiful or ugly?"))  # while others ingest
                    for data, name in ((DOCS / FILES[i]).read_bytes(), FILES[i]), (secret_note(i), f"vault-{i}.txt"):
                        r = s.ingest_bytes(data, name)
                        if r.status != "added":
                            errors.append(f"session {i}: {name}: {r.status} {r.error}")
                        else:
                            added[i].add(r.doc_id)
                    for j in (i, (i + 1) % SESSIONS, (i + 3) % SESSIONS):  # own code, then two other teams' codes
                        q = f"What is the vault code of the {WORDS[j]} team?"
                        answers[i].append(s.answer(q))
                        seen[i] |= {p.chunk.doc_id for p in s.search(q, k=8)}
                    seen[i] |= {d.doc_id for d in s.documents()}
                except Exception:  # noqa: BLE001 - collected and asserted below
                    errors.append(f"session {i}:\n{traceback.format_exc()}")

            threads = [threading.Thread(target=run, args=(i,), name=f"session-{i}") for i in range(SESSIONS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=600)
            assert not any(t.is_alive() for t in threads), "a session hung"
            assert errors == []

            # every document is present afterwards, complete and owned by the right session
            listing = {d.doc_id: d for d in lib.documents()}
            for i, s in enumerate(sessions):
                assert len(added[i]) == 2
                for doc_id in added[i]:
                    assert listing[doc_id].owner == s.session_id and listing[doc_id].chunks > 0
                assert {d.doc_id for d in s.my_documents()} == added[i]
            assert len(listing) == 2 * SESSIONS + len(shared_ids)
            assert lib.store.count_chunks() == sum(d.chunks for d in listing.values())

            # zero cross-session results: every listed, searched, retrieved or cited document is own or shared
            for i in range(SESSIONS):
                allowed = added[i] | shared_ids
                assert seen[i] <= allowed, f"session {i} saw {seen[i] - allowed}"
                for ans in answers[i]:
                    assert {p.chunk.doc_id for p in ans.passages} <= allowed
                    assert {c.passage.chunk.doc_id for c in ans.citations} <= allowed
                    assert ans.mode == "model", ans.notice
                own_code = str(4000 + i * 37)
                assert own_code in " ".join(p.chunk.text for p in answers[i][1].passages)
                for j in ((i + 1) % SESSIONS, (i + 3) % SESSIONS):
                    assert str(4000 + j * 37) not in " ".join(p.chunk.text for a in answers[i] for p in a.passages)
            owners = {d.owner for d in listing.values()}
            assert owners == {s.session_id for s in sessions} | {SHARED_OWNER}
            chats = [r for r in srv.requests if r.path == "/api/chat"]
            assert len(chats) == 4 * SESSIONS
            assert all(r.headers.get("authorization") == "Bearer k" for r in chats)
        finally:
            lib.close()


def test_counting_tokens_leaves_the_embedding_tokenizer_alone(embedder):
    """Chunking (count_tokens / token_offsets / token_ids) in one session must not reconfigure the tokenizer that
    another session's encode() is using at that moment: before the fix it switched padding and truncation off in
    mid-encode and the query failed with "Unable to create tensor" (reproduced with 2 chunking + 2 embedding threads)."""
    backend = embedder.tokenizer  # the Rust tokenizer encode() uses: it cuts and pads, configured once at load
    before = (backend.padding, backend.truncation)
    assert before[0] is not None and before[1]["max_length"] == embedder.max_seq_length
    assert embedder.count_tokens(["some words", "a few more words here"]) == [2, 5]
    assert embedder.token_offsets("as well") == [(0, 2), (3, 7)]
    assert embedder.token_ids(["ids too"])
    assert embedder.count_tokens(["word " * 400]) == [400]  # counting is not cut
    assert (backend.padding, backend.truncation) == before
