"""DocChat: the Streamlit entry point. Thin: widgets and session state only; logic lives in rag_core."""
import streamlit as st

st.set_page_config(page_title="DocChat", page_icon="📚", layout="wide")

pages = [
    st.Page("pages/library.py", title="Library", icon="📚", default=True),
]
st.navigation(pages).run()
