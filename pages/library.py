"""Library page: add files (drag and drop), follow their progress, browse, search and delete documents."""
from __future__ import annotations

from collections import Counter
from pathlib import PurePath

import streamlit as st

from rag_core.core.errors import DocumentNotFound, LimitReached, SampleReadOnly
from rag_core.core.formats import ACCEPTED_EXTENSIONS, accepted_kinds, format_for_name
from rag_core.core.models import DocKind, DocumentInfo, IngestStatus
from rag_core.service import render
from rag_core.service.workspace import JobKind, JobView
from ui import state
from ui.folder_sync import folder_sync_box
from ui.navigation import require_app_entry
from ui.safe import guarded, show_message
from ui.sources import show_details
from ui.summarize import library_button as summarize_button
from ui.wikipedia import wiki_job_result, wikipedia_box

FILE_TYPES = [ext.lstrip(".") for ext in ACCEPTED_EXTENSIONS]  # every kind DocChat reads (rag_core.core.formats)
WAITING_TEXT = "Waiting for its turn…"
WAITING_ICON = ":material/hourglass_top:"
STOPPING_TEXT = "Stopping… nothing of it will be kept."
LIVE_EVERY_S = 0.5  # how often the list redraws itself while files are being added
STAGE_TEXT = {
    "": "Starting…",
    "reading": "Reading the file…",
    "ocr": "Reading scanned pages (OCR)…",
    "chunking": "Splitting it into passages…",
    "embedding": "Learning what each passage is about…",
    "saving": "Saving to your library…",
    "downloading": "Downloading the article…",
    "checking": "Asking Wikipedia for the latest revisions…",
}
RUNNING_LABEL = {JobKind.FILE: "Adding **{}**", JobKind.WIKIPEDIA: "Importing **{}**",
                 JobKind.REFRESH: "Checking **{}** for updates"}
LIST_LIMIT = 100
SAMPLE_BADGE = ":gray-badge[:material/lock: Sample (shared, read-only)]"

require_app_entry()
st.title("Your library")  # painted before the slow parts below (model and library load)
ws = state.workspace()  # this browser session's view: its documents, its limits
if ws.banner:
    show_message(ws.banner, "info")
st.caption(ws.intro)


# -- adding files -----------------------------------------------------------------
def _submit(files) -> None:
    state.clear_notices()
    for f in files:
        try:  # limits are checked (and room reserved) now, so a limit is said at once, before any work
            state.remember_job(ws.add_file(f.getvalue(), f.name))
        except LimitReached as e:
            name = f.name.replace("\\", "/").rsplit("/", 1)[-1]
            state.add_notice(str(e) if name in str(e) else f"“{name}” was not added. {e}")
    st.session_state["uploader_gen"] = st.session_state.get("uploader_gen", 0) + 1


def _job_box(job: JobView) -> None:
    """One file's state: an hourglass while it waits, a spinner with progress while it runs, a tick when added, an
    open error box (its sentence in view) when it failed."""
    name = render.escape_markdown(job.label)
    label = RUNNING_LABEL.get(job.kind, RUNNING_LABEL["file"]).format(name)
    if job.queued:
        with st.expander(label, expanded=True, icon=WAITING_ICON):
            st.progress(0.0, text=WAITING_TEXT)
        _stop_button(job)
        return
    if job.running:  # not `with st.status(...)`: leaving that block turns its spinner into a tick
        text = STOPPING_TEXT if job.stopping else STAGE_TEXT.get(job.stage, STAGE_TEXT[""])
        st.status(label, state="running", expanded=True).progress(job.fraction, text=text)
        if not job.stopping:  # pressed already: it ends within a second or two
            _stop_button(job)
        return
    r = job.result
    if r is None:
        return
    if job.kind in (JobKind.WIKIPEDIA, JobKind.REFRESH):
        wiki_job_result(job, ws)
        return
    if r.status == IngestStatus.ADDED:
        fmt = format_for_name(job.label)  # "12 slides" for a presentation
        pages = f"{render.pages_label(fmt.kind if fmt else '', r.pages)}, " if r.pages else ""
        with st.status(f"Added **{name}** — {pages}{render.plural(r.chunks, 'passage')}", state="complete"):
            st.write("You can now ask questions about it on the Chat page.")
    elif r.status == IngestStatus.UNCHANGED:
        with st.status(f"**{name}** is already in your library", state="complete"):
            st.write("Nothing was changed.")
    elif r.status == IngestStatus.STOPPED:
        st.info(render.message_markdown(r.error or f"Adding {name} was stopped; nothing was added."),
                icon=":material/stop_circle:")
    else:
        st.error(render.message_markdown(r.error or "The file could not be added."), icon=":material/error:",
                 title=f"Could not add {name}")
        if getattr(r, "details", ""):
            show_details(r.details)


