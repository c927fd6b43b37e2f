"""Questions about whole documents (issue 26): the summary quoted without a model covers every quarter of the
document and most of its sections, each quote cited to the stored passage it comes from and verified; with a model
(the scripted Ollama-compatible server) the document is read part by part within a bounded number of calls, each
stage reported, Stop keeping what was read; a comparison cites both documents; `docchat summarize` and the MCP tool
`summarize` give the same answer. Real fixture files, the real embedding model and the embedded Qdrant Edge; the
117-page PDF gets word-count vectors instead (embedding its 352 passages would take a minute: the digest only reads
stored vectors, so its time and coverage do not depend on which model made them)."""
from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ollama_server import OllamaServer, Reply

from rag_core.answer.generation import start_answer
from rag_core.answer.summaries import Shape
from rag_core.answer.summaries.start import start_summary
from rag_core.core.config import Settings
from rag_core.core.models import Answer, AnswerMode, Chunk, CitationStatus, Step
from rag_core.service.library import Library
from rag_core.service.live import LiveAnswer

pytestmark = pytest.mark.remembered_vectors

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
LONG_PDF = DOCS / "pdf_text_long_117-pages_german.pdf"
MODEL = "llama3.2:3b"
TOPICS = ["harbour", "orchard", "glacier", "library", "railway", "vineyard", "observatory", "bakery", "lighthouse",
          "museum", "quarry", "monastery", "brewery", "aqueduct", "windmill", "greenhouse", "shipyard", "tramway",
          "theatre", "beehive", "fortress", "canal"]
VERBS = ["was rebuilt", "was measured", "was opened", "was repaired", "was visited", "was mapped"]


def report(title: str, topics: list[str], shared: tuple[str, ...] = ()) -> str:
    """A Markdown report with one section per topic, each a paragraph of plain sentences about it."""
    lines = [f"# {title}", "", f"This report describes {len(topics)} places in the valley and what was done there "
             "during the last ten years.", ""]
    for k, topic in enumerate(topics):
        lines += [f"## The {topic}", ""]
        body = [f"The {topic} {VERBS[(k + j) % len(VERBS)]} in {1990 + 3 * k + j} by a team of {4 + j} people."
                for j in range(4)]
        body.insert(2, f"Visitors say the {topic} is the quietest part of the valley in winter.")
        if k < len(shared):  # a topic the other report shares: in one section of each
            word = shared[k]
            body += [f"The {word} for the {topic} was the main question this year.",
                     f"Everyone agreed that the {word} needed a second look.",
                     f"A new {word} plan will be written before the spring."]
        lines += [" ".join(body), ""]
    return "\n".join(lines)


