"""The `ask` command: stream a grounded answer to the terminal, or print it as JSON."""
from __future__ import annotations

import argparse
import sys

from rag_core.adapters.cli.common import json_text, k_value, terminal_text
from rag_core.answer.grounding.citations import citation_json, passage_json
from rag_core.core.config import Settings
from rag_core.core.formats import location_label
from rag_core.core.models import Answer


def print_sources(ans: Answer) -> None:
    if not ans.citations:
        return
    print("\nSources:")
    for c in ans.citations:
        j = citation_json(c)
        where = location_label(c.passage.chunk)  # "page 3, section Foo", "slide 3 — Budget", "sheet Budget"
        print(terminal_text(f"  [{j['n']}] {j['title']}{' — ' + where if where else ''}"
                            f"{'  ' + j['url'] if j['url'] else ''}"))
        quote = " ".join(terminal_text(j["quote"]).split())
        print(f"      “{quote[:240]}{'…' if len(quote) > 240 else ''}”")


def answer_json(ans: Answer) -> dict:
    """The `ask --json` shape."""
    return {"answer": ans.text, "mode": ans.mode,
            "citations": [{**citation_json(c), "location": location_label(c.passage.chunk)} for c in ans.citations],
            "passages": [passage_json(p, i) for i, p in enumerate(ans.passages, 1)],
            "incomplete": ans.incomplete, "notice": ans.notice, "invalid_markers": ans.invalid_markers,
            "closest": bool(ans.extra.get("closest")),
            "question": ans.question, "standalone_question": ans.standalone_question,
            "relevance": None if ans.relevance is None else round(ans.relevance, 4)}


def checked_reply(streamed: str, ans: Answer) -> str | None:
    """The checked answer when it replaced the draft that was streamed: the answer did not finish (stopped, cut off,
    a loop, a failure) or was withheld, and its text differs. None when the draft stands."""
    replaced = ans.incomplete or "withheld_text" in ans.extra or ans.extra.get("ended", "finished") != "finished"
    if not replaced or " ".join(streamed.split()) == " ".join(ans.text.split()):
        return None
    return ans.text


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    """Answer one question from the library; exit code 1 when the answer is incomplete."""
    from rag_core.answer.generation import start_answer
    from rag_core.service.library import Library

    if args.model:
        settings = settings.with_chat_model(args.model)
    lib = Library(settings)
    try:
        stream = start_answer(lib, args.question, settings, doc_ids=args.doc_ids, use_llm=not args.no_llm, k=args.k)
        if args.json:
            for _ in stream:
                pass
        else:
            streamed: list[str] = []
            for delta in stream:
                streamed.append(delta)
                print(terminal_text(delta, newlines=True), end="", flush=True)
            print()
    finally:
        lib.close()
    ans = stream.answer
    assert ans is not None
    if not args.json and (checked := checked_reply("".join(streamed), ans)) is not None:
        print("\nChecked answer (the text above was a draft; this is what your documents back):\n"
              + terminal_text(checked, newlines=True))
    if args.json:
        print(json_text(answer_json(ans)))
    else:
        print_sources(ans)
        if ans.notice:
            details = ans.extra.get("details")
            print("\nNote: " + terminal_text(ans.notice) + (f"\n({terminal_text(str(details))})" if details else ""),
                  file=sys.stderr)
    return 1 if ans.incomplete else 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the `ask` subcommand."""
    p = sub.add_parser("ask", parents=[common], help="ask a question; the answer cites your documents")
    p.add_argument("question")
    p.add_argument("--model", help="Chat model to use (default: the model of $DOCCHAT_CHAT_MODEL)")
    p.add_argument("--no-llm", action="store_true",
                   help="no language model: quote the most relevant sentences (extractive answer)")
    p.add_argument("-k", type=k_value, default=None,
                   help="number of passages to retrieve, 1-50 (default: $DOCCHAT_TOP_K)")
    p.add_argument("--doc", dest="doc_ids", action="append", metavar="DOC_ID",
                   help="only search this document (repeatable; ids from `list`)")
    p.set_defaults(func=cmd_ask)
