"""Saved conversations and Settings choices: round trips, damaged files, hostile ids, Markdown export."""
from __future__ import annotations

import html as htmllib
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from rag_core.core.config import Settings
from rag_core.core.models import Answer, Chunk, Citation, Passage, SentenceCheck, SourceMeta
from rag_core.service.conversations import (
    MAX_FILE_BYTES,
    Conversation,
    FileConversations,
    MemoryConversations,
    answer_from_dict,
    answer_to_dict,
    export_markdown,
    title_for,
)
from rag_core.service.preferences import FilePreferences, MemoryPreferences


def _answer() -> Answer:
    pdf = SourceMeta(file_name="report-2024.pdf", title="Annual <b>report</b>", kind="pdf", sha256="a" * 64)
    wiki = SourceMeta(file_name="", title="Alan Turing", kind="wikipedia", sha256="b" * 64,
                      url="https://en.wikipedia.org/wiki/Alan_Turing", lang="en")
    c1 = Chunk("d1", 0, "Revenue grew by 12 percent in 2024. Costs were flat.", 0, 52, 3, 3, ("Results",), pdf)
    c2 = Chunk("d2", 4, "Turing was born in Maida Vale, London.", 0, 38, None, None, ("Early life",), wiki,
               anchor="Early_life")
    p1, p2 = Passage(c1, 0.8), Passage(c2, 0.5)
    text = "Revenue grew by 12 percent [1]. Turing was born in London [2]."
    return Answer(text=text, mode="model", passages=(p1, p2), question="What grew?", context_passages=2,
                  citations=(Citation(1, p1, "verified", 0, 35, 0.9, ((0, 31),)),
                             Citation(2, p2, "unsupported", None, None, 0.1, ((32, 62),))),
                  sentences=(SentenceCheck(0, 31, "verified", (1,), (1,), 0.9),), relevance=0.7,
                  notice="One sentence is not backed <script>.", extra={"timing": 1, "details": "DOCCHAT_X=1"})


def test_answer_round_trip_keeps_citations_passages_and_checks() -> None:
    a = _answer()
    back = answer_from_dict(json.loads(json.dumps(answer_to_dict(a))))
    assert back == a  # `extra` is not compared (run-time detail), everything else is
    assert back.citations[0].answer_spans == ((0, 31),)
    assert back.citations[1].passage.chunk.heading_path == ("Early life",)
    assert back.extra == {"details": "DOCCHAT_X=1"}  # the notice's technical part is kept, run-time detail is not


@pytest.mark.parametrize("store_kind", ["file", "memory"])
def test_conversations_save_list_rename_delete(tmp_path, store_kind) -> None:
    store = FileConversations(tmp_path / "conversations") if store_kind == "file" else MemoryConversations()
    empty = Conversation()
    store.save(empty)
    assert store.list() == []  # a conversation without a question is not listed
    conv = Conversation(title=title_for("What grew?"))
    conv.turns += [{"id": "u1", "role": "user", "text": "What grew?"},
                   {"id": "a1", "role": "assistant", "text": _answer().text, "answer": _answer(), "error": None,
                    "pending": True}]
    store.save(conv)
    [info] = store.list()
    assert (info.id, info.title, info.questions) == (conv.id, "What grew?", 1)
    loaded = store.load(conv.id)
    assert loaded is not None and loaded.turns[1]["answer"] == _answer()
    assert loaded.turns[1]["pending"] is False  # saved mid-answer: shown as it got, never as still running
    store.rename(conv.id, "  Revenue   questions ")
    assert store.list()[0].title == "Revenue questions"
    store.delete(conv.id)
    assert store.list() == [] and store.load(conv.id) is None


