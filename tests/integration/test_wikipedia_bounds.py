"""Hostile or broken Wikipedia answers (issue 13, item 6), served over real HTTP by tests/wiki_server.py to the real
httpx client: deeply nested JSON, a server dripping one byte at a time, huge and compressed-bomb bodies, a
`javascript:` canonical URL, fields of the wrong type. Every failure is one DocChatError sentence, within bounded
time and memory. The hostile bodies are generated here, never committed.
"""
from __future__ import annotations

import json
import struct
import time
import tracemalloc
import zlib

import pytest
from wiki_server import FIXTURES, WikiReplayServer  # tests/ is on the path (pytest.ini)

from rag_core.adapters.cli.main import main
from rag_core.core.config import Settings
from rag_core.core.errors import (
    DocChatError,
    WikipediaAPIError,
    WikipediaBadResponse,
    WikipediaPageMissing,
    WikipediaResponseTooLarge,
    WikipediaServerError,
    WikipediaTooSlow,
)
from rag_core.service import wiki_sync
from rag_core.service.library import Library
from rag_core.sources import wikipedia as W

PY_TITLE = "Python (programming language)"
PY_ID = 23862
PY_URL = "https://en.wikipedia.org/wiki/Python_(programming_language)"  # MediaWiki's URL for the recorded title
DA_URL = "https://en.wikipedia.org/wiki/Douglas_Adams"
MB = 1024 * 1024


def recorded(name: str):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def python_body(**page_fields) -> dict:
    """The recorded plain-text extract of the Python article + a revision id (ADDED: the recording's request did
    not ask for prop=info), with `page_fields` set on the page."""
    body = recorded("extracts_plaintext-with-sections_python-programming-language.json")
    body["query"]["pages"][str(PY_ID)].update({"lastrevid": 1345678901, **page_fields})
    return body


def adams_body(**page_fields) -> dict:
    """The recorded redirect "Adams, Douglas" -> "Douglas Adams" with the plain-text extract of the REST summary
    recording (REPLACED, as in test_wikipedia.py: the recorded request asked for HTML), `page_fields` set."""
    body = recorded("redirect_query-fv2_adams-douglas.json")
    body["query"]["pages"][0].update({"extract": recorded("rest_page-summary_douglas-adams.json")["extract"],
                                      **page_fields})
    return body


def nested(depth: int, inner: bytes = b"1") -> bytes:
    """A JSON array nested `depth` levels deep."""
    return b"[" * depth + inner + b"]" * depth


def gzip_bomb(megabytes: int) -> bytes:
    """A valid gzip body that inflates to `megabytes` MB of JSON (one long string), built in a fraction of a
    second: full-flushed deflate blocks repeat byte for byte, and the trailer's CRC is computed over the whole."""
    head, block, tail = b'{"query":{"search":[]},"x":"', b"a" * MB, b'"}'
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    middle = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(tail) + c.flush()
    crc = zlib.crc32(head)
    for _ in range(megabytes):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + megabytes * MB + len(tail)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first + middle * megabytes + last
            + struct.pack("<II", crc, size & 0xFFFFFFFF))


def one_sentence(e: BaseException) -> str:
    """The error's message, checked to be one of DocChat's own: a DocChatError, one line, ending with a full stop."""
    assert isinstance(e, DocChatError), type(e)
    text = str(e)
    assert "\n" not in text and text.endswith(".") and "Traceback" not in text and len(text) < 600, text
    return text


@pytest.fixture
def server():
    with WikiReplayServer() as s:
        yield s


@pytest.fixture
def wsettings(server, tmp_path):
    return Settings(data_dir=tmp_path / "data", wikipedia_api=server.url_template, wikipedia_timeout_s=5.0,
                    wikipedia_backoff_s=0.02, wikipedia_retries=3, wikipedia_contact="docchat-tests@example.invalid")


# -- depth-safe JSON -------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    nested(100_000),  # a RecursionError traceback before
    b'{"batchcomplete":"","query":{"search":' + nested(5000, b"{}") + b"}}",
    nested(W.MAX_JSON_DEPTH + 1),
    b'{"a":' * 3000 + b"1" + b"}" * 3000,
])
def test_deeply_nested_json_is_one_sentence(server, wsettings, body):
    server.respond({"list": "search"}, body)
    t0 = time.monotonic()
    with pytest.raises(WikipediaBadResponse) as e:
        W.search(wsettings, "Python programming")
    assert f"nested more than {W.MAX_JSON_DEPTH} levels deep" in one_sentence(e.value)
    assert time.monotonic() - t0 < 5 and server.count() == 1  # not retried: the answer will not get better


def test_nesting_up_to_the_limit_and_brackets_inside_strings_are_fine(server, wsettings):
    snippet = "[" * 5000 + "{" * 5000 + " \\\" ] } "  # inside a JSON string brackets are only text
    body = {"query": {"search": [{"title": "Python (programming language)", "pageid": PY_ID, "snippet": snippet}],
                      "deep": json.loads(nested(W.MAX_JSON_DEPTH - 3))}}
    server.respond({"list": "search"}, body)
    [hit] = W.search(wsettings, "Python programming")
    assert hit.title == PY_TITLE and hit.snippet.startswith("[[[[") and len(hit.snippet) <= W.client.MAX_SNIPPET_CHARS


