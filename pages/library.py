"""Library page: the documents in your library."""
import streamlit as st

from ui_state import get_library

st.title("Your library")
library = get_library()
docs = library.documents()
if not docs:
    st.info("Your library is empty. Add files with `python -m rag_core ingest FILE...`.")
else:
    st.dataframe(
        [{"Title": d.title, "Kind": d.kind, "Pages": d.pages, "Chunks": d.chunks, "Added": d.added_at} for d in docs],
        hide_index=True,
    )
