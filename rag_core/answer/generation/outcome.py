"""How a chat model's answer is read and how it ended, and what of its text is kept.

However it ends (finished, cut at its length limit, stopped by a repetition loop, failed part-way, or stopped by the
person), the text is checked against the passages (rag_core.answer.grounding.evidence). A finished answer keeps its sentences, the
unbacked ones marked; an answer that did not finish keeps only the sentences the passages back, the rest goes under
"Details"; when nothing the model wrote is backed, the closest quotes are shown instead (AnswerStream does that).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

from rag_core.answer.generation.repetition import Loop, RepetitionGuard
from rag_core.answer.grounding.evidence import MATCHED, NO_CLAIM, VERIFIED, claim_text, unbacked_sentences
from rag_core.core.errors import ContextTooSmall, DocChatError, LLMError, LLMTimeout, StreamInterrupted
from rag_core.core.models import Answer
from rag_core.llm import context_window
from rag_core.llm.chat import LENGTH, STOP, ChatBackend, ThinkFilter, chat_messages

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.answer.generation.prompt import Prompt
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)

NOTICE_LENGTH = "The answer reached its length limit and was cut off."
NOTICE_STOPPED = "The answer was stopped before it finished."
NOTICE_LOOP = "The model started repeating itself, so the answer was stopped."
DETAILS_LENGTH = "The limit is DOCCHAT_ANSWER_TOKENS (now {n} tokens); raise it for longer answers."
INCOMPLETE_SUFFIX = " The answer below is incomplete."  # after a timeout's sentence, when some text is kept

NOTICE_UNSUPPORTED = ("Careful: no sentence of this answer could be matched to a passage of your documents, so it may "
                      "not come from them. Check the sources beside it, or rephrase the question.")
NOTICE_UNBACKED_ONE = "One sentence in this reply is not backed by the cited passage; it is marked."
NOTICE_UNBACKED_MANY = "{n} sentences in this reply are not backed by the passages they cite; they are marked."
NOTICE_WITHHELD = ("The model's answer could not be matched to any passage of your documents, so it is not shown. "
                   "These are the closest quotes from your documents instead.")
DETAILS_WITHHELD = "What the model wrote (not backed by your documents): {text}"
NOTICE_LEFT_OUT_ONE = "One sentence your documents do not back was left out."
NOTICE_LEFT_OUT_MANY = "{n} sentences your documents do not back were left out."
DETAILS_LEFT_OUT = "Left out (not backed by your documents): {text}"
DETAILS_UNCHECKED = "What the model wrote before it failed (not checked against your documents): {text}"
WITHHELD_CHARS = 600  # of the model's text quoted in the details


class End(StrEnum):
    """Why the model's stream ended."""

    FINISHED = "finished"  # the model said it was done
    LENGTH = "length"  # it reached its token limit
    LOOP = "loop"  # it started repeating itself, and DocChat stopped it
    FAILED = "failed"  # a fault after some text (a timeout, a dropped connection, an error line)
    STOPPED = "stopped"  # the person pressed Stop


@dataclass(frozen=True)
class Ending:
    """How an answer ended: why, the sentence that says so, and its technical part."""

    end: End
    reason: str | None = None  # one sentence saying why it ended (None when it finished)
    details: str | None = None
    suffix: str = ""  # added to the reason when some of the text is kept

    @property
    def incomplete(self) -> bool:
        """True for every end but a finished one."""
        return self.end is not End.FINISHED

    @property
    def notice(self) -> str | None:
        """The notice of an answer that keeps (some of) its text."""
        return None if self.reason is None else self.reason + self.suffix

    def withheld(self, text: str) -> tuple[str, str | None]:
        """Notice and details of the closest quotes shown instead of the model's `text` (none of it backed)."""
        notice = f"{self.reason} {NOTICE_WITHHELD}" if self.reason else NOTICE_WITHHELD
        return notice, join_details(self.details, DETAILS_WITHHELD.format(text=one_line(text)))

    def pruned(self, kept: Kept) -> tuple[str, str | None]:
        """Notice and details of an answer that keeps only its backed sentences."""
        left_out = DETAILS_LEFT_OUT.format(text=one_line(kept.left_out)) if kept.left_out else None
        return " ".join(n for n in (self.notice, kept.notice) if n), join_details(self.details, left_out)


def ending(done_reason: str | None, fault: LLMError | None = None, loop: Loop | None = None,
           answer_tokens: int = 0, stopped: bool = False) -> Ending:
    """The Ending of a stream from what was seen: Stop, then a fault, a loop, the length limit, else finished."""
    if stopped:
        return Ending(End.STOPPED, NOTICE_STOPPED)
    if fault is not None:
        return Ending(End.FAILED, str(fault), fault.details or None,
                      INCOMPLETE_SUFFIX if isinstance(fault, LLMTimeout) else "")
    if loop is not None:
        return Ending(End.LOOP, NOTICE_LOOP)
    if done_reason == LENGTH:
        return Ending(End.LENGTH, NOTICE_LENGTH, DETAILS_LENGTH.format(n=answer_tokens))
    return Ending(End.FINISHED)


