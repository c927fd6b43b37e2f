"""What a whole-document answer says about itself: its label line, the notices, the lines of its stages ("This will
read 11 sections…", "Reading section 3 of 11…"), and its final numbering of the passages it cites."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_core.answer.grounding.citations import find_markers
from rag_core.core.errors import LLMError
from rag_core.core.models import Passage

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.answer.generation.reading import Plan

NOTICE_DIGEST = ("Quoted from the document: its opening and one central sentence of each part, in its order (no "
                 "AI-written summary).")
NOTICE_DIGEST_NO_LLM = NOTICE_DIGEST[:-1] + "; the language model is switched off."
NOTICE_DIGEST_NO_MODEL = NOTICE_DIGEST + " Pick a model in Settings to get written summaries."
NOTICE_DIGEST_FALLBACK = "{error} Meanwhile, here are the document's central sentences, quoted in its order."
NOTICE_WITHHELD = ("The model's summary could not be matched to the document, so it is not shown. These are the "
                   "document's central sentences instead, quoted in its order.")
NOTICE_STOPPED = "The summary was stopped before it read anything."
NOTICE_NO_HEADINGS = ("“{title}” has no headings DocChat could read, so it has no outline. Ask for a summary to see "
                      "its main points, part by part.")
STOPPED = "The summary was stopped after reading {done} of {total} {unit}s; it covers those only."
FAILED = "{error} The summary covers the first {done} of {total} {unit}s only."
SAMPLED = ("“{title}” is long: the model read {shown} of its {chunks} passages, spread evenly over the whole "
           "document ({calls} model calls).")


def digest_label(shape: str, titles: Sequence[str]) -> str:
    """The first line of a quoted answer (ends with ":", so it states nothing)."""
    quoted = [f"“{t}”" for t in titles]
    names = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    its = "its" if len(quoted) == 1 else "each one's"
    if shape == "compare":
        return f"{names} side by side, quoted (no AI-written summary):"
    if shape == "key_points":
        return f"Key points of {names}, quoted in {its} order (no AI-written summary):"
    return f"Summary of {names}, quoted: {its} opening and one central sentence of each part, in order:"


def more_notice(shown: int, asked: int) -> str:
    """Said when a question meant more documents than are read at once."""
    return (f"This covers {shown} of the {asked} documents it could mean (the newest); name one, or pick it in the "
            "chat's scope, to have it summarized.")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(5, int(round(seconds / 5.0)) * 5)} seconds"
    minutes = seconds / 60
    return f"{int(round(minutes))} minutes" if minutes < 90 else f"{minutes / 60:.1f} hours"


def plan_line(plans: Sequence[Plan], seconds: float, model: str) -> str:
    """What reading will take, said up front: "This will read 11 sections (352 passages) in 12 model calls, about
    3 minutes with llama3.2:3b."."""
    groups = sum(len(p.groups) for p in plans)
    unit = plans[0].unit if len(plans) == 1 else "part"
    calls = sum(p.calls for p in plans)
    shown = sum(p.shown for p in plans)
    return (f"This will read {groups} {unit}{'s' if groups != 1 else ''} ({shown} passages) in {calls} model "
            f"call{'s' if calls != 1 else ''}, about {_duration(seconds)} with {model}.")


def reading_line(plan: Plan, done: int, total: int, seconds_left: float, documents: int) -> str:
    """The stage line while a part is read: "Reading section 3 of 11… about 2 minutes left"."""
    which = f" of “{plan.doc.title}”" if documents > 1 else ""
    return f"Reading {plan.unit} {done + 1} of {total}{which}… about {_duration(seconds_left)} left."


def stopped_notice(done: int, total: int, unit: str) -> str:
    """The notice of a summary stopped part-way."""
    return STOPPED.format(done=done, total=total, unit=unit)


def failed_notice(fault: LLMError | None, done: int, total: int, unit: str) -> str:
    """The notice of a summary whose model failed part-way."""
    return FAILED.format(error=str(fault), done=done, total=total, unit=unit)


def sampled_notice(plans: Sequence[Plan]) -> str | None:
    """Says when a long document's passages were sampled (None when the model read all of them)."""
    for p in plans:
        if p.shown < len(p.doc.chunks):
            return SAMPLED.format(title=p.doc.title, shown=p.shown, chunks=len(p.doc.chunks), calls=p.calls)
    return None


def renumber(text: str, passages: Sequence[Passage]) -> tuple[str, tuple[Passage, ...]]:
    """The text with its [n] numbered 1, 2, … in order of first use, and the passages it cites in that order
    (markers pointing at no passage are dropped)."""
    new: dict[int, int] = {}
    out, pos = [], 0
    for mk in find_markers(text):
        nums = [n for n in dict.fromkeys(mk.numbers) if 1 <= n <= len(passages)]
        for n in nums:
            new.setdefault(n, len(new) + 1)
        out.append(text[pos:mk.start].rstrip(" ") if not nums else text[pos:mk.start])
        out.append("".join(f"[{new[n]}]" for n in nums))
        pos = mk.end
    out.append(text[pos:])
    return "".join(out), tuple(passages[n - 1] for n in sorted(new, key=new.__getitem__))
