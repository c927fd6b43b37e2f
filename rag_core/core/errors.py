"""User-facing errors: every message is safe to show and says what to do.

Every error of DocChat is importable from here. The root, DocChatError, lives in rag_core.core.error_base, and the
errors about one file that could not be added (IngestError and its kinds) in rag_core.core.ingest_errors; this module
holds the others: settings, the library's storage, the language model, Wikipedia and the hosted demo.
"""
from __future__ import annotations

import shlex

from rag_core.core.error_base import DocChatError, duration
from rag_core.core.ingest_errors import (
    CorruptFile,
    EmptyFile,
    EncryptedFile,
    FileTooLarge,
    ImageTooLarge,
    IngestCancelled,
    IngestError,
    IngestTimedOut,
    NotARegularFile,
    NoText,
    NoTextLayer,
    ReaderOutOfMemory,
    ScanTooLong,
    TooManyPassages,
    UnsupportedFileType,
)
from rag_core.core.models import Provider
from rag_core.core.sync_errors import (
    FolderNotFound,
    FolderNotLinked,
    FolderReplaced,
    FolderScanTooSlow,
    FolderSyncError,
    FolderTooLarge,
    FolderUnreadable,
    LinkingRefused,
    LinkNeedsConfirmation,
    NotAFolder,
    SystemFolderRefused,
)

__all__ = [  # every error, wherever it is defined
    "DocChatError", "SettingsError", "IngestError", "UnsupportedFileType", "EmptyFile", "FileTooLarge",
    "NotARegularFile", "TooManyPassages", "ReaderOutOfMemory", "IngestTimedOut", "ScanTooLong", "IngestCancelled", "EncryptedFile",
    "CorruptFile", "NoTextLayer", "NoText", "EmbeddingModelMismatch", "LibraryBusy", "LibraryUpgradeFailed",
    "StoreUnavailable", "StorageError", "DiskFull", "DocumentNotFound", "ConversationUnreadable", "LLMError",
    "OllamaUnavailable", "WrongServer", "ModelNotPulled", "LLMTimeout", "StreamInterrupted", "LimitReached", "WikipediaError",
    "OllamaRefused", "OllamaFailed", "ContextTooSmall", "ModelPullFailed", "WikipediaBadLanguage", "WikipediaBadTitle",
    "WikipediaPageMissing", "WikipediaUnreachable", "WikipediaTimeout", "WikipediaRateLimited",
    "WikipediaServerError", "WikipediaRequestRejected", "WikipediaBadResponse", "WikipediaTooSlow",
    "WikipediaResponseTooLarge", "WikipediaAPIError", "SampleReadOnly", "DemoTrouble", "ImageTooLarge",
    "FolderSyncError", "FolderNotFound", "NotAFolder", "FolderUnreadable", "FolderTooLarge", "FolderScanTooSlow",
    "LinkingRefused", "LinkNeedsConfirmation", "FolderNotLinked", "FolderReplaced", "SystemFolderRefused",
]


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
    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"The model did not answer within {duration(seconds)}. It may still be starting up; try again in a "
            "moment.", seconds=seconds,
            details=f"The waiting time is set by DOCCHAT_LLM_TIMEOUT (now {seconds:g} s); raise it for a slow computer.",
        )


class StreamInterrupted(LLMError):
    def __init__(self, server: str = "Ollama") -> None:
        super().__init__(f"The connection to {server} dropped while the answer was being written; the answer below "
                         "is incomplete. Ask again to retry.", server=server)


class LimitReached(DocChatError):
    """A demo limit (size, count or rate) was hit."""


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


# -- Wikipedia (rag_core.sources.wikipedia) -------------------------------------------
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


# -- hosted demo (rag_core.demo.hub) --------------------------------------------
class SampleReadOnly(DocChatError):
    def __init__(self) -> None:
        super().__init__("The sample documents are shared by every visitor of the demo, so they can't be removed. "
                         "You can remove the documents you added yourself.")


class DemoTrouble(DocChatError):
    """An unexpected failure inside the demo; the details go to the server log only."""

    def __init__(self, action: str) -> None:
        super().__init__(f"Something went wrong on the demo server while {action}. Nothing of yours was lost; "
                         "please try again in a moment.")
