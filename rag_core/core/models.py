"""The data contract that flows through the pipeline: Document -> Section -> Chunk; Passage -> Answer."""
from __future__ import annotations

import bisect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

#: A progress callback: (stage, done, total), e.g. ("embedding", 120, 354). Every long step takes one.
Progress = Callable[[str, int, int], None]


class IngestStatus(StrEnum):
    """What happened to one file added to the library (equal to the strings earlier releases used)."""

    ADDED = "added"
    UNCHANGED = "unchanged"  # already in the library
    FAILED = "failed"  # with one sentence saying why
    STOPPED = "stopped"  # by hand (the Stop button); nothing of it was kept


class DocKind(StrEnum):
    """What a document is (SourceMeta.kind): each value is the string stored with its passages, so saved libraries
    read the same. The kinds of file DocChat reads, with their names and extensions, are in rag_core.core.formats."""

    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"
    CSV = "csv"  # .csv and .tsv
    HTML = "html"
    EPUB = "epub"
    ODT = "odt"
    ODP = "odp"
    ODS = "ods"
    RTF = "rtf"
    IMAGE = "image"  # a photo or scan of pages (PNG, JPEG, TIFF, WebP), read by OCR
    TXT = "txt"
    MD = "md"
    WIKIPEDIA = "wikipedia"  # an article imported from Wikipedia, not a file


class AnswerMode(StrEnum):
    """What happened: the model wrote the answer, it quotes the documents, or the documents do not answer it."""

    MODEL = "model"
    QUOTES = "quotes"
    NOT_FOUND = "not_found"

    @classmethod
    def read(cls, value: str) -> AnswerMode:
        """The mode saved by this or an earlier release ("ollama" and "extractive" before 0.4); ValueError otherwise."""
        return cls(_SAVED_MODES.get(value, value))


_SAVED_MODES = {"ollama": "model", "extractive": "quotes"}


class CitationStatus(StrEnum):
    """How a citation (or a sentence) is backed, as the evidence check and the instruction check decided."""

    CITED = "cited"  # not checked yet
    VERIFIED = "verified"  # the model cited [n] and passage n holds the evidence
    UNSUPPORTED = "unsupported"  # the model cited [n] but passage n does not back the sentence it was written after
    MATCHED = "matched"  # the model wrote no (valid) marker; this passage backs the sentence
    FLAGGED = "flagged"  # backed, but the passage contains instructions addressed to an AI
    NO_CLAIM = "no_claim"  # sentences only: nothing to check (a heading line, a refusal, a question, filler)


class Step(StrEnum):
    """Where an answer run is: each is reported once, in this order (done, stopped or failed last)."""

    SEARCHING = "searching"
    READ = "read"  # the passages are found (StageEvent.passages)
    WAITING = "waiting"  # for the model's first word
    WRITING = "writing"
    CHECKING = "checking"  # the draft against the passages
    DONE = "done"
    STOPPED = "stopped"
    FAILED = "failed"


class Provider(StrEnum):
    """Who serves the chat model: the prefix of DOCCHAT_CHAT_MODEL ("ollama:llama3.2:3b")."""

    OLLAMA = "ollama"
    OPENAI = "openai"  # any OpenAI-compatible server (OPENAI_BASE_URL)


class Role(StrEnum):
    """Who said a turn of a conversation (the strings conversation files hold)."""

    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class ChatTurn:
    """One earlier turn of a conversation, as a follow-up question's context (the question's history)."""

    role: Role
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", Role(self.role))  # "user" as Role.USER; ValueError for any other role


# Namespace for deterministic Qdrant point ids (uuid5 of "doc_id:index").
_POINT_NS = uuid.UUID("6b1f3c1e-6a39-4c5e-9d55-8f0f1b5a2c11")