class WordVectors:
    """The real model's tokenizer for splitting, word-count vectors (hashed, unit length) for the passages."""

    name, dim = "hashed-word-counts", 256

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def encode(self, texts: list[str], background: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"\w{3,}", text.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("reports")
    made = {"report12.md": report("Valley report", TOPICS[:12]),
            "report20.md": report("Twenty places report", TOPICS[:20]),
            "plans_a.md": report("Harbour plans", TOPICS[:8], shared=("budget", "volunteers")),
            "plans_b.md": report("Canal plans", TOPICS[12:20], shared=("volunteers", "budget"))}
    for name, text in made.items():
        (folder / name).write_text(text, encoding="utf-8")
    return {**{n: folder / n for n in made}, "eu_capitals.md": DOCS / "eu_capitals.md",
            "odt": DOCS / "odt_headings-lists-table-footnote.odt", "rtf": DOCS / "rtf_plain_no-headings.rtf"}


@pytest.fixture(scope="module")
def library(tmp_path_factory, embedder, files):
    """One library with the generated reports and a few fixtures (real vectors), shared by this module's tests."""
    lib = Library(Settings(data_dir=tmp_path_factory.mktemp("summaries") / "data", ollama_model=""),
                  embedder=embedder)
    ids = {}
    for key, path in files.items():
        result = lib.ingest_path(path)
        assert result.status == "added", result
        ids[key] = result.doc_id
    lib.ids = ids  # type: ignore[attr-defined]
    yield lib
    lib.close()


@pytest.fixture(scope="module")
def long_pdf(tmp_path_factory, embedder):
    lib = Library(Settings(data_dir=tmp_path_factory.mktemp("long") / "data", ollama_model=""),
                  embedder=WordVectors(embedder))
    result = lib.ingest_path(LONG_PDF)
    assert result.status == "added" and result.chunks > 300, result
    yield lib, result.doc_id
    lib.close()


def run(stream: Any) -> Answer:
    for _ in stream:
        pass
    assert stream.answer is not None
    return stream.answer


def stored(lib: Library, doc_id: str) -> list[Chunk]:
    return [c for c, _ in lib.store.document_chunks(doc_id)]


def check_cited(lib: Library, answer: Answer, doc_ids: set[str]) -> None:
    """Every citation is a real stored passage of these documents, every cited sentence of the answer is verified
    (or, written by a model, verified or marked), and every quote is in its passage word for word."""
    chunks = {(c.doc_id, c.index): c for d in doc_ids for c in stored(lib, d)}
    assert answer.citations
    for c in answer.citations:
        assert chunks[(c.passage.chunk.doc_id, c.passage.chunk.index)] == c.passage.chunk
        assert answer.passages[c.n - 1] == c.passage
    cited = [s for s in answer.sentences if s.cited]
    assert cited
    if answer.mode == AnswerMode.QUOTES:
        assert all(s.status == CitationStatus.VERIFIED for s in cited), answer.sentences
        for line in answer.text.splitlines():
            m = re.fullmatch(r"- “(.*)” \[(\d+)\]", line)
            if m:
                assert m.group(1) in " ".join(answer.passages[int(m.group(2)) - 1].chunk.text.split())
    else:  # (a line that states nothing, "## [1]", has nothing to check)
        marked = set(answer.unbacked())
        assert all(s.status in (CitationStatus.VERIFIED, CitationStatus.NO_CLAIM) or s in marked for s in cited)


def cited_spans(answer: Answer) -> list[tuple[Chunk, int, int]]:
    """Where in its passage each cited claim is: a quote's own place, else its citation's evidence span."""
    out = []
    for line in answer.text.splitlines():
        m = re.fullmatch(r"- “(.*)” \[(\d+)\]", line)
        if m:
            chunk = answer.passages[int(m.group(2)) - 1].chunk
            found = re.search(r"\s+".join(map(re.escape, m.group(1).split())), chunk.text)
            assert found, line
            out.append((chunk, *found.span()))
    if not out:
        out = [(c.passage.chunk, c.evidence_start or 0, c.evidence_end or len(c.passage.chunk.text))
               for c in answer.citations]
    return out


def coverage(lib: Library, answer: Answer, doc_id: str) -> tuple[float, float, int]:
    """(share of the document's quarters, share of its sections) holding a cited claim; how many sections."""
    chunks = stored(lib, doc_id)
    length = max(c.char_end for c in chunks)
    sections = list(dict.fromkeys(c.heading_path for c in chunks))
    quarters, hit = set(), set()
    for chunk, s, e in cited_spans(answer):
        if chunk.doc_id != doc_id:
            continue
        start, end = chunk.char_start + s, chunk.char_start + e
        quarters |= set(range(4 * start // length, min(3, 4 * (end - 1) // length) + 1))
        hit.add(chunk.heading_path)
    return len(quarters) / 4, len(hit) / len(sections), len(sections)


# --------------------------------------------------------------------------- without a model
@pytest.mark.parametrize("key", ["report12.md", "report20.md", "eu_capitals.md", "odt", "rtf"])
def test_quoted_summary_covers_every_quarter_and_most_sections(library, key):
    doc_id = library.ids[key]
    answer = run(start_summary(library, [doc_id], library.settings, Shape.SUMMARY, use_llm=False))
    assert answer.mode == AnswerMode.QUOTES and not answer.incomplete and "no AI-written summary" in answer.notice
    check_cited(library, answer, {doc_id})
    quarters, sections, n_sections = coverage(library, answer, doc_id)
    assert quarters == 1.0
    if n_sections <= 20:
        assert sections >= 0.6, (sections, n_sections)
    index = [c.passage.chunk.index for c in sorted(answer.citations, key=lambda c: c.n)]
    assert index[1:] == sorted(index[1:])  # after the opening, in document order


def test_long_pdf_digest_is_quick_and_spans_the_document(long_pdf):
    lib, doc_id = long_pdf
    stream = start_summary(lib, [doc_id], lib.settings, Shape.SUMMARY, use_llm=False)
    started = time.process_time()  # CPU time of this process (every thread): what a busy machine does not inflate
    answer = run(stream)
    cpu = time.process_time() - started
    assert cpu <= 3.0, f"the 117-page digest took {cpu:.2f} s of CPU"
    check_cited(lib, answer, {doc_id})
    quarters, sections, n_sections = coverage(lib, answer, doc_id)
    assert quarters == 1.0 and n_sections == 33 and sections >= 0.4
    assert 12 <= len(answer.citations) <= 16  # the opening and at most 14 parts (plus one per unquoted quarter)
    # the opening is quoted from the first pages (page 1 is the title page, its own passage since passages start
    # at a page that starts a paragraph)
    assert answer.text.splitlines()[1] in ("Opening (page 1):", "Opening (page 2):")
    assert "5 Krümmung › 5.1 Krümmung von Kurven to 5.4 Erste und zweite Fundamentalform (pages 91–102):" in answer.text


def test_outline_lists_the_headings_with_their_pages(long_pdf, library):
    lib, doc_id = long_pdf
    answer = run(start_summary(lib, [doc_id], lib.settings, Shape.OUTLINE, use_llm=False))
    lines = answer.text.splitlines()
    assert lines[0] == "Outline of “Geometrie und Topologie” (its headings, with their pages):"
    assert "- 1 Topologische Grundbegriffe (pages 6–27)" in lines
    assert "- › 3.3 Überlagerungen (pages 55–64)" in lines and "- › › 4.2.1 Flächeninhalt (pages 78–81)" in lines
    assert len(lines) == 36 and not answer.citations
    flat = run(start_summary(library, [library.ids["rtf"]], library.settings, Shape.OUTLINE, use_llm=False))
    assert "has no headings" in flat.text


def test_key_points_are_a_cited_list(library):
    doc_id = library.ids["report12.md"]
    answer = run(start_answer(library, "What are the key points of the valley report?", library.settings,
                              use_llm=False))
    assert answer.extra["summary"]["shape"] == "key_points"
    bullets = [ln for ln in answer.text.splitlines()[1:] if ln]
    assert len(bullets) >= 12 and all(ln.startswith("- “") for ln in bullets)
    check_cited(library, answer, {doc_id})


def test_the_intent_routes_questions(library):
    capitals = library.ids["eu_capitals.md"]
    fact = run(start_answer(library, "What is the capital of Finland?", library.settings, use_llm=False))
    assert "summary" not in fact.extra and "Helsinki" in fact.text  # a fact question: the passages nearest to it
    for question in ("Summarize this document", "What is this document about?"):  # the chat scoped to one document
        scoped = run(start_answer(library, question, library.settings, doc_ids=[capitals], use_llm=False))
        assert scoped.extra["summary"]["docs"][0]["doc_id"] == capitals, question
        assert {c.passage.chunk.doc_id for c in scoped.citations} == {capitals}
    named = run(start_answer(library, "Summarize the Capitals of the European Union", library.settings,
                             use_llm=False))
    assert named.extra["summary"]["docs"][0]["doc_id"] == capitals


def test_compare_cites_both_documents_on_their_shared_topics(library):
    a, b = library.ids["plans_a.md"], library.ids["plans_b.md"]
    answer = run(start_answer(library, "Compare the harbour plans and the canal plans", library.settings,
                              use_llm=False))
    assert answer.extra["summary"]["shape"] == "compare"
    check_cited(library, answer, {a, b})
    lines = answer.text.splitlines()
    assert "“Harbour plans”:" in lines and "“Canal plans”:" in lines and "On shared topics:" in lines
    topics = lines[lines.index("On shared topics:") + 1:]
    assert any(t.startswith("“budget” — in “Harbour plans”, then in “Canal plans”:") for t in topics)
    first = topics.index(next(t for t in topics if t.startswith("“budget”")))
    ns = [int(re.search(r"\[(\d+)\]$", t).group(1)) for t in topics[first + 1:first + 3]]
    assert [answer.passages[n - 1].chunk.doc_id for n in ns] == [a, b]
    assert all("budget" in answer.passages[n - 1].chunk.text for n in ns)


def test_a_summary_is_saved_and_exported_like_any_answer(library, tmp_path):
    from rag_core.service.conversations import Conversation, FileConversations, export_markdown

    answer = run(start_answer(library, "Summarize the Capitals of the European Union", library.settings,
                              use_llm=False))
    store = FileConversations(tmp_path / "conversations")
    conv = Conversation(turns=[{"role": "user", "text": answer.question},
                               {"role": "assistant", "text": answer.text, "answer": answer}])
    store.save(conv)
    saved = store.open(conv.id).turns[1]["answer"]
    assert saved.text == answer.text and saved.mode == answer.mode
    assert [(c.n, c.passage.chunk.text, c.status) for c in saved.citations] == \
        [(c.n, c.passage.chunk.text, c.status) for c in answer.citations]
    markdown = export_markdown(store.open(conv.id))
    assert "Opening" in markdown and "**Sources**" in markdown and "Helsinki lies on the coast" in markdown


# --------------------------------------------------------------------------- with a model (scripted)
def first_sentences(body: dict) -> Reply:
    """The scripted model: a map call gets one bullet per source (its first sentence, cited); the call writing the
    whole gets the first and last notes."""
    user = body["messages"][-1]["content"]
    sources = re.findall(r'<source n="(\d+)"[^>]*>\n(.*?)\n</source>', user, re.S)
    if sources:
        bullets = []
        for n, text in sources:
            sentence = next((s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 6), None)
            if sentence:
                bullets.append(f"- {' '.join(sentence.split())} [{n}]")
        return Reply("\n".join(bullets[:4]))
    notes = [ln[2:] for ln in re.search(r"<notes>\n(.*?)\n</notes>", user, re.S).group(1).splitlines()
             if ln.startswith("- ")]
    return Reply(" ".join(notes[:1] + notes[-1:]))


@pytest.fixture
def server():
    with OllamaServer(models=[MODEL], default=first_sentences) as srv:
        yield srv


def model_settings(library: Library, server: OllamaServer, **kw: Any) -> Settings:
    return library.settings.with_overrides(ollama_host=server.url, ollama_model=MODEL, llm_timeout_s=30, **kw)


def test_map_reduce_is_bounded_reports_its_stages_and_is_checked(library, server):
    doc_id = library.ids["report20.md"]
    settings = model_settings(library, server, max_context_tokens=1024, answer_tokens=256, summary_max_calls=3)
    stream = start_answer(library, "Give me a summary of the twenty places report", settings)
    events: list = []
    stream.listen(events.append)
    deltas = list(stream)
    answer = stream.answer
    assert answer is not None and answer.mode == AnswerMode.MODEL and not answer.incomplete, answer.notice
    requests = server.chat_requests
    assert len(requests) == 4  # 3 parts (the bound), then the whole
    for req in requests:  # every call fits the context it asks for
        tokens = sum(len(m["content"]) for m in req["messages"]) / 3 + req["options"]["num_predict"]
        assert tokens <= req["options"]["num_ctx"] <= settings.answer.max_context_tokens
    notes = [e.note for e in events if e.note]
    assert notes[0].startswith("This will read 3 parts") and "in 4 model calls, about" in notes[0]
    assert [n.split("…")[0] for n in notes[1:4]] == ["Reading part 1 of 3", "Reading part 2 of 3", "Reading part 3 of 3"]
    assert notes[4] == "Writing the summary of “Twenty places report” from its 3 parts…"
    assert events[-1].step == Step.DONE
    assert sum(1 for d in deltas if d.strip()) == 3  # each part's notes streamed as soon as they were read
    summary = answer.extra["summary"]
    assert summary["model_calls"] == 4 and summary["prompt_tokens"] > 0
    shown = summary["docs"][0]["shown"]  # 3 calls of 1024 tokens hold 9 of its 21 passages: spread over all of it
    assert shown["quarter_share"] == 1.0 and shown["sections_cited"] == 9 and shown["sections"] == 21
    assert answer.notice == ("“Twenty places report” is long: the model read 9 of its 21 passages, spread evenly "
                             "over the whole document (4 model calls).")
    check_cited(library, answer, {doc_id})
    assert coverage(library, answer, doc_id)[0] == 1.0
    # With a context of 2048 tokens, 3 calls read all of it: every section shown, every quarter cited.
    server.requests.clear()
    wide = run(start_summary(library, [doc_id], model_settings(library, server, max_context_tokens=2048,
                                                                answer_tokens=256, summary_max_calls=3)))
    assert len(server.chat_requests) == 4 and wide.notice is None and not wide.incomplete
    assert wide.extra["summary"]["docs"][0]["shown"]["section_share"] == 1.0
    check_cited(library, wide, {doc_id})
    assert coverage(library, wide, doc_id)[0] == 1.0


def test_stop_mid_way_keeps_what_was_read(library, server):
    doc_id = library.ids["report12.md"]
    calls = {"n": 0}
    release = threading.Event()

    def slow_third(body: dict) -> Reply:
        calls["n"] += 1
        if calls["n"] == 3:
            release.wait(60)  # the model is busy reading part 3 when Stop comes
        return first_sentences(body)

    server.default = slow_third
    settings = model_settings(library, server, max_context_tokens=1024, answer_tokens=256, summary_max_calls=4)
    live = LiveAnswer(start_summary(library, [doc_id], settings))
    try:
        deadline = time.monotonic() + 60
        while not any("Reading part 3 of 4" in e.note for e in live.events()):
            assert time.monotonic() < deadline and not live.finished, live.events()
            live.poll(0.1)
        stopped_at = time.monotonic()
        live.stop()
        assert live.wait(10), "Stop was not seen while the model was busy"
        assert time.monotonic() - stopped_at < 5
    finally:
        release.set()
    answer = live.answer
    assert answer is not None and answer.incomplete and answer.mode == AnswerMode.MODEL
    assert answer.notice == "The summary was stopped after reading 2 of 4 parts; it covers those only."
    assert live.events()[-1].step == Step.STOPPED
    check_cited(library, answer, {doc_id})
    topics = [t for t in TOPICS[:12] if f"The {t} " in answer.text]
    assert "harbour" in topics and topics == TOPICS[:len(topics)]  # the first parts, read before Stop, are kept


def test_compare_with_a_model_reads_both_and_cites_both(library, server):
    a, b = library.ids["plans_a.md"], library.ids["plans_b.md"]
    answer = run(start_answer(library, "Compare the harbour plans and the canal plans", model_settings(library, server)))
    assert answer.mode == AnswerMode.MODEL and answer.extra["summary"]["shape"] == "compare"
    assert answer.extra["summary"]["model_calls"] == len(server.chat_requests) == 2  # one part each: no reduce
    check_cited(library, answer, {a, b})
    cited = {c.passage.chunk.doc_id for c in answer.citations}
    assert cited == {a, b} and "On shared topics:" in answer.text


def test_a_model_that_fails_gives_the_quoted_summary(library, server):
    server.default = Reply(status=500, error_body="model crashed")
    doc_id = library.ids["eu_capitals.md"]
    answer = run(start_summary(library, [doc_id], model_settings(library, server)))
    assert answer.mode == AnswerMode.QUOTES and "central sentences, quoted" in answer.notice
    check_cited(library, answer, {doc_id})


# --------------------------------------------------------------------------- the command line and MCP
@pytest.fixture
def small_library(tmp_path, embedder):
    data = tmp_path / "data"
    lib = Library(Settings(data_dir=data), embedder=embedder)
    doc_id = lib.ingest_path(DOCS / "eu_capitals.md").doc_id
    lib.close()
    return data, doc_id


def test_cli_summarize(cli, small_library):
    import json

    data, doc_id = small_library
    env = {"DOCCHAT_OLLAMA_MODEL": ""}
    out = cli("summarize", doc_id, "--json", "--data-dir", str(data), env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["mode"] == "quotes" and result["summary"]["docs"][0]["cited"]["quarter_share"] == 1.0
    assert {c["doc_id"] for c in result["citations"]} == {doc_id}
    assert all(c["status"] == "verified" for c in result["citations"])
    human = cli("summarize", doc_id, "--as", "outline", "--data-dir", str(data), env=env)
    assert human.returncode == 0 and "- › Belgium" in human.stdout
    ask = cli("ask", "Summarize the capitals of the European Union", "--no-llm", "--data-dir", str(data), env=env)
    assert ask.returncode == 0 and "Opening:" in ask.stdout and "Finland:" in ask.stdout  # `ask` routes it too
    missing = cli("summarize", "nope", "--data-dir", str(data), env=env)
    assert missing.returncode == 2 and "No document with id “nope”" in missing.stderr


def test_mcp_summarize_tool(small_library, embedder):
    from mcp import Client

    from rag_core.adapters.mcp.server import LibraryHolder, build_server

    data, doc_id = small_library
    settings = Settings(data_dir=data, ollama_model="")
    holder = LibraryHolder(settings, idle_close_s=0, embedder=embedder)
    server = build_server(settings, holder, use_llm=False)
    results: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server) as c:
            assert "summarize" in {t.name for t in (await c.list_tools()).tools}
            results["ok"] = await c.call_tool("summarize", {"doc_ids": [doc_id]})
            results["missing"] = await c.call_tool("summarize", {"doc_ids": ["nope"]})
            results["many"] = await c.call_tool("summarize", {"doc_ids": ["a", "b", "c", "d"]})

    try:
        asyncio.run(main())
    finally:
        holder.close()
    ok = results["ok"].structured_content
    assert ok["mode"] == "quotes" and "Helsinki" in ok["summary"] and ok["coverage"]["shape"] == "summary"
    assert ok["citations"] and all(c["status"] == "verified" for c in ok["citations"])
    for key, words in (("missing", "No document with id “nope”"), ("many", "doc_ids")):
        assert results[key].is_error and words in results[key].content[0].text


# The summary written by the real small model is in tests/integration/test_real_llm.py, beside its one server.
