"""DocChat: the Streamlit entry point. Thin: navigation, widgets and session state; logic lives in rag_core."""
import os

# Everything runs offline: the embedding model ships as a Python package, never from the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import streamlit as st

from ui.navigation import app_pages, mark_app_entry
from ui.quiet_logs import quiet_streamlit_logs
from ui.safe import guarded

quiet_streamlit_logs()  # no line that looks like an error in the terminal when nothing is wrong
mark_app_entry()
st.set_page_config(page_title="DocChat", page_icon="💬", layout="wide")
with guarded("a page"):  # the last line of defence: whatever escapes a page is one sentence, never a traceback
    st.navigation(app_pages()).run()