@dataclass(frozen=True)
class SourceMeta:
    """Where a document came from; copied onto every chunk."""

    file_name: str
    title: str
    kind: str  # a DocKind value ("pdf", "pptx", "wikipedia", ...); a plain string as saved with the passages
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
    # are part of `text` too. rag_core.injection.detect counts them as a cue when it flags chunks.
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
    instructions: bool = False  # the text holds instructions addressed to an AI (rag_core.injection.detect, set at ingest)

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


class MatchKind(StrEnum):
    """Why retrieval chose a passage, in a reader's terms (rag_core.retrieve.search decides it; docs/retrieval.md)."""

    WORDS = "words"  # it contains words of the question (stop words aside) but is not close to it in meaning
    MEANING = "meaning"  # it has none of the question's words: the search by meaning found it
    BOTH = "both"  # the question's words, and close to it in meaning


class MatchLevel(StrEnum):
    """How close a passage is to the question in meaning, as a plain level (from Match.cosine)."""

    HIGH = "high"  # about the question (the answerability check's "on topic" bar)
    MEDIUM = "medium"
    LOW = "low"  # below DOCCHAT_MIN_RELEVANCE: as the best passage, the reply would be "not in your documents"


@dataclass(frozen=True)
class Match:
    """Why and how well a retrieved passage matches the question (set by rag_core.retrieve.search, every method)."""

    kind: MatchKind
    level: MatchLevel
    cosine: float | None = None  # the passage's dense (meaning) cosine similarity to the question
    lexical: float | None = None  # its BM25 score when the search by words returned it (None: not in that list)
    words: tuple[str, ...] = ()  # the question's words it contains, as the question writes them
    reranked: bool = False  # its place among the passages was set by the reranker (DOCCHAT_RERANKER)

    @property
    def weak(self) -> bool:
        """The passage is far from the question in meaning: it may not answer it."""
        return self.level == MatchLevel.LOW


@dataclass(frozen=True)
class Passage:
    """A retrieved chunk with its retrieval score (the ranking's own: fused, cosine or BM25) and why it was chosen."""

    chunk: Chunk
    score: float
    match: Match | None = None  # None: not from a search (a whole-document answer), or saved by an earlier release


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
    status: CitationStatus = CitationStatus.CITED
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
    status: CitationStatus  # any but CITED and FLAGGED
    cited: tuple[int, ...] = ()  # the [n] the model wrote for it
    supported_by: tuple[int, ...] = ()  # the n whose passage holds its evidence (a cited one, or a match)
    support: float = 0.0  # score of the best evidence span found (0..1)


@dataclass(frozen=True)
class Answer:
    """A reply: its text, the citations it really uses and every passage that was retrieved."""

    text: str
    mode: AnswerMode
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

    def unbacked(self) -> tuple[SentenceCheck, ...]:
        """The sentences that cite [n] but that none of their cited passages backs (unsupported, or backed only by a
        passage they did not cite): the ones a reader must be warned about."""
        return tuple(ch for ch in self.sentences
                     if ch.cited and ch.status in (CitationStatus.UNSUPPORTED, CitationStatus.MATCHED))

    def flagged(self) -> tuple[Citation, ...]:
        """The citations whose passage contains instructions addressed to an AI."""
        return tuple(c for c in self.citations if c.passage.chunk.instructions)


@dataclass(frozen=True)
class RetrievalTest:
    """What the Settings page's retrieval test shows: a question's ranked passages, each with its Match, found without
    asking a model; or one friendly sentence when there is nothing to rank (no question, an empty library)."""

    question: str
    passages: tuple[Passage, ...] = ()
    message: str | None = None
    low_below: float = 0.0  # the cosines that bound the levels: LOW below this one, HIGH from the next
    high_from: float = 0.0


@dataclass(frozen=True)
class StageEvent:
    """One step of an answer run, as it happens: what, when (monotonic seconds), from READ on the passages, and what
    a long run says about this step ("Reading section 3 of 11…"; empty: the step says it)."""

    step: Step
    at: float
    passages: tuple[Passage, ...] = ()
    note: str = ""
