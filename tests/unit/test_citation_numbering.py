"""Shown sources are numbered 1..n in the order a reader meets them, and the reply's [n] markers with them
(issue 28): no lone [3]; the chat, a saved-and-reloaded conversation and the Markdown export agree."""
from __future__ import annotations

from rag_core.answer.grounding.citations import find_markers, renumbered
from rag_core.core.models import (
    Answer,
    AnswerMode,
    Chunk,
    Citation,
    CitationStatus,
    Passage,
    SentenceCheck,
    SourceMeta,
)
from rag_core.service import render
from rag_core.service.conversations import Conversation, answer_from_dict, answer_to_dict, export_markdown


def _passage(i: int) -> Passage:
    src = SourceMeta(file_name=f"doc{i}.pdf", title=f"Doc {i}", kind="pdf", sha256="x" * 64)
    text = f"Passage number {i} says the ferry leaves at {i} o'clock."
    return Passage(Chunk(doc_id=f"d{i}", index=i, text=text, char_start=0, char_end=len(text), page_start=i,
                         page_end=i, heading_path=(), source=src), score=1.0)


PASSAGES = tuple(_passage(i) for i in range(1, 6))


def _answer() -> Answer:
    """The model cited passages 3 and 5 (of 5 in its prompt), 5 first; passage 2 backs an uncited sentence."""
    text = "The ferry leaves at five [5]. It also leaves at three [3][5]. It runs daily."
    s1, s2, s3 = (0, text.index(" It also")), (text.index("It also"), text.index(" It runs")), (
        text.index("It runs"), len(text))
    citations = (
        Citation(2, PASSAGES[1], CitationStatus.MATCHED, 0, 10, 0.9, (s3,)),
        Citation(3, PASSAGES[2], CitationStatus.VERIFIED, 0, 10, 0.9, (s2,)),
        Citation(5, PASSAGES[4], CitationStatus.UNSUPPORTED, None, None, 0.1, (s1, s2)),
    )
    sentences = (SentenceCheck(*s1, CitationStatus.UNSUPPORTED, (5,), (), 0.1),
                 SentenceCheck(*s2, CitationStatus.VERIFIED, (3, 5), (3,), 0.9),
                 SentenceCheck(*s3, CitationStatus.MATCHED, (), (2,), 0.8))
    return Answer(text=text, mode=AnswerMode.MODEL, citations=citations, passages=PASSAGES, sentences=sentences,
                  context_passages=5, extra={"instructions": [5]})


def test_sources_are_numbered_in_the_order_met_and_the_markers_follow():
    shown = renumbered(_answer())
    assert shown.text == "The ferry leaves at five [1]. It also leaves at three [2][1]. It runs daily."
    assert [(c.n, c.passage.chunk.doc_id) for c in shown.citations] == [(1, "d5"), (2, "d3"), (3, "d2")]
    cited = {n for mk in find_markers(shown.text) for n in mk.numbers}
    assert cited <= {c.n for c in shown.citations} and 1 in cited  # never a lone [3]
    # every span that pointed into the text still covers the same sentence
    for old, new in zip(_answer().sentences, shown.sentences, strict=True):
        assert shown.text[new.start:new.end].split("[")[0] == _answer().text[old.start:old.end].split("[")[0]
    assert [(s.cited, s.supported_by) for s in shown.sentences] == [((1,), ()), ((2, 1), (2,)), ((), (3,))]
    first = shown.citations[0]
    assert [shown.text[a:b] for a, b in first.answer_spans] == [shown.text[s.start:s.end] for s in shown.sentences[:2]]
    assert shown.extra["instructions"] == [1]
    assert render.reply_markdown(shown.text, [(s.start, s.end) for s in shown.unbacked()]).count("\\[1\\]") == 2


def test_numbering_twice_changes_nothing_and_a_saved_conversation_exports_as_shown():
    shown = renumbered(_answer())
    assert renumbered(shown) == shown
    assert render.shown_answer(_answer()) == shown
    saved = answer_from_dict(answer_to_dict(_answer()))  # saved as answered, shown renumbered: same result
    assert renumbered(saved).text == shown.text
    conv = Conversation(title="Ferry", turns=[{"id": "q", "role": "user", "text": "When?"},
                                               {"id": "a", "role": "assistant", "text": "", "answer": saved}])
    md = export_markdown(conv)
    assert "five \\[1\\]" in md or "five [1]" in md
    assert md.index("**[1]** Doc 5") < md.index("**[2]** Doc 3") < md.index("**[3]** Doc 2")
    assert "[5]" not in md and "**[4]**" not in md


def test_markers_without_a_source_are_dropped_and_an_answer_already_in_order_is_kept():
    ans = Answer(text="Only this [2] and that [9].", mode=AnswerMode.MODEL,
                 citations=(Citation(2, PASSAGES[1]),), passages=PASSAGES)
    assert renumbered(ans).text == "Only this [1] and that."
    ordered = Answer(text="One [1], two [2].", mode=AnswerMode.QUOTES,
                     citations=(Citation(1, PASSAGES[0]), Citation(2, PASSAGES[1])), passages=PASSAGES)
    assert renumbered(ordered) is ordered
