"""Streamlit rendering of chat turns: the reply, and its sources beside it. Untrusted text is always escaped
(rag_core.service.render) before it reaches st.markdown; nothing here uses unsafe_allow_html."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import streamlit as st

from rag_core.core.models import Answer, AnswerMode, Chunk, Citation, DocKind, Passage
from rag_core.service import render
from rag_core.service.workspace import Workspace
from ui.relevance import show_match
from ui.safe import guarded, show_message

__all__ = ["escaped_stream", "show_assistant_turn", "show_citation", "show_details", "show_draft", "show_message",
           "show_other_passages", "show_reply", "show_sources", "show_unchecked"]  # show_message lives in ui.safe; other modules import it from here too

WIKIPEDIA_LICENSE_LINE = "Text from Wikipedia, available under the Creative Commons Attribution-ShareAlike License 4.0 (CC BY-SA 4.0)."
# The text streams in as a draft: only its checked version (the answer run: the sentences the documents back, or
# the closest quotes) is the answer. Pages show the draft visibly as one, and replace it with the checked answer.
DRAFT_NOTE = "Draft — checking against your documents…"
DRAFT_STOPPED_NOTE = "Stopped — checking what was written against your documents…"
UNCHECKED_NOTE = ("This answer was stopped before it could be checked against your documents, so it is not shown. "
                  "Ask again for a checked answer.")
UNCHECKED_DETAILS = "What the model wrote (not checked against your documents): {text}"

MODE_BADGES = {
    AnswerMode.QUOTES: ("Quoted from your documents", ":material/format_quote:", "blue"),
    AnswerMode.NOT_FOUND: ("Not found in your documents", ":material/search_off:", "orange"),
}
CLOSEST_BADGE = ("Closest passages — not a direct answer", ":material/travel_explore:", "gray")
UNSUPPORTED_NOTE = "This passage does not clearly say what the reply claims — check it yourself."
PARTIAL_NOTE = ("This passage backs the highlighted part, but not every sentence that cites it: the marked sentence "
                "of the reply is not in it.")
WHOLE_PASSAGE = "Whole passage"
WHOLE_PASSAGE_HELP = "Show the whole passage on its page (smaller) instead of the cited words enlarged."
PAGE_FAILED = "This page could not be drawn. The quote above is the passage the reply cites."
TURN_FAILED = "This earlier reply could not be shown. Ask the question again to see it."
MATCHED_NOTE = "The reply did not cite this passage, but it backs what the reply says."
SCANNED_NOTE = "Text recognised from a scan (OCR): a word may be misread, so check it on the page."
INSTRUCTIONS_BADGE = ("Instructions addressed to an AI", ":material/gpp_maybe:", "red")
INSTRUCTIONS_NOTE = ("This passage contains instructions addressed to an AI (such as “tell the user…” or “ignore "
                     "previous instructions”). Its words are really in the document, but they tell an assistant what "
                     "to say rather than state a fact: the reply may follow them rather than answer you.")


def escaped_stream(deltas: Iterable[str]) -> Iterator[str]:
    """Escape streamed reply pieces so st.write_stream renders them as inert text (an autolink cut across pieces
    included: one escaper sees the whole stream)."""
    escaper = render.StreamEscaper()
    for delta in deltas:
        if delta:
            yield escaper.feed(delta)


def show_reply(answer: Answer) -> None:
    """The reply text, visibly marked when it is a direct quote or a "not found", with its one-sentence notice;
    a sentence its cited passage does not back is marked, and the notice is then a warning."""
    answer = render.shown_answer(answer)  # its [n] as the sources beside it are numbered: 1..n in the order shown
    badge = CLOSEST_BADGE if answer.mode == AnswerMode.QUOTES and answer.extra.get("closest") else MODE_BADGES.get(answer.mode)
    if badge:
        st.badge(badge[0], icon=badge[1], color=badge[2])
    unbacked = [(s.start, s.end) for s in answer.unbacked()]
    st.markdown(render.reply_markdown(answer.text, unbacked))
    if answer.incomplete or (unbacked and answer.notice) or (answer.flagged() and answer.notice):
        show_message(answer.notice or "The answer was cut off; ask again to retry.", "warning")
    elif answer.notice:
        st.caption(render.message_markdown(answer.notice))
    details = answer.extra.get("details") if answer.notice else None
    if details:
        show_details(str(details))


def show_draft(markdown: str, note: str = DRAFT_NOTE) -> None:
    """A reply still being written or checked, visibly a draft: greyed (a caption) under a line that says so.
    `markdown` is the streamed text already escaped (render.StreamEscaper); the checked answer replaces it."""
    st.caption(":material/edit_note: **" + render.message_markdown(note) + "**")
    if markdown.strip():
        st.caption(markdown)


def show_unchecked(text: str) -> None:
    """A reply stopped before it could be checked (its run ended first): not shown, its draft only under Details."""
    show_message(UNCHECKED_NOTE, "warning")
    if text.strip():
        show_details(UNCHECKED_DETAILS.format(text=" ".join(text.split())))


def show_details(text: str) -> None:
    """The technical part of a notice (setting names, addresses, commands), folded away under "Details"."""
    with st.expander("Details", icon=":material/build:"):
        st.caption(render.message_markdown(text))


def _title_line(n: int | None, chunk: Chunk) -> str:
    title = render.escape_markdown(chunk.source.title or chunk.source.file_name or "Untitled")
    where = render.location_label(chunk)
    head = f"**\\[{n}\\]** " if n is not None else ""
    return f"{head}**{title}**" + (f"  \n{render.escape_markdown(where)}" if where else "")


@st.cache_data(max_entries=64, show_spinner="Drawing the page…")
def _page_png(doc_id: str, chunk_text: str, page_start: int, page_end: int | None, evidence: str | None,
              ocr: tuple, _pdf: bytes, _ws: Workspace, focus: bool = False) -> tuple[int, bytes] | None:
    # Keyed by doc_id: ids are fixed by content (and scoped to their owner in the demo), so one id is one file. The
    # caller has already checked that this session may see the document (Workspace.original).
    _ws.allow_page_render()  # only a real drawing counts (not a cached one, nor a rerun with the page still open)
    return render.pdf_page_for(_pdf, chunk_text, page_start, page_end, evidence, ocr, focus=focus)


def _page_image(chunk: Chunk, evidence: str | None, ws: Workspace, focus: bool = False) -> tuple[int, bytes] | None:
    """The rendered PDF page of a passage, read through this session's own view of its documents; with `focus`, cut
    to the cited words and enlarged (readable on a phone)."""
    pdf = ws.original(chunk.doc_id)
    if pdf is None or not chunk.page_start:
        return None
    return _page_png(chunk.doc_id, chunk.text, chunk.page_start, chunk.page_end, evidence,
                     render.ocr_options(ws.settings), _pdf=pdf, _ws=ws, focus=focus)


def _evidence(c: Citation) -> str | None:
    text = c.passage.chunk.text
    if c.evidence_start is None or c.evidence_end is None or not (0 <= c.evidence_start < c.evidence_end <= len(text)):
        return None
    return text[c.evidence_start:c.evidence_end]


def _wikipedia_lines(chunk: Chunk) -> None:
    url = render.safe_source_url(chunk)
    if url:
        label = "Open on Wikipedia" + (f" (section {chunk.section})" if chunk.heading_path else "")
        st.markdown(render.link_markdown(label, url) + " :material/open_in_new:")
    rev = f" Revision {chunk.source.revision_id}." if chunk.source.revision_id else ""
    st.caption(WIKIPEDIA_LICENSE_LINE + rev)


def show_citation(c: Citation, key: str, ws: Workspace) -> None:
    """One source card: [n], title, page/section, the quote with the cited sentence highlighted, links, page image."""
    chunk = c.passage.chunk
    with st.container(border=True, key=f"source_card_{key}"):
        st.markdown(_title_line(c.n, chunk))
        show_match(c.passage.match)
        if chunk.instructions:
            st.badge(INSTRUCTIONS_BADGE[0], icon=INSTRUCTIONS_BADGE[1], color=INSTRUCTIONS_BADGE[2])
        st.markdown("> " + render.highlight_markdown(chunk.text, c.evidence_start, c.evidence_end))
        if chunk.instructions:
            st.caption(":material/gpp_maybe: " + INSTRUCTIONS_NOTE)
        if c.status == "unsupported":
            st.caption(":material/warning: " + (UNSUPPORTED_NOTE if c.evidence_start is None else PARTIAL_NOTE))
        elif c.status == "matched":
            st.caption(":material/link: " + MATCHED_NOTE)
        if chunk.from_scan:
            st.caption(":material/document_scanner: " + SCANNED_NOTE)
        if chunk.source.kind == DocKind.WIKIPEDIA:
            _wikipedia_lines(chunk)
        elif render.shows_pages(chunk.source.kind) and chunk.page_start:  # a PDF, or an image kept as one
            exp = st.expander("Show on the page", icon=":material/description:", key=key, on_change="rerun")
            with exp:
                if exp.open:
                    _show_page(c, ws, key)


def _show_page(c: Citation, ws: Workspace, key: str) -> None:
    """The page image inside its expander: the cited words enlarged, so a phone's narrow screen can read them, or
    the whole passage on its page ("Whole passage"); a demo limit or a failure to draw it is one sentence."""
    with guarded("a page image", PAGE_FAILED):
        evidence = _evidence(c)
        focus = evidence is not None and not st.toggle(WHOLE_PASSAGE, key=f"whole_{key}", help=WHOLE_PASSAGE_HELP)
        got = _page_image(c.passage.chunk, evidence, ws, focus)
        if got is None:
            st.caption("The page image is not available (the original file was not kept, or the page cannot be "
                       "drawn).")
        else:
            page, png = got
            where = render.page_name(c.passage.chunk.source.kind, page)  # "page 3", "slide 3"
            shown = "the cited words, enlarged" if focus else "the passage is highlighted"
            st.image(png, caption=f"{where[:1].upper()}{where[1:]} — {shown}", width="stretch")


def show_other_passages(passages: Iterable[Passage]) -> None:
    """Retrieved-but-uncited passages, in a quiet expander."""
    passages = list(passages)
    if not passages:
        return
    with st.expander(f"Other passages ({len(passages)})", icon=":material/manage_search:"):
        st.caption("These were found while searching but the reply does not cite them.")
        for p in passages:
            st.markdown(_title_line(None, p.chunk))
            show_match(p.match)
            if p.chunk.instructions:
                st.badge(INSTRUCTIONS_BADGE[0], icon=INSTRUCTIONS_BADGE[1], color=INSTRUCTIONS_BADGE[2])
            st.markdown("> " + render.highlight_markdown(p.chunk.text, None, None, context=160))


def show_found_passages(passages: Iterable[Passage]) -> None:
    """The passages found for a reply still being written (the checked sources replace them when it is done)."""
    passages = list(passages)
    st.markdown(f"**Found {len(passages)} passage{'' if len(passages) == 1 else 's'}**")
    st.caption("The reply is being written from these; its sources appear here when it is done.")
    for p in passages:
        st.markdown(_title_line(None, p.chunk))


def show_sources(answer: Answer, key: str, ws: Workspace) -> None:
    """The sources column beside a reply, numbered 1..n in the order shown (render.shown_answer)."""
    answer = render.shown_answer(answer)
    cited = {c.passage.chunk.point_id for c in answer.citations}
    others = [p for p in answer.passages if p.chunk.point_id not in cited]
    if answer.citations:
        st.markdown("**Sources**")
        for c in answer.citations:
            show_citation(c, f"{key}_page_{c.n}", ws)
    elif answer.mode != AnswerMode.NOT_FOUND:
        st.caption("This reply does not cite a specific passage.")
    show_other_passages(others)


def show_assistant_turn(answer: Answer | None, error: str | None, key: str, ws: Workspace,
                        error_kind: str = "error") -> None:
    """A whole assistant turn: reply on the left, its sources on the right (error_kind "warning" for a limit).
    Callers guard it (ui.safe.guarded): a turn that cannot be drawn is one sentence."""
    if answer is None:
        show_message(error or "Something went wrong while answering.", error_kind)
        return
    left, right = st.columns([1, 1], gap="large")
    with left:
        show_reply(answer)
    with right:
        show_sources(answer, key, ws)
