"""The hosted demo's shared sample library: the bundled files under samples/ (any kind DocChat reads, and recorded
Wikipedia extracts as JSON), read from local files only."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError
from rag_core.core.formats import ACCEPTED_EXTENSIONS
from rag_core.core.models import Document, SourceMeta
from rag_core.ingest.loaders import load_bytes
from rag_core.sources.wikipedia import LICENSE, article_url, split_sections

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
SAMPLE_SUFFIXES = (*ACCEPTED_EXTENSIONS, ".json")


def sample_files(folder: Path) -> list[Path]:
    """The sample files of `folder`, sorted (READMEs and other kinds are skipped)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SAMPLE_SUFFIXES
                  and not p.name.upper().startswith("README"))


def sample_document(data: bytes, file_name: str, settings: Settings) -> Document:
    """A Document from one sample file's bytes."""
    if file_name.lower().endswith(".json"):
        return recorded_wikipedia(data, file_name)
    return load_bytes(data, file_name, settings)


def recorded_wikipedia(data: bytes, file_name: str) -> Document:
    """A Document from a recorded MediaWiki prop=extracts response (plain text with == headings ==)."""
    try:
        page = next(iter(json.loads(data)["query"]["pages"].values()))
        title, text, page_id = page["title"], page["extract"], int(page["pageid"])
    except (ValueError, KeyError, StopIteration, TypeError) as e:
        raise DocChatError(f"The sample “{file_name}” is not a recorded Wikipedia extract.") from e
    lang = "en"
    source = SourceMeta(file_name=title, title=title, kind="wikipedia",
                        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), url=article_url(lang, title),
                        license=LICENSE, lang=lang, page_id=page_id)
    doc_id = "wp-sample-" + hashlib.sha256(f"{lang}:{page_id}:{source.sha256}".encode()).hexdigest()[:16]
    return Document(doc_id=doc_id, text=text, sections=split_sections(text), source=source)