def _stop_button(job: JobView) -> None:
    """Stop beside a queued or running file: it ends within a second or so and nothing of it is kept (not for
    Wikipedia jobs: their download has a timer of its own that Stop does not reach)."""
    if job.kind == "file" and st.button("Stop", key=f"stop_{job.id}", icon=":material/stop:", type="tertiary",
                 help="Stop adding this file; your library stays as it was."):
        ws.cancel_job(job.id)
        st.rerun()


def _jobs_area() -> bool:
    """This person's files being added and recently finished, whichever tab or session added them (a reload
    shows them too); True while some are not finished."""
    jobs = ws.jobs()
    for job in jobs:
        with guarded(f"the result of job {job.id}"):
            _job_box(job)
    finished = [j.id for j in jobs if j.finished]
    if finished and st.button("Clear these messages", key="clear_jobs", icon=":material/close:", type="tertiary",
                              help="Hide the results above (files still being added stay)."):
        ws.forget_jobs(finished)
        st.session_state[state.UPLOAD_JOBS] = []
        state.clear_notices()
        st.rerun()
    return len(finished) < len(jobs)


@st.fragment(run_every=LIVE_EVERY_S)
def _live_jobs() -> None:
    """Redraws itself twice a second while files are being added; a full rerun refreshes the list at the end."""
    if not _jobs_area():
        st.rerun()


limits = ws.limits()
max_mb = limits.max_file_mb
files = st.file_uploader(
    "Add documents: drag files onto this box, or click Upload",
    type=FILE_TYPES,
    accept_multiple_files=True,
    key=f"uploader_{st.session_state.get('uploader_gen', 0)}",
    max_upload_size=max_mb,
    help=f"{accepted_kinds(extensions=True)} files, up to {max_mb} MB each.",
)
if files:
    _submit(files)
    st.rerun()
if limits.usage_line:
    st.caption(":material/data_usage: " + render.message_markdown(limits.usage_line))
kept = state.notices()
for kind, text in kept:
    show_message(text, kind)
if kept and st.button("Dismiss", key="dismiss_notices", icon=":material/close:", type="tertiary"):
    state.clear_notices()
    st.rerun()

docs = ws.documents()
with guarded("the Wikipedia box"):
    wikipedia_box(ws, has_articles=ws.has_own_articles(docs))  # the shared samples are never refreshed
with guarded("the linked folders"):
    folder_sync_box(ws, has_articles=ws.has_own_articles(docs))  # review changes, apply them as upload jobs

if any(not j.finished for j in ws.jobs()):
    _live_jobs()
else:
    _jobs_area()


# -- the document list --------------------------------------------------------------
def _delete(doc: DocumentInfo) -> None:
    st.session_state.pop("confirm_delete", None)
    state.clear_notices()
    try:
        ws.delete(doc.doc_id)  # the chunks and the saved original go with it
    except SampleReadOnly as e:
        state.add_notice(str(e))
        return
    except DocumentNotFound:  # already gone: deleted in another tab, or by the demo's idle cleanup
        state.add_notice(f"“{doc.title or doc.file_name}” is no longer in your library, so there was nothing to "
                            "delete.", "info")
        return
    st.session_state["deleted_title"] = doc.title


def _title(doc: DocumentInfo) -> str:
    return doc.title or doc.file_name or "Untitled"


def _repeated_titles(docs: list[DocumentInfo]) -> set[str]:
    """The titles (case-folded) that more than one document has: those rows also show their file names."""
    counts = Counter(" ".join(_title(d).split()).casefold() for d in docs)
    return {t for t, n in counts.items() if n > 1}