@dataclass(frozen=True)
class Streamed:
    """What reading the model's stream saw at its end."""

    done_reason: str | None  # "stop", "length", or None (no end seen: a fault, a loop)
    fault: LLMError | None = None
    loop: Loop | None = None
    prompt: Prompt | None = None  # the prompt sent last (a smaller one after a refusal for size)

    def ending(self, answer_tokens: int) -> Ending:
        """How the answer ended."""
        return ending(self.done_reason, self.fault, self.loop, answer_tokens)

    def kept(self, raw: str) -> str:
        """The streamed text without its repetition loop."""
        return raw[:self.loop.start] if self.loop is not None else raw


def read_stream(chat: ChatBackend, prompt: Prompt, answer_tokens: int, partial: list[str],
                on_first: Callable[[], None]) -> Generator[str, None, Streamed]:
    """Stream the model's answer: yield its text (no reasoning block), also appended to `partial`; stop it when it
    repeats itself; return how it ended. Faults are returned, not raised; the HTTP stream is always closed.

    A request the server refuses for its size (ContextTooSmall) is sent once more, smaller (`prompt.shrink` makes it
    from the refusal; none: not retried); `Streamed.prompt` is the prompt sent last. A refusal that stands names the
    server's window when the server said it (in the refusal, or where rag_core.llm.context_window asks)."""
    got = yield from _stream_once(chat, prompt, answer_tokens, partial, on_first)
    fault = got.fault
    if isinstance(fault, ContextTooSmall) and chat.provider is not None:
        if fault.window:
            context_window.remember(chat.settings, chat.name, fault.window)
        retry = prompt.shrink(fault) if prompt.shrink is not None and not partial else None
        if retry is not None:
            log.info("Sending %s a smaller request (~%d tokens instead of ~%d)", chat.host, retry.tokens, prompt.tokens)
            prompt = retry
            got = yield from _stream_once(chat, retry, answer_tokens, partial, on_first)
            fault = got.fault
        if isinstance(fault, ContextTooSmall) and not fault.window:
            learnt = context_window.learn(chat.settings, chat.name).tokens
            if learnt:
                got = replace(got, fault=ContextTooSmall(learnt, fault.provider, fault.detail))
    return replace(got, prompt=prompt)


def _stream_once(chat: ChatBackend, prompt: Prompt, answer_tokens: int, partial: list[str],
                 on_first: Callable[[], None]) -> Generator[str, None, Streamed]:
    """One request of read_stream."""
    think, guard = ThinkFilter(), RepetitionGuard()
    done_reason: str | None = None
    fault: LLMError | None = None
    loop: Loop | None = None
    stream = None
    try:
        stream = chat.model.stream(chat_messages(prompt.system, prompt.user),
                                   **chat.call_kwargs(prompt.num_ctx, answer_tokens))
        for chunk in stream:
            done_reason = chat.end_reason(chunk) or done_reason
            delta = think.feed(chunk.content if isinstance(chunk.content, str) else "")
            if delta:
                if not partial:
                    on_first()
                partial.append(delta)
                yield delta
                loop = guard.feed(delta)
                if loop is not None:  # the same sentence again and again: stop the model now
                    log.info("The model repeats itself (%s: %.80r); stopping it", loop.kind, loop.repeated)
                    break
        tail = think.flush() if loop is None else ""
        if tail:
            partial.append(tail)
            yield tail
        if done_reason is None and loop is None:
            if chat.requires_end:
                fault = StreamInterrupted(chat.server)  # the stream ended without the server's end mark
            else:
                done_reason = STOP  # other chat models may not say why they stopped: the stream ended normally
    except LLMError as e:
        fault = e
    except DocChatError:
        raise
    except Exception as e:  # transport/model errors become a friendly notice, never a traceback
        fault = chat.translate(e)
        if chat.is_unexpected(fault, e):
            log.exception("Unexpected failure while streaming from %s", chat.name)
        else:  # an expected fault (an HTTP error, a refusal for size, a timeout): one line; the traceback at debug
            log.warning("%s at %s: %s", chat.name, chat.host, failure_reason(e))
            log.debug("The failure of %s", chat.name, exc_info=True)
    finally:
        if stream is not None and hasattr(stream, "close"):
            stream.close()
    return Streamed(done_reason, fault, loop)


def failure_reason(exc: BaseException) -> str:
    """A model server's failure for a log line: its HTTP status and message, or the error's kind and text."""
    status = getattr(exc, "status_code", None)
    text = " ".join(str(exc).split())[:300]
    return f"HTTP {status}: {text}" if isinstance(status, int) else f"{type(exc).__name__}: {text}"


