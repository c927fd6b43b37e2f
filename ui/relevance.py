"""Why a source was chosen and how relevant it is, in plain words (a passage's Match, set by retrieval): one line under
each source in the chat and in the Settings page's retrieval test, and a warning on a weak match."""
from __future__ import annotations

import streamlit as st

from rag_core.core.models import Match, MatchKind, MatchLevel
from rag_core.service import render

LEVELS = {  # label, icon, badge colour
    MatchLevel.HIGH: ("High relevance", ":material/check_circle:", "green"),
    MatchLevel.MEDIUM: ("Medium relevance", ":material/adjust:", "blue"),
    MatchLevel.LOW: ("Low relevance", ":material/warning:", "orange"),
}
STRONG = "Strong match — shares your words ({words}) and your meaning"
WORDS = "Matched your words ({words})"
WORDS_ONLY = "Matched your words ({words}), but not your meaning"
MEANING = "Matched by meaning (different words)"
NEAREST = "No closer passage was found: it has none of your words and is far from your meaning"
WEAK_NOTE = "Weak match: this passage may not answer your question."
MAX_WORDS = 4  # of the question's words named in the reason
RERANKED = ":gray-badge[:material/swap_vert: Reranked]"  # its place was set by the reranker (DOCCHAT_RERANKER)


def _words(words: tuple[str, ...]) -> str:
    named = ", ".join(f"“{w}”" for w in words[:MAX_WORDS])
    return named + (f" and {len(words) - MAX_WORDS} more" if len(words) > MAX_WORDS else "")


def reason(match: Match) -> str:
    """Why the passage was chosen, in one plain phrase (the question's words it contains are named)."""
    if match.kind == MatchKind.BOTH:
        return STRONG.format(words=_words(match.words))
    if match.kind == MatchKind.WORDS:
        return (WORDS_ONLY if match.weak else WORDS).format(words=_words(match.words))
    return NEAREST if match.weak else MEANING


def match_markdown(match: Match) -> str:
    """The relevance badge and the reason, as one line of inert Markdown (the words come from the question)."""
    label, icon, color = LEVELS[match.level]
    reranked = RERANKED + " " if match.reranked else ""
    return f":{color}-badge[{icon} {label}] {reranked}" + render.escape_markdown(reason(match))


def show_match(match: Match | None) -> None:
    """The relevance line of one source, and the weak-match warning under it; nothing for a passage without one."""
    if match is None:
        return
    st.markdown(match_markdown(match))
    if match.weak:
        head, _, rest = WEAK_NOTE.partition(": ")
        st.caption(f":material/warning: :orange[**{render.escape_markdown(head)}:** {render.escape_markdown(rest)}]")