def test_an_answer_with_too_many_values_is_refused_before_parsing(server, wsettings):
    body = b'{"query":{"search":[' + b"{}," * (W.MAX_JSON_ITEMS + 1) + b"{}]}}"
    server.respond({"list": "search"}, body)
    with pytest.raises(WikipediaBadResponse) as e:
        W.search(wsettings, "Python programming")
    assert "more than 200,000 values" in one_sentence(e.value)


# -- the deadline over the whole request -----------------------------------------------------------
@pytest.mark.parametrize("kind, delay", [("drip", 0.3), ("drip", 4.0), ("drip-headers", 0.3), ("drip-headers", 4.0)])
def test_a_dripping_server_is_cut_at_the_deadline(server, wsettings, kind, delay):
    """One byte every `delay` s: each read is well within the 5 s read timeout, so only the deadline can stop it
    (with 4.0 s the cut has to interrupt a read that is blocked, not wait for the next byte)."""
    server.fault(kind, times=None, delay=delay, match={"list": "search"})
    fast = wsettings.with_overrides(wikipedia_deadline_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(WikipediaTooSlow) as e:
        W.search(fast, "Python programming")
    took = time.monotonic() - t0
    assert 0.9 <= took < 1.0 + 2.0, took
    assert "the 1 s limit" in one_sentence(e.value) and server.count() == 1


def test_the_deadline_includes_the_waits_between_attempts(server, wsettings):
    server.fault("5xx", times=None, retry_after="1")
    t0 = time.monotonic()
    with pytest.raises(WikipediaServerError) as e:
        W.search(wsettings.with_overrides(wikipedia_deadline_s=1.5), "Python programming")
    took = time.monotonic() - t0
    assert server.count() == 2 and took < 1.5, took  # a second 1 s wait would have passed the deadline
    assert "2 attempts" in one_sentence(e.value)


def test_an_import_cut_by_the_deadline_changes_nothing(server, wsettings, embedder):
    server.fault("drip", times=None, delay=0.3, match={"prop": "extracts"})
    lib = Library(wsettings.with_overrides(wikipedia_deadline_s=1.0), embedder=embedder)
    try:
        t0 = time.monotonic()
        r = wiki_sync.import_article(lib, lib.settings, PY_TITLE)
        assert time.monotonic() - t0 < 3.0
        assert r.status == "failed" and "took longer than the 1 s limit" in r.error and lib.documents() == []
    finally:
        lib.close()


# -- the size cap -------------------------------------------------------------------------------
@pytest.mark.parametrize("announce", [False, True])
def test_a_huge_answer_is_refused_at_the_cap_in_bounded_memory(server, wsettings, announce):
    server.fault("huge", size=300 * MB, announce=announce, match={"list": "search"})
    capped = wsettings.with_overrides(wikipedia_max_response_mb=2)
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(WikipediaResponseTooLarge) as e:
            W.search(capped, "Python programming")
        took = time.monotonic() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "larger than the 2 MB limit" in one_sentence(e.value)
    assert peak < 12 * MB, peak  # the whole 300 MB body took 1.4 GB before
    assert took < 5 and server.count() == 1
    assert server.wait_answered()  # the server noticed the hang-up and stopped writing
    assert server.bytes_sent < 64 * MB  # reading stopped at the cap (what the sockets buffered aside)
    if announce:
        assert server.bytes_sent < 32 * MB  # refused on the Content-Length alone


def test_a_compression_bomb_is_stopped_at_the_cap(server, wsettings):
    server.respond({"list": "search"}, gzip_bomb(300), headers={"Content-Encoding": "gzip"})
    tracemalloc.start()
    try:
        with pytest.raises(WikipediaResponseTooLarge) as e:
            W.search(wsettings.with_overrides(wikipedia_max_response_mb=2), "Python programming")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "2 MB limit" in one_sentence(e.value) and peak < 12 * MB, peak


def test_compressed_answers_within_the_cap_are_read_and_other_codings_refused(server, wsettings):
    body = json.dumps({"query": {"search": [{"title": PY_TITLE, "pageid": PY_ID, "snippet": "a <b>language</b>"}]}})
    server.respond({"list": "search"}, zlib.compress(body.encode()), headers={"Content-Encoding": "deflate"})
    [hit] = W.search(wsettings, "Python programming")
    assert (hit.title, hit.snippet, hit.url) == (PY_TITLE, "a language", PY_URL)
    server.respond({"list": "search"}, body.encode(), headers={"Content-Encoding": "br"})
    with pytest.raises(WikipediaBadResponse) as e:
        W.search(wsettings, "Python programming")
    assert "compressed as “br”" in one_sentence(e.value)
    server.respond({"list": "search"}, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + b"\xff" * 20,  # bad block type
                   headers={"Content-Encoding": "gzip"})
    with pytest.raises(WikipediaBadResponse) as e:
        W.search(wsettings, "Python programming")
    assert "compression is damaged" in one_sentence(e.value)


# -- only https://<lang>.wikipedia.org/wiki/... URLs ---------------------------------------------------
@pytest.mark.parametrize("bad", ["javascript:alert(document.cookie)", "http://en.wikipedia.org/wiki/Python",
                                 "https://en.wikipedia.org.evil.example/wiki/Python",
                                 "https://evil.example/?https://en.wikipedia.org/wiki/Python",
                                 "https://user@en.wikipedia.org/wiki/Python", "https://de.wikipedia.org/wiki/Python",
                                 "https://en.wikipedia.org/wiki/../w/index.php", "https://en.wikipedia.org/wiki/A\nB",
                                 "https://en.wikipedia.org/wiki/Python?action=raw", ["https://en.wikipedia.org/wiki/x"]])
def test_only_wikipedia_article_urls_are_kept(server, wsettings, bad):
    server.respond({"titles": PY_TITLE, "prop": "extracts"}, python_body(canonicalurl=bad, fullurl=bad))
    with W.WikipediaClient(wsettings) as c:
        article = W.fetch_article(c, "en", PY_TITLE)
    assert isinstance(article, W.Article) and article.url == PY_URL  # built from the language and title


def test_a_good_full_url_is_used_when_the_canonical_one_is_bad(server, wsettings):
    server.respond({"titles": PY_TITLE, "prop": "extracts"},
                   python_body(canonicalurl="javascript:alert(1)", fullurl=PY_URL + "_x"))
    with W.WikipediaClient(wsettings) as c:
        assert W.fetch_article(c, "en", PY_TITLE).url == PY_URL + "_x"


def test_cli_never_stores_or_prints_a_javascript_url(server, tmp_path, monkeypatch, capsys, embedder):
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_API", server.url_template)
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"},
                   adams_body(canonicalurl="javascript:alert(1)", fullurl="javascript:alert(2)"))
    data = tmp_path / "cli"
    assert main(["wiki", "Adams, Douglas", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "javascript" not in out and f"{DA_URL}  ·  CC BY-SA 4.0" in out
    assert main(["wiki", "Adams, Douglas", "--data-dir", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["url"] == DA_URL
    lib = Library(Settings(data_dir=data), embedder=embedder)
    try:
        [doc] = lib.documents()
        assert doc.url == DA_URL
    finally:
        lib.close()


# -- fields of the wrong type, oversized error texts --------------------------------------------------
@pytest.mark.parametrize("body", [
    {"query": []}, {"query": {"search": "x"}}, {"query": {"search": [1, None, "x", [], {"title": ["x"]}]}},
    {"query": {"search": [{"title": "x" * 300}, {"title": "A|B"}, {"title": {"x": 1}, "pageid": "abc"}]}},
    [], "x", 1,
])
def test_malformed_search_answers_never_raise_anything_but_a_sentence(server, wsettings, body):
    server.respond({"list": "search"}, body)
    try:
        hits = W.search(wsettings, "Python programming")
    except DocChatError as e:
        one_sentence(e)
    else:
        assert hits == []


def test_search_fields_of_the_wrong_type_are_ignored_and_control_characters_removed(server, wsettings):
    body = {"query": {"search": [{"title": PY_TITLE, "pageid": "23862", "snippet": "\x1b[31mred\x1b[0m <i>text</i>"},
                                 {"title": "Monty Python", "pageid": [1], "snippet": {"a": 1}}]}}
    server.respond({"list": "search"}, body)
    a, b = W.search(wsettings, "Python programming")
    assert (a.page_id, a.snippet) == (PY_ID, "[31mred [0m text")
    assert (b.title, b.page_id, b.snippet, b.url) == ("Monty Python", 0, "", "https://en.wikipedia.org/wiki/Monty_Python")


@pytest.mark.parametrize("fields, error", [
    ({"pageid": [PY_ID]}, WikipediaPageMissing), ({"pageid": True}, WikipediaPageMissing),
    ({"lastrevid": "12x"}, WikipediaBadResponse), ({"extract": {"text": "x"}}, WikipediaBadResponse),
    ({"title": "T" * 10_000}, WikipediaBadResponse), ({"title": "\x1b[2J"}, WikipediaBadResponse),
])
def test_malformed_article_fields_are_one_sentence(server, wsettings, fields, error):
    server.respond({"titles": PY_TITLE, "prop": "extracts"}, python_body(**fields))
    with W.WikipediaClient(wsettings) as c, pytest.raises(error) as e:
        W.fetch_article(c, "en", PY_TITLE)
    one_sentence(e.value)


def test_an_oversized_api_error_is_shortened_to_one_line(server, wsettings):
    server.respond({"list": "search"}, {"error": {"code": "c" * 5000, "info": "line\n" * 100_000}})
    with pytest.raises(WikipediaAPIError) as e:
        W.search(wsettings, "Python programming")
    assert one_sentence(e.value).startswith("Wikipedia's API reported a problem: line line")