def test_file_conversations_survive_a_new_process(tmp_path) -> None:
    folder = tmp_path / "conversations"
    script = textwrap.dedent(f"""
        from rag_core.service.conversations import Conversation, FileConversations
        c = Conversation(id="0123456789abcdef", title="Kept")
        c.turns.append({{"id": "u", "role": "user", "text": "Still here?"}})
        FileConversations(__import__("pathlib").Path({str(folder)!r})).save(c)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=os.getcwd())
    [info] = FileConversations(folder).list()
    assert (info.id, info.title) == ("0123456789abcdef", "Kept")


def test_damaged_and_hostile_files_are_skipped_not_fatal(tmp_path) -> None:
    folder = tmp_path / "c"
    store = FileConversations(folder)
    good = Conversation()
    good.turns.append({"id": "u", "role": "user", "text": "ok"})
    store.save(good)
    (folder / "0000000000000001.json").write_text("{not json", encoding="utf-8")
    (folder / "0000000000000002.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (folder / "0000000000000003.json").write_text(json.dumps({"format": 1, "id": "../../etc"}), encoding="utf-8")
    with open(folder / "0000000000000004.json", "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    (folder / ".0000000000000005.json.123.tmp").write_text("half written", encoding="utf-8")
    assert [i.id for i in store.list()] == [good.id]
    with pytest.raises(ValueError):
        store.save(Conversation(id="../../escape"))
    assert store.load("../../etc/passwd") is None


def _html(md: str) -> str:
    """The export rendered as a Markdown viewer would (CommonMark, with GitHub's tables and strikethrough)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)


def _visible(html: str) -> str:
    """The text a person sees in rendered HTML, whitespace collapsed."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).replace("\u2060", "").split())


def test_export_markdown_has_numbered_sources_quotes_places_and_links() -> None:
    conv = Conversation(title="Revenue")
    conv.turns += [{"id": "u1", "role": "user", "text": "What grew?"},
                   {"id": "a1", "role": "assistant", "text": "", "answer": _answer()},
                   {"id": "u2", "role": "user", "text": "And then?"},
                   {"id": "a2", "role": "assistant", "text": "", "answer": None,
                    "error": "The language model did not answer."}]
    md = export_markdown(conv)
    html = _html(md)
    assert md.startswith("# Revenue\n")
    assert "<h2>What grew?</h2>" in html and "<h2>And then?</h2>" in html
    assert "<p>Revenue grew by 12 percent [1]. Turing was born in London [2].</p>" in html
    assert ("<strong>[1]</strong> Annual &lt;b&gt;report&lt;/b&gt;, page 3, section Results (report-2024.pdf)"
            in html)
    assert "Revenue grew by 12 percent in 2024." in _visible(html)  # the evidence span, not the whole passage
    assert "Costs were flat" not in md
    assert "<strong>[2]</strong> Alan Turing, section Early life — https://en.wikipedia.org/wiki/Alan_Turing#Early_life" in html
    assert "not backed by this passage" in md
    assert "The language model did not answer." in _visible(html)
    assert "<script>" not in html and "<b>" not in html


HOSTILE = ["![x](http://127.0.0.1:9/p.png?d=secret)", "[click](https://127.0.0.1:9/c) [js](javascript:alert(1))", "<img src=http://127.0.0.1:9/i.png>",
           ":red[styled] :material/warning: :blue-background[x]", "**bold** _em_ ~~gone~~ `code`",
           "<https://evil.example/a>", "see [r]\n\n[r]: http://evil.example/r", "# title\n- item\n1. one\n> quote",
           "```\nfenced\n```", "| a | b |\n|---|---|\n| 1 | 2 |", "&lt;b&gt; &amp; &#60;", "$x^2$ \\(y\\)",
           "www.evil.example http://evil.example/x me@evil.example", "    indented code", "line  \nbreak ***"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_export_markdown_is_inert_in_every_field(hostile) -> None:
    """Whatever a title, question, reply, notice, error, document title, file name or quote holds, the rendered
    export shows it as text: no image (fetched on view), link, HTML, formatting or Streamlit directive."""
    answer = _answer()
    c1 = answer.citations[0]
    chunk = replace(c1.passage.chunk, text=hostile, source=replace(c1.passage.chunk.source, title=hostile,
                                                                   file_name=hostile + ".pdf"))
    c1 = replace(c1, passage=Passage(chunk, 0.8), evidence_start=None, evidence_end=None)
    answer = replace(answer, text=hostile, notice=hostile, citations=(c1,))
    conv = Conversation(title=hostile)
    conv.turns += [{"id": "u1", "role": "user", "text": hostile},
                   {"id": "a1", "role": "assistant", "text": "", "answer": answer},
                   {"id": "a2", "role": "assistant", "text": "", "answer": None, "error": hostile}]
    md = export_markdown(conv)
    html = _html(md)
    assert set(re.findall(r"<(\w+)", html)) <= {"h1", "h2", "p", "em", "strong", "blockquote", "br"}, html
    assert "<a" not in html and "<img" not in html
    assert ":red[" not in md and ":material/" not in md and ":blue-background[" not in md  # Streamlit directives
    assert "://evil" not in md and "@evil" not in md and "www.evil" not in md  # no bare URL for a viewer to link
    shown = _visible(html)
    assert shown.count(" ".join(hostile.split())) >= 6, shown  # title, question, reply, notice, quote, error


def test_preferences_persist_and_drop_bad_values(tmp_path) -> None:
    base = Settings(data_dir=tmp_path)
    prefs = FilePreferences(base)
    assert prefs.load() == {}
    prefs.save({"ollama_host": "http://127.0.0.1:5555", "top_k": 7, "use_llm": False, "scope_default": "pick",
                "unknown": 1})
    assert FilePreferences(base).load() == {"ollama_host": "http://127.0.0.1:5555", "top_k": 7, "use_llm": False,
                                            "scope_default": "pick"}
    (tmp_path / "preferences.json").write_text(json.dumps({"top_k": 0, "use_llm": "yes", "ollama_model": "x"}))
    assert FilePreferences(base).load() == {"ollama_model": "x"}  # top_k=0 is out of bounds, use_llm not a bool
    (tmp_path / "preferences.json").write_text("{broken")
    assert FilePreferences(base).load() == {}
    memory = MemoryPreferences(base)
    memory.save({"top_k": 3, "scope_default": "nonsense"})
    assert memory.load() == {"top_k": 3}
