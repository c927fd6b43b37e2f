"""Kept for one release: the LangChain adapters moved to rag_core/adapters/langchain.py (import them from there)."""
from rag_core.adapters.langchain import DocChatRetriever, DocChatVectorStore, passage_to_document

__all__ = ["DocChatRetriever", "DocChatVectorStore", "passage_to_document"]
