"""Streamlit rendering of chat turns: the reply, and its sources beside it. Untrusted text is always escaped
(rag_core.render) before it reaches st.markdown; nothing here uses unsafe_allow_html."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import streamlit as st

from rag_core import render
from rag_core.models import Answer, Chunk, Citation, Passage
from rag_core.workspace import Workspace

WIKIPEDIA_LICENSE_LINE = "Text from Wikipedia, available under the Creative Commons Attribution-ShareAlike License 4.0 (CC BY-SA 4.0)."
MODE_BADGES = {
    "extractive": ("Quoted from your documents", ":material/format_quote:", "blue"),
    "not_found": ("Not found in your documents", ":material/search_off:", "orange"),
}
UNSUPPORTED_NOTE = "This passage does not clearly say what the reply claims — check it yourself."
MATCHED_NOTE = "The reply did not cite this passage, but it backs what the reply says."


def escaped_stream(deltas: Iterable[str]) -> Iterator[str]:
    """Escape streamed reply pieces so st.write_stream renders them as inert text."""
    for delta in deltas:
        if delta:
            yield render.escape_stream(delta)


def show_message(text: str, kind: str = "error") -> None:
    """One of DocChat's own sentences (which may contain a file name) as an error/warning/info box."""
    box = {"error": st.error, "warning": st.warning, "info": st.info}[kind]
    box(render.message_markdown(text), icon={"error": ":material/error:", "warning": ":material/warning:",
                                             "info": ":material/info:"}[kind])


def show_reply(answer: Answer) -> None:
    """The reply text, visibly marked when it is a direct quote or a "not found", with its one-sentence notice."""
    badge = MODE_BADGES.get(answer.mode)
    if badge:
        st.badge(badge[0], icon=badge[1], color=badge[2])
    st.markdown(render.reply_markdown(answer.text))
    if answer.incomplete:
        show_message(answer.notice or "The answer was cut off; ask again to retry.", "warning")
    elif answer.notice:
        st.caption(render.message_markdown(answer.notice))


def _title_line(n: int | None, chunk: Chunk) -> str:
    title = render.escape_markdown(chunk.source.title or chunk.source.file_name or "Untitled")
    where = render.location_label(chunk)
    head = f"**\\[{n}\\]** " if n is not None else ""
    return f"{head}**{title}**" + (f"  \n{render.escape_markdown(where)}" if where else "")


@st.cache_data(max_entries=64, show_spinner="Drawing the page…")
def _page_png(doc_id: str, chunk_text: str, page_start: int, page_end: int | None, evidence: str | None,
              _pdf: bytes) -> tuple[int, bytes] | None:
    # Keyed by doc_id: ids are fixed by content (and scoped to their owner in the demo), so one id is one file. The
    # caller has already checked that this session may see the document (Workspace.original).
    return render.pdf_page_for(_pdf, chunk_text, page_start, page_end, evidence)


def _page_image(chunk: Chunk, evidence: str | None, ws: Workspace) -> tuple[int, bytes] | None:
    """The rendered PDF page of a passage, read through this session's own view of its documents."""
    pdf = ws.original(chunk.doc_id)
    if pdf is None or not chunk.page_start:
        return None
    return _page_png(chunk.doc_id, chunk.text, chunk.page_start, chunk.page_end, evidence, _pdf=pdf)


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
        st.markdown("> " + render.highlight_markdown(chunk.text, c.evidence_start, c.evidence_end))
        if c.status == "unsupported":
            st.caption(":material/warning: " + UNSUPPORTED_NOTE)
        elif c.status == "matched":
            st.caption(":material/link: " + MATCHED_NOTE)
        if chunk.source.kind == "wikipedia":
            _wikipedia_lines(chunk)
        elif chunk.source.kind == "pdf" and chunk.page_start:
            exp = st.expander("Show on the page", icon=":material/description:", key=key, on_change="rerun")
            with exp:
                if exp.open:
                    got = _page_image(chunk, _evidence(c), ws)
                    if got is None:
                        st.caption("The page image is not available (the original file was not kept).")
                    else:
                        page, png = got
                        st.image(png, caption=f"Page {page} — the passage is highlighted", width="stretch")


def show_other_passages(passages: Iterable[Passage]) -> None:
    """Retrieved-but-uncited passages, in a quiet expander."""
    passages = list(passages)
    if not passages:
        return
    with st.expander(f"Other passages ({len(passages)})", icon=":material/manage_search:"):
        st.caption("These were found while searching but the reply does not cite them.")
        for p in passages:
            st.markdown(_title_line(None, p.chunk))
            st.markdown("> " + render.highlight_markdown(p.chunk.text, None, None, context=160))


def show_sources(answer: Answer, key: str, ws: Workspace) -> None:
    """The sources column beside a reply."""
    cited = {c.passage.chunk.point_id for c in answer.citations}
    others = [p for p in answer.passages if p.chunk.point_id not in cited]
    if answer.citations:
        st.markdown("**Sources**")
        for c in answer.citations:
            show_citation(c, f"{key}_page_{c.n}", ws)
    elif answer.mode != "not_found":
        st.caption("This reply does not cite a specific passage.")
    show_other_passages(others)


def show_assistant_turn(answer: Answer | None, error: str | None, key: str, ws: Workspace,
                        error_kind: str = "error") -> None:
    """A whole assistant turn: reply on the left, its sources on the right (error_kind "warning" for a limit)."""
    if answer is None:
        show_message(error or "Something went wrong while answering.", error_kind)
        return
    left, right = st.columns([1, 1], gap="large")
    with left:
        show_reply(answer)
    with right:
        show_sources(answer, key, ws)
