"""Streamlit glue for DocChat's pages: session state, source cards, the Wikipedia box, navigation."""
