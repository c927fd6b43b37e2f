"""A whole document read by a model, within the context budget (for rag_core.answer.generation.whole): the document's passages are read part by part (sections packed
into groups that fit one prompt; with more groups than DOCCHAT_SUMMARY_MAX_CALLS, neighbours are merged and each
merged group's passages sampled evenly), one model call each ("map": a few bullet points citing the passages shown,
numbered [1..] in that call), then one more call writes the whole from those notes ("reduce"), keeping their numbers.

Every call runs on a worker thread that the answer's thread polls, so Stop is seen within POLL_S whatever the model
is doing; what was read so far is kept. How fast the model reads and writes is learnt from each call (per model
name, for this process) to say up front how long a summary will take."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rag_core.answer.generation.outcome import Streamed, read_stream
from rag_core.answer.generation.prompt import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    SOURCES_HEADER,
    Prompt,
    estimate_tokens,
    num_ctx_for,
    render_source,
)
from rag_core.answer.grounding.citations import find_markers, resolve
from rag_core.answer.summaries.document import DocText, Part, group_sections
from rag_core.answer.summaries.prompts import MAP_SYSTEM, MAP_TASK, REDUCE_SYSTEM, notes_block
from rag_core.core.config import Settings
from rag_core.core.errors import ContextTooSmall, LLMError
from rag_core.core.models import Passage
from rag_core.llm.chat import LENGTH, ChatBackend
from rag_core.llm.context_window import fit

log = logging.getLogger(__name__)

POLL_S = 0.25  # how often a waiting summary hands control back (so Stop is seen)
MAP_REPLY_TOKENS = 384  # a part's notes: a few bullet points (also the call's num_predict)
REDUCE_PROMPT_SHARE = 0.6  # of the context the notes of the reduce call may take (longer notes are cut)
EXPECTED_MAP_TOKENS = 120  # what a part's notes usually take, for the time estimate
EXPECTED_REDUCE_TOKENS = 220
PROMPT_TOKENS_PER_S = 150.0  # assumed reading speed of a model not measured yet (a 3B model on a laptop CPU)
WRITE_TOKENS_PER_S = 12.0  # assumed writing speed
_SPEED: dict[str, tuple[float, float]] = {}  # model name -> measured (prompt tokens/s, written tokens/s)
_SPEED_LOCK = threading.Lock()


def speed(model: str) -> tuple[float, float]:
    """The model's reading and writing speed in tokens per second (measured in this process, else assumed)."""
    with _SPEED_LOCK:
        return _SPEED.get(model, (PROMPT_TOKENS_PER_S, WRITE_TOKENS_PER_S))


def learn_speed(model: str, prompt_tokens: int, first_s: float, written: int, writing_s: float) -> None:
    """Fold one call's timings into the model's remembered speed."""
    read, write = speed(model)
    if first_s > 0:
        read = 0.5 * read + 0.5 * prompt_tokens / first_s
    if writing_s > 0 and written > 8:
        write = 0.5 * write + 0.5 * written / writing_s
    with _SPEED_LOCK:
        _SPEED[model] = (read, write)


# --------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Group:
    """One map call: a run of the document's chunks (`part`) and which of them are shown (all, or an even sample)."""

    part: Part
    shown: tuple[int, ...]
    tokens: int  # the call's estimated prompt size


@dataclass(frozen=True)
class Plan:
    """How one document is read: its groups in order, and what that costs."""

    doc: DocText
    groups: tuple[Group, ...]
    sections: int  # the document's sections

    @property
    def calls(self) -> int:
        """Model calls: one per group, plus the one writing the whole when there are several."""
        return len(self.groups) + (len(self.groups) > 1)

    @property
    def shown(self) -> int:
        """Passages the model is shown."""
        return sum(len(g.shown) for g in self.groups)

    @property
    def tokens(self) -> int:
        """Estimated prompt tokens of all the calls."""
        return sum(g.tokens for g in self.groups) + (len(self.groups) > 1) * EXPECTED_MAP_TOKENS * len(self.groups)

    @property
    def unit(self) -> str:
        """"section" when every group is one section, else "part"."""
        return "section" if all(len(g.part.headings) == 1 for g in self.groups) and self.sections > 1 else "part"

    def seconds(self, model: str, done: int = 0) -> float:
        """Estimated seconds for the calls after the first `done` ones."""
        read, write = speed(model)
        left = self.groups[done:]
        s = sum(g.tokens / read + EXPECTED_MAP_TOKENS / write for g in left)
        if len(self.groups) > 1:
            s += EXPECTED_MAP_TOKENS * len(self.groups) / read + EXPECTED_REDUCE_TOKENS / write
        return s


def _fixed_tokens() -> int:
    return (estimate_tokens(MAP_SYSTEM) + estimate_tokens(SOURCES_HEADER + MAP_TASK) + 2 * MESSAGE_OVERHEAD_TOKENS)