def evidence_notice(answer: Answer) -> str | None:
    """What a verified reply must warn about: nothing backed at all, or sentences their citations do not back."""
    if answer.extra.get("evidence", {}).get("supported_claims") == 0:
        return NOTICE_UNSUPPORTED
    unbacked = len(unbacked_sentences(answer))
    if unbacked:
        return NOTICE_UNBACKED_ONE if unbacked == 1 else NOTICE_UNBACKED_MANY.format(n=unbacked)
    return None


def join_details(*parts: str | None) -> str | None:
    """Technical parts of a notice, one paragraph each (None when there is none)."""
    kept = [p for p in parts if p]
    return "\n\n".join(kept) if kept else None


def one_line(text: str, limit: int = WITHHELD_CHARS) -> str:
    """`text` on one line, at most `limit` characters."""
    return " ".join(text.split())[:limit]


def model_words(text: str) -> str:
    """The details of quotes shown instead of the model's `text`."""
    return DETAILS_WITHHELD.format(text=one_line(text))


def unchecked(text: str, details: str | None = None) -> str | None:
    """The details of an answer that failed before the model's `text` could be checked: the text goes there only."""
    return join_details(details, DETAILS_UNCHECKED.format(text=one_line(text)) if text.strip() else None)


# --------------------------------------------------------------------------- keeping the backed sentences
@dataclass(frozen=True)
class Kept:
    """The backed part of a verified answer's text, and what was left out."""

    text: str  # the backed sentences (and the lines leading into them), in order
    left_out: str  # the unbacked sentences, one line
    unbacked: int  # how many claims were left out
    backed: int  # how many claims were kept

    @property
    def notice(self) -> str | None:
        """One sentence saying that sentences were left out (None when none were)."""
        if not self.unbacked:
            return None
        return NOTICE_LEFT_OUT_ONE if self.unbacked == 1 else NOTICE_LEFT_OUT_MANY.format(n=self.unbacked)


def _key(sentence: str) -> str:
    return re.sub(r"[\W_]+", " ", claim_text(sentence).lower()).strip()


def keep_backed(answer: Answer) -> Kept:
    """The sentences of a verified answer its passages back (verified, or matched to a passage it did not cite),
    each once, with the lines without a claim that lead into them ("The features are:"); the rest is left out."""
    text, checks = answer.text, answer.sentences
    keep = [ch.status in (VERIFIED, MATCHED) for ch in checks]
    seen: set[str] = set()
    repeat = [False] * len(checks)
    for i, ch in enumerate(checks):  # a sentence the model wrote again (a loop) is kept once
        if keep[i]:
            key = _key(text[ch.start:ch.end])
            repeat[i] = key in seen
            keep[i] = not repeat[i]
            seen.add(key)
    last = max((i for i, k in enumerate(keep) if k), default=-1)
    for i, ch in enumerate(checks[:last]):
        keep[i] = keep[i] or ch.status == NO_CLAIM
    pieces: list[str] = []
    for i, ch in enumerate(checks):
        if keep[i]:
            if pieces:  # the space or line break written before this sentence
                pieces.append(re.sub(r"\S", "", text[checks[i - 1].end:ch.start]) or " ")
            pieces.append(text[ch.start:ch.end])
    dropped = [ch for i, ch in enumerate(checks) if not keep[i] and not repeat[i]]
    if not dropped and not any(repeat):
        pieces = [text]  # everything is kept, as written
    return Kept(text="".join(pieces), left_out=one_line(" ".join(text[ch.start:ch.end] for ch in dropped), len(text)),
                unbacked=sum(ch.status != NO_CLAIM for ch in dropped),
                backed=sum(k and ch.status != NO_CLAIM for ch, k in zip(checks, keep, strict=True)))


class MemoEncoder:
    """An embedder's `encode` that remembers every vector it made: checking the kept part of an answer again costs
    no second pass of the model (and does not wait for an upload's embedding batch)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._rows: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised float32 vectors, one row per text (only the texts not seen before are encoded)."""
        if not texts:
            return np.asarray(self._embedder.encode([]), dtype=np.float32)
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        if missing:
            for t, row in zip(missing, np.asarray(self._embedder.encode(missing), dtype=np.float32), strict=True):
                self._rows[t] = row
        return np.stack([self._rows[t] for t in texts])


__all__ = ["DETAILS_LEFT_OUT", "DETAILS_LENGTH", "DETAILS_UNCHECKED", "DETAILS_WITHHELD", "End", "Ending", "Kept", "MemoEncoder",
           "NOTICE_LEFT_OUT_MANY", "NOTICE_LEFT_OUT_ONE", "NOTICE_LENGTH", "NOTICE_LOOP", "NOTICE_STOPPED",
           "NOTICE_UNBACKED_MANY", "NOTICE_UNBACKED_ONE", "NOTICE_UNSUPPORTED", "NOTICE_WITHHELD", "WITHHELD_CHARS",
           "Streamed", "ending", "failure_reason", "evidence_notice", "join_details", "keep_backed", "model_words", "one_line", "read_stream",
           "unchecked"]
