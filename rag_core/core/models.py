"""The data contract that flows through the pipeline: Document -> Section -> Chunk; Passage -> Answer."""
from __future__ import annotations

import bisect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

#: A progress callback: (stage, done, total), e.g. ("embedding", 120, 354). Every long step takes one.
Progress = Callable[[str, int, int], None]

# Namespace for deterministic Qdrant point ids (uuid5 of "doc_id:index").
_POINT_NS = uuid.UUID("6b1f3c1e-6a39-4c5e-9d55-8f0f1b5a2c11")


@dataclass(frozen=True)
class SourceMeta:
    """Where a document came from; copied onto every chunk."""

    file_name: str
    title: str
    kind: str  # "pdf" | "docx" | "txt" | "md" | "wikipedia"
    sha256: str  # of the original bytes (files) or of the extracted text (Wikipedia)
    added_at: str = ""  # ISO-8601 UTC, stamped by the library when stored
    url: str | None = None
    license: str | None = None
    revision_id: int | None = None
    retrieved_at: str | None = None
    lang: str | None = None
    page_id: int | None = None
    scanned_pages: str = ""  # pages whose text was recognised from a scan (OCR), as ranges: "1-3,7"

    def scanned(self, first: int | None, last: int | None) -> bool:
        """Whether any page from `first` to `last` (1-based) had its text recognised from a scan."""
        if not self.scanned_pages or first is None:
            return False
        last = first if last is None else last
        for part in self.scanned_pages.split(","):
            low, _, high = part.partition("-")
            if low.isdigit() and (high or low).isdigit() and int(low) <= last and first <= int(high or low):
                return True
        return False


@dataclass(frozen=True)
class Section:
    """A structural part of a document: a range of Document.text under one heading path."""

    heading_path: tuple[str, ...]
    char_start: int
    char_end: int
    anchor: str | None = None  # e.g. a Wikipedia section anchor


@dataclass(frozen=True)
class Document:
    """A loaded document: its full extracted text, its sections (ranges of that text) and pages."""

    doc_id: str
    text: str
    sections: tuple[Section, ...]
    source: SourceMeta
    page_count: int | None = None
    # Character offset in `text` at which each page begins (page 1 first); empty if not paged.
    page_starts: tuple[int, ...] = ()
    # Runs of text the loader saw drawn invisibly (white or tiny text in a PDF, hidden or white runs in Word); they
    # are part of `text` too. rag_core.answer.injection.detect counts them as a cue when it flags chunks.
    hidden_text: tuple[str, ...] = ()

    def page_at(self, offset: int) -> int | None:
        """1-based page number containing character `offset`, or None for unpaged documents."""
        if not self.page_starts:
            return None
        return max(1, bisect.bisect_right(self.page_starts, offset))


@dataclass(frozen=True)
class Chunk:
    """A retrievable piece of a document with everything needed to cite it."""

    doc_id: str
    index: int
    text: str
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None
    heading_path: tuple[str, ...]
    source: SourceMeta
    anchor: str | None = None
    instructions: bool = False  # the text holds instructions addressed to an AI (rag_core.answer.injection.detect, set at ingest)

    @property
    def point_id(self) -> str:
        """Deterministic Qdrant point id: same document and index -> same id."""
        return str(uuid.uuid5(_POINT_NS, f"{self.doc_id}:{self.index}"))

    @property
    def section(self) -> str:
        """Heading path joined for display ("" when the chunk has none)."""
        return " › ".join(self.heading_path)

    @property
    def from_scan(self) -> bool:
        """The chunk's text (or part of it) was recognised from a scanned page by OCR."""
        return self.source.scanned(self.page_start, self.page_end)


@dataclass(frozen=True)
class Passage:
    """A retrieved chunk with its retrieval score."""

    chunk: Chunk
    score: float


@dataclass(frozen=True)
class DocumentInfo:
    """One entry of the library listing."""

    doc_id: str
    title: str
    kind: str
    pages: int | None
    chunks: int
    added_at: str
    file_name: str = ""
    url: str | None = None
    sha256: str = ""
    revision_id: int | None = None
    lang: str | None = None
    page_id: int | None = None
    owner: str | None = None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Citation:
    """An answer's reference [n] resolved to the passage it points at."""

    n: int
    passage: Passage
    status: str = "cited"  # "cited" | "verified" | "unsupported" | "matched" | "flagged" (rag_core.answer.injection.detect)
    evidence_start: int | None = None  # span inside passage text
    evidence_end: int | None = None
    # Set by rag_core.answer.grounding.evidence: how well the evidence span backs the sentence (0..1), and the spans of
    # Answer.text this citation backs ("verified"/"matched") or was written after ("unsupported").
    support: float | None = None
    answer_spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class SentenceCheck:
    """How one sentence of an answer is backed by the passages (set by rag_core.answer.grounding.evidence)."""

    start: int  # span inside Answer.text, citation markers included
    end: int
    status: str  # "verified" | "matched" | "unsupported" | "no_claim"
    cited: tuple[int, ...] = ()  # the [n] the model wrote for it
    supported_by: tuple[int, ...] = ()  # the n whose passage holds its evidence (a cited one, or a match)
    support: float = 0.0  # score of the best evidence span found (0..1)


@dataclass(frozen=True)
class Answer:
    """A reply: its text, the citations it really uses and every passage that was retrieved."""

    text: str
    mode: str  # "ollama" | "extractive" | "not_found"
    citations: tuple[Citation, ...] = ()
    passages: tuple[Passage, ...] = ()
    incomplete: bool = False
    notice: str | None = None  # one friendly sentence explaining the mode or a fault
    invalid_markers: int = 0
    question: str = ""
    standalone_question: str = ""
    extra: dict = field(default_factory=dict, compare=False)
    relevance: float | None = None  # dense cosine of the best passage in scope (the honesty check)
    context_passages: int = 0  # passages[:context_passages] were numbered [1..] for the model
    sentences: tuple[SentenceCheck, ...] = ()  # per-sentence evidence, filled by rag_core.answer.grounding.evidence.verify_answer