def room(settings: Settings) -> int:
    """Tokens of sources one map call may hold."""
    return max(256, settings.answer.max_context_tokens - min(settings.answer.answer_tokens, MAP_REPLY_TOKENS) - _fixed_tokens())


def _even(idx: Sequence[int], cost: Sequence[int], budget: int) -> tuple[int, ...]:
    """The most items of `idx`, spread evenly over it, whose costs fit `budget` (maybe none)."""
    lo, hi, best = 1, len(idx), tuple[int, ...]()
    while lo <= hi:
        k = (lo + hi) // 2
        pick = tuple(dict.fromkeys(idx[round(j * (len(idx) - 1) / max(1, k - 1))] for j in range(k)))
        if sum(cost[i] for i in pick) <= budget:
            best, lo = pick, k + 1
        else:
            hi = k - 1
    return best


def _sample(idx: list[int], cost: Sequence[int], budget: int, starts: set[int]) -> tuple[int, ...]:
    """The chunks of a group to show when not all fit `budget`: first the opening chunk of each of its sections
    (spread evenly when even those do not all fit), then the rest spread evenly; in document order."""
    if sum(cost[i] for i in idx) <= budget:
        return tuple(idx)
    picked = _even([i for i in idx if i in starts] or idx[:1], cost, budget) or (idx[0],)
    left = budget - sum(cost[i] for i in picked)
    more = _even([i for i in idx if i not in picked], cost, left) if left > 0 else ()
    return tuple(sorted(picked + more))


def plan_reading(doc: DocText, settings: Settings, max_calls: int) -> Plan:
    """Pack the document's sections into groups that fit one prompt each (a section too long for one is split);
    past `max_calls` groups, neighbours are merged and sampled evenly to fit."""
    budget = room(settings)
    cost = [estimate_tokens(render_source(99, doc.passage(i))) + 1 for i in range(len(doc.chunks))]
    groups: list[Part] = []
    size: list[int] = []
    for sec in doc.sections():
        n = sum(cost[sec.first:sec.stop])
        if groups and size[-1] + n <= budget:
            groups[-1] = Part(groups[-1].first, sec.stop, groups[-1].headings + sec.headings)
            size[-1] += n
            continue
        start, acc = sec.first, 0
        for i in range(sec.first, sec.stop):  # a section longer than one prompt: runs of its chunks that fit
            if acc and acc + cost[i] > budget:
                groups.append(Part(start, i, sec.headings))
                size.append(acc)
                start, acc = i, 0
            acc += cost[i]
        groups.append(Part(start, sec.stop, sec.headings))
        size.append(acc)
    if len(groups) > max_calls:
        groups = group_sections(doc, groups, max_calls)
    fixed = _fixed_tokens()
    starts = {sec.first for sec in doc.sections()}
    planned = []
    for g in groups:
        shown = _sample(list(range(g.first, g.stop)), cost, budget, starts)
        planned.append(Group(g, shown, fixed + sum(cost[i] for i in shown)))
    return Plan(doc, tuple(planned), len(doc.sections()))


# --------------------------------------------------------------------------- one call
class Call:
    """One streamed model call on a worker thread: `wait()` yields "" every POLL_S until it ends (so the answer's
    thread sees Stop), `cancel()` makes the worker close the model's stream at its next piece."""

    def __init__(self, chat: ChatBackend, prompt: Prompt, reply_tokens: int) -> None:
        self.pieces: list[str] = []
        self.result: Streamed | None = None
        self.error: Exception | None = None
        self.started = time.monotonic()
        self.first_at: float | None = None
        self.ended_at: float | None = None
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(chat, prompt, reply_tokens), daemon=True,
                                        name="docchat-summary-call")
        self._thread.start()

    def _first(self) -> None:
        self.first_at = time.monotonic()

    def _run(self, chat: ChatBackend, prompt: Prompt, reply_tokens: int) -> None:
        try:
            stream = read_stream(chat, prompt, reply_tokens, self.pieces, self._first)
            try:
                while not self._cancel.is_set():
                    next(stream)
                stream.close()  # Stop: read_stream closes the model's HTTP stream
            except StopIteration as end:
                self.result = end.value
        except Exception as e:  # handed to the answer's thread, which raises it or reports it
            log.debug("A summary's model call failed", exc_info=True)
            self.error = e
        finally:
            self.ended_at = time.monotonic()
            self._done.set()

    def wait(self) -> Iterator[str]:
        """Yield "" every POLL_S until the call has ended; a closed generator cancels the call."""
        try:
            while not self._done.wait(POLL_S):
                yield ""
        except GeneratorExit:
            self.cancel()
            raise

    def cancel(self) -> None:
        """Ask the worker to close the model's stream (at its next piece)."""
        self._cancel.set()

    @property
    def sent(self) -> Prompt | None:
        """The prompt sent last (a smaller one after a refusal for size); None before the call ended."""
        return self.result.prompt if self.result is not None else None

    @property
    def text(self) -> str:
        """What the model wrote (without a repetition loop, nor the line it was writing when cut at its length)."""
        raw = "".join(self.pieces)
        if self.result is None:
            return raw
        kept = self.result.kept(raw)
        return kept.rsplit("\n", 1)[0] if self.result.done_reason == LENGTH and "\n" in kept.strip() else kept

    def fault(self) -> LLMError | None:
        """The model's failure, if it failed (other errors are raised)."""
        if self.error is not None:
            if isinstance(self.error, LLMError):
                return self.error
            raise self.error
        return self.result.fault if self.result is not None else None


