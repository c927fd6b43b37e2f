"""The "Linked folders" box of the Library page: link a folder, review what changed (new, changed, removed,
unchanged, with counts and names and a tick box per file), apply all or the ticked files (as upload jobs), Undo a
removal, and a badge when a check found changes ("3 files changed in Reports — review").

Nothing changes in the library until the person presses Apply. The workspace decides whether linking is possible
(the hosted demo refuses it with one sentence); nothing here knows demo from local.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import PurePath

import streamlit as st

from rag_core.core.errors import DocChatError, LinkNeedsConfirmation
from rag_core.service import render
from rag_core.service.workspace import Bucket, FolderCheck, FolderDiff, Workspace
from ui import state
from ui.safe import show_message

log = logging.getLogger(__name__)

CONFIRM_KEY = "link_confirm"  # the path whose linking waits for "Link it anyway"
UNDO_KEY = "sync_removed"  # [(doc_id, title)] removed by the last apply in this session, each with Undo
SHOWN = 50  # file names listed per bucket (the counts are whole)
BUCKET_TITLES = {Bucket.NEW: "New", Bucket.CHANGED: "Changed", Bucket.REMOVED: "Removed", Bucket.UNCHANGED: "Unchanged",
                 Bucket.WIKIPEDIA: "New revision on Wikipedia"}
ARTICLES = "Wikipedia"  # the folder name of the articles' check (rag_core.service.wiki_changes)
UNEXPECTED = "Something unexpected went wrong with the linked folder; nothing in your library was changed."


def _key(*parts: str) -> str:
    return "sync_" + hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _link(ws: Workspace, path: str, confirmed: bool) -> None:
    try:
        ws.link_folder(path, confirmed=confirmed)
    except LinkNeedsConfirmation as e:
        st.session_state[CONFIRM_KEY] = path
        state.add_notice(str(e), "warning")
        return
    except DocChatError as e:
        state.add_notice(str(e), "error")
        return
    st.session_state.pop(CONFIRM_KEY, None)


def _link_form(ws: Workspace) -> None:
    with st.form("link_folder", clear_on_submit=False, border=False):
        path = st.text_input("Folder on this computer", placeholder="/home/you/Documents/Reports", key="link_path",
                             help="DocChat reads the documents in it and its subfolders; nothing is added until you "
                                  "review the changes and press Apply.")
        if st.form_submit_button("Link folder", icon=":material/create_new_folder:") and path.strip():
            state.clear_notices()
            _link(ws, path.strip(), confirmed=False)
            st.rerun()
    waiting = st.session_state.get(CONFIRM_KEY)
    if waiting:
        yes, no, _ = st.columns([3, 2, 5])
        if yes.button("Link it anyway", key="link_anyway", type="primary"):
            state.clear_notices()
            _link(ws, waiting, confirmed=True)
            st.rerun()
        if no.button("Cancel", key="link_cancel"):
            st.session_state.pop(CONFIRM_KEY, None)
            state.clear_notices()
            st.rerun()


def _counts_line(diff: FolderDiff) -> str:
    counts = diff.counts()
    if diff.folder == ARTICLES:
        return f"{counts[Bucket.WIKIPEDIA]} with a new revision · {counts[Bucket.UNCHANGED]} up to date"
    return " · ".join(f"{counts[b]} {b}" for b in Bucket if b != Bucket.WIKIPEDIA)


def _review(ws: Workspace, diff: FolderDiff) -> None:
    """The buckets with a tick box per file, and Apply."""
    st.markdown(f"**{render.escape_markdown(diff.summary())}** — {_counts_line(diff)}")
    ticked: list[str] = []
    for bucket in (Bucket.NEW, Bucket.CHANGED, Bucket.REMOVED, Bucket.WIKIPEDIA):
        files = diff.bucket(bucket)
        if not files:
            continue
        st.caption(f"{BUCKET_TITLES[bucket]} ({len(files)})")
        for c in files[:SHOWN]:
            if st.checkbox(render.escape_markdown(c.shown), value=True, key=_key(diff.folder, diff.checked_at, c.rel)):
                ticked.append(c.rel)
        ticked.extend(c.rel for c in files[SHOWN:])  # not listed: applied with the others
        if len(files) > SHOWN:
            st.caption(f"… and {len(files) - SHOWN} more {bucket} files, applied with these.")
    unchanged = diff.bucket(Bucket.UNCHANGED)
    if unchanged:
        names = ", ".join(c.shown for c in unchanged[:10]) + (" …" if len(unchanged) > 10 else "")
        st.caption(render.escape_markdown(f"Unchanged ({len(unchanged)}): {names}"))
    if diff.pending and st.button(f"Apply {render.plural(len(ticked), 'change')}", key=_key("apply", diff.folder),
                                  type="primary", disabled=not ticked, icon=":material/sync:"):
        _apply(ws, diff, ticked)


def _apply(ws: Workspace, diff: FolderDiff, ticked: list[str]) -> None:
    state.clear_notices()
    try:
        applied = ws.apply_folder_changes(diff, ticked)
    except DocChatError as e:
        state.add_notice(str(e), "error")
        st.rerun()
    for job_id in applied.job_ids:
        state.remember_job(job_id)
    st.session_state[UNDO_KEY] = [(d.doc_id, d.title or d.file_name) for d in applied.removed]
    for sentence in applied.failed:
        state.add_notice(sentence, "error")
    st.rerun()


def _undo_area(ws: Workspace) -> None:
    """Removed documents of the last apply, each with Undo."""
    for doc_id, title in list(st.session_state.get(UNDO_KEY) or []):
        text, undo = st.columns([8, 2], vertical_alignment="center")
        text.info(f"Removed “{render.escape_markdown(title)}” from your library (its file is gone from the folder).",
                  icon=":material/delete:")
        if undo.button("Undo", key=_key("undo", doc_id), icon=":material/undo:"):
            try:
                ws.restore_document(doc_id)
            except DocChatError as e:
                state.add_notice(str(e), "info")
            st.session_state[UNDO_KEY] = [(d, t) for d, t in st.session_state[UNDO_KEY] if d != doc_id]
            st.rerun()


def _removed_list(ws: Workspace) -> None:
    """Every document of a removed file that can still be brought back (kept 30 days, then purged)."""
    shown = {d for d, _ in st.session_state.get(UNDO_KEY) or []}
    docs = [d for d in ws.removed_documents() if d.doc_id not in shown]
    if not docs:
        return
    with st.expander(f"Removed from linked folders ({len(docs)})", icon=":material/delete:"):
        for doc in docs[:SHOWN]:
            text, undo = st.columns([8, 2], vertical_alignment="center")
            text.markdown(render.escape_markdown(doc.title or doc.file_name))
            if undo.button("Undo", key=_key("restore", doc.doc_id), icon=":material/undo:"):
                try:
                    ws.restore_document(doc.doc_id)
                except DocChatError as e:
                    state.add_notice(str(e), "info")
                st.rerun()


def _folder(ws: Workspace, path: str, check: FolderCheck | None) -> None:
    name = check.name if check else (PurePath(path).name or path)
    badge = ""
    if check and check.needs_review:
        badge = f" — {check.diff.summary() if check.diff else 'cannot be read'}"
    with st.expander(render.escape_markdown(f"{name}{badge}"), icon=":material/folder:",
                     expanded=bool(check and check.needs_review)):
        st.caption(render.escape_markdown(path))
        again, unlink, _ = st.columns([3, 2, 5])
        if again.button("Check for changes", key=_key("check", path), icon=":material/refresh:"):
            with st.spinner("Comparing the folder with your library…"):
                ws.check_folder(path)  # a folder that cannot be read: its check says so
            st.rerun()
        if unlink.button("Unlink", key=_key("unlink", path), type="tertiary",
                         help="Stop following this folder; its documents stay in your library."):
            try:
                ws.unlink_folder(path)
            except DocChatError as e:
                state.add_notice(str(e), "error")
            st.rerun()
        _check_result(ws, check)


def _check_result(ws: Workspace, check: FolderCheck | None) -> None:
    """A folder's (or the articles') last check: not yet, its one-sentence error, or the review with its notes."""
    if check is None:
        st.caption("Not checked yet in this run of DocChat.")
    elif check.error:
        show_message(check.error, "warning")
    elif check.diff is not None:
        _review(ws, check.diff)
        for note in check.diff.notes:
            st.caption(render.escape_markdown(note))


def _articles(ws: Workspace, check: FolderCheck | None) -> None:
    """The imported Wikipedia articles in the same review: their own bucket, checked on demand (it asks Wikipedia)."""
    badge = f" — {check.diff.summary()}" if check and check.diff and check.diff.pending else ""
    with st.expander(render.escape_markdown(f"Wikipedia articles{badge}"), icon=":material/public:",
                     expanded=bool(badge)):
        if st.button("Check Wikipedia for new revisions", key="sync_wiki_check", icon=":material/refresh:"):
            try:
                with st.spinner("Asking Wikipedia for the latest revisions…"):
                    ws.check_wikipedia_articles()
            except DocChatError as e:  # the hosted demo: its articles are checked in the Wikipedia box
                state.add_notice(str(e), "info")
            st.rerun()
        _check_result(ws, check)


def folder_sync_box(ws: Workspace, has_articles: bool = False) -> None:
    """The linked folders: a badge per folder whose last check found changes, the review, linking another; with
    `has_articles`, the imported Wikipedia articles' new revisions in the same review."""
    checks = {c.folder: c for c in ws.folder_checks()}
    for c in checks.values():
        if c.needs_review:
            what = c.diff.summary() if c.diff else f"{c.name} cannot be read"
            st.warning(f"{render.escape_markdown(what)} — review below.", icon=":material/sync_problem:")
    st.subheader("Linked folders")
    _undo_area(ws)
    for link in ws.linked_folders():
        _folder(ws, link.path, checks.get(link.path))
    if has_articles:
        _articles(ws, checks.get(ARTICLES))
    _removed_list(ws)
    _link_form(ws)