def _shows_file_name(doc: DocumentInfo, repeated: set[str]) -> bool:
    """The row names the file too when the title is the document's own (people look for the file they added), and
    when two documents share a title (two versions of one report); not for a Wikipedia article."""
    title = " ".join(_title(doc).split()).casefold()
    stem = PurePath(doc.file_name).stem.casefold() if doc.file_name else title
    return doc.kind != DocKind.WIKIPEDIA and bool(doc.file_name) and (title in repeated or title != stem)


def _doc_row(doc: DocumentInfo, repeated: set[str]) -> None:
    # The file name under the title; with the time added it tells apart two documents of the same title.
    file_name = doc.file_name if _shows_file_name(doc, repeated) else ""
    with st.container(border=True):
        main, summarize, action = st.columns([7, 2, 1], vertical_alignment="center")
        with main:
            title = f"**{render.escape_markdown(_title(doc))}**"
            url = render.safe_wikipedia_url(doc.url) if doc.kind == DocKind.WIKIPEDIA else None
            if url:
                title += " · " + render.link_markdown("Wikipedia", url) + " :material/open_in_new:"
            if ws.is_read_only(doc):
                title += " " + SAMPLE_BADGE
            st.markdown(title)
            bits = [file_name] if file_name else []
            bits.append(render.kind_label(doc.kind))
            if doc.pages:
                bits.append(render.pages_label(doc.kind, doc.pages))
            bits.append(render.plural(doc.chunks, "passage"))
            added = render.date_label(doc.added_at)
            if added:
                bits.append(f"added {added}")
            if doc.kind == DocKind.WIKIPEDIA and doc.revision_id:
                bits.append(f"revision {doc.revision_id} · CC BY-SA 4.0")
            if "removed upstream" in doc.flags:
                bits.append("no longer on Wikipedia")
            st.caption(render.escape_markdown(" · ".join(bits)))
        with summarize:
            summarize_button(doc)  # a new conversation in the chat, scoped to this document, asking for its summary
        if ws.is_read_only(doc):  # shared by every visitor: nobody can remove it, so no Delete button
            return
        with action:
            if st.button("Delete", key=f"del_{doc.doc_id}", icon=":material/delete:", type="tertiary",
                         help="Remove this document from your library"):
                st.session_state["confirm_delete"] = doc.doc_id
        if st.session_state.get("confirm_delete") == doc.doc_id:
            which = f" ({render.escape_markdown(file_name)})" if file_name else ""
            st.warning(f"Delete **{render.escape_markdown(_title(doc))}**{which} from your library? "
                       "You can add it again later.", icon=":material/delete:")
            yes, no, _ = st.columns([2, 2, 6])
            yes.button("Yes, delete it", key=f"yes_{doc.doc_id}", type="primary", on_click=_delete, args=(doc,))
            if no.button("Cancel", key=f"no_{doc.doc_id}"):
                st.session_state.pop("confirm_delete", None)
                st.rerun()


if "deleted_title" in st.session_state:
    st.toast(f"Deleted “{render.escape_markdown(st.session_state.pop('deleted_title'))}”.", icon=":material/delete:")

st.subheader(f"In your library ({len(docs)})" if docs else "In your library")
if not docs:
    st.info(f"Your library is empty. Drop {accepted_kinds()} files in the box above to get started.",
            icon=":material/upload_file:")
else:
    wanted = (st.text_input("Search titles", placeholder="Search by title", key="title_filter", type="search",
                            live=True, label_visibility="collapsed", icon=":material/search:") or "").strip().casefold()
    shown = [d for d in docs if not wanted or wanted in (d.title or "").casefold()
             or wanted in (d.file_name or "").casefold()]
    if not shown:
        st.caption("No title matches your search.")
    repeated = _repeated_titles(docs)
    for doc in shown[:LIST_LIMIT]:
        with guarded(f"the library entry {doc.doc_id}"):  # one odd entry never hides the others
            _doc_row(doc, repeated)
    if len(shown) > LIST_LIMIT:
        st.caption(f"Showing the newest {LIST_LIMIT} of {len(shown)}. Search by title to find the others.")