def map_prompt(plan: Plan, group: Group, settings: Settings) -> tuple[Prompt, tuple[Passage, ...]]:
    """The prompt of one map call and the passages it numbers [1..]."""
    passages = tuple(plan.doc.passage(i) for i in group.shown)
    return _map_call(passages, settings), passages


def _map_call(passages: tuple[Passage, ...], settings: Settings, retry: bool = True) -> Prompt:
    blocks = "\n\n".join(render_source(n, p) for n, p in enumerate(passages, 1))
    user = f"{SOURCES_HEADER}\n\n{blocks}\n\n{MAP_TASK}"
    tokens = estimate_tokens(MAP_SYSTEM) + estimate_tokens(user) + 2 * MESSAGE_OVERHEAD_TOKENS
    reply = min(settings.answer.answer_tokens, MAP_REPLY_TOKENS)
    return Prompt(MAP_SYSTEM, user, passages, 0, tokens, num_ctx_for(tokens - settings.answer.answer_tokens + reply, settings),
                  (lambda fault: _fewer_passages(passages, settings, fault, tokens)) if retry else None)


def _fewer_passages(passages: tuple[Passage, ...], settings: Settings, fault: ContextTooSmall,
                    tokens: int) -> Prompt | None:
    """A map call again after a refusal for size: every other passage (still spread over the group), as many as fit
    the window the refusal named; None when that is no smaller."""
    fitted = fit(settings, fault.window)
    budget, kept = room(fitted), list[Passage]()
    for p in passages[::2] if len(passages) > 1 else passages:
        cost = estimate_tokens(render_source(99, p)) + 1
        if kept and cost > budget:
            break
        kept.append(p)
        budget -= cost
    prompt = _map_call(tuple(kept), fitted, retry=False)
    return prompt if prompt.tokens < tokens else None


def reduce_prompt(notes: str, task: str, settings: Settings, retry: bool = True) -> Prompt:
    """The prompt of the call that writes the whole from the parts' notes (cut to fit the context, with room for
    the reply); after a refusal for size, sent once more with half the notes."""
    fixed = estimate_tokens(REDUCE_SYSTEM) + estimate_tokens(task) + 2 * MESSAGE_OVERHEAD_TOKENS + 8
    share = min(REDUCE_PROMPT_SHARE * settings.answer.max_context_tokens,
                settings.answer.max_context_tokens - settings.answer.answer_tokens - fixed)
    user = f"{notes_block(notes[:int(max(256, share) * CHARS_PER_TOKEN)])}\n\n{task}"
    tokens = estimate_tokens(REDUCE_SYSTEM) + estimate_tokens(user) + 2 * MESSAGE_OVERHEAD_TOKENS
    return Prompt(REDUCE_SYSTEM, user, (), 0, tokens, num_ctx_for(tokens, settings),
                  (lambda fault: _shorter_notes(notes[:len(user) // 2], task, settings, fault, tokens))
                  if retry else None)


def _shorter_notes(notes: str, task: str, settings: Settings, fault: ContextTooSmall, tokens: int) -> Prompt | None:
    prompt = reduce_prompt(notes, task, fit(settings, fault.window), retry=False)
    return prompt if prompt.tokens < tokens else None


def shift(text: str, passages: Sequence[Passage], offset: int) -> str:
    """A call's text with its [n] (over `passages`, numbered from 1) renumbered from offset + 1; markers that
    point at no passage dropped."""
    text = resolve(text, list(passages)).text
    out, pos = [], 0
    for mk in find_markers(text):
        out.append(text[pos:mk.start])
        out.append("".join(f"[{offset + n}]" for n in dict.fromkeys(mk.numbers)))
        pos = mk.end
    out.append(text[pos:])
    return "".join(out)


@dataclass
class Notes:
    """What reading one document gave: each group's notes (numbered over all passages shown), and the whole."""

    plan: Plan
    parts: list[str] = field(default_factory=list)  # one per group read, in order
    whole: str = ""  # the reduce call's text (empty until written, or when there was one group)
    fault: LLMError | None = None
