"""DocChat core: loading, chunking, embedding, storing, retrieving and answering. No Streamlit here."""
