"""Wikipedia import end to end: the real httpx client against a local replay server (tests/wiki_server.py)
serving real recorded API responses, the real embedding model and the real embedded Qdrant.

Constructed responses: the recordings answer the requests their libraries sent. rag_core asks for more in
one request (prop=extracts|info|pageprops, inprop=url). Where a recording lacks a field that request returns,
the helpers below add it and mark it `ADDED`. Article text is never written here: it always comes from a
recording.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wiki_server import FIXTURES, WikiReplayServer  # tests/ is on the path (pytest.ini)

from rag_core.adapters.cli.main import main
from rag_core.core.config import Settings, load_settings
from rag_core.core.errors import (
    WikipediaAPIError,
    WikipediaBadLanguage,
    WikipediaBadResponse,
    WikipediaBadTitle,
    WikipediaRateLimited,
    WikipediaRequestRejected,
    WikipediaServerError,
    WikipediaTimeout,
    WikipediaUnreachable,
)
from rag_core.service import wiki_sync
from rag_core.service.library import Library
from rag_core.sources import wikipedia as W
from rag_core.sources.wikipedia.client import _retry_after

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

ROOT = Path(__file__).resolve().parents[2]
PY_TITLE = "Python (programming language)"
PY_ID = 23862
DA_ID = 8091


def recorded(name: str):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


PY_EXTRACT = recorded("extracts_plaintext-with-sections_python-programming-language.json")["query"]["pages"][str(PY_ID)]["extract"]
DA_SUMMARY_TEXT = recorded("rest_page-summary_douglas-adams.json")["extract"]

# ADDED: the extract recording has no revision id or URL (its request did not ask for prop=info).
PY_REV_ADDED = 1345678901  # a stand-in revision id
PY_URL_ADDED = "https://en.wikipedia.org/wiki/Python_(programming_language)"  # MediaWiki's URL for the recorded title


def python_body(rev: int = PY_REV_ADDED) -> dict:
    """Recorded extract (plain text, == sections ==) + ADDED lastrevid/canonicalurl/fullurl."""
    body = recorded("extracts_plaintext-with-sections_python-programming-language.json")
    page = body["query"]["pages"][str(PY_ID)]
    page.update({"lastrevid": rev, "canonicalurl": PY_URL_ADDED, "fullurl": PY_URL_ADDED})  # ADDED
    return body


def adams_body(rev: int | None = None, by_pageid: bool = False) -> dict:
    """The recorded redirect "Adams, Douglas" -> "Douglas Adams" (formatversion=2; has lastrevid and canonicalurl).
    Its request asked for an HTML intro (exintro), so its `extract` is REPLACED by the plain-text extract of the
    same article from the REST summary recording of the same crawl (wptools, 2017). `rev` ADDED when given; for a
    by-pageid request the redirect list is dropped (no redirect is involved then)."""
    body = recorded("redirect_query-fv2_adams-douglas.json")
    page = body["query"]["pages"][0]
    page["extract"] = DA_SUMMARY_TEXT  # REPLACED (see above)
    if rev is not None:
        page["lastrevid"] = rev  # ADDED
    if by_pageid:
        del body["query"]["redirects"]
    return body


DA_REV = recorded("redirect_query-fv2_adams-douglas.json")["query"]["pages"][0]["lastrevid"]


def info_body(pages: dict[int, int | None]) -> dict:
    """prop=info by pageids, built from recorded page entries: {page_id: lastrevid (ADDED) or None = missing}.
    A missing page has the shape of the recording missing_info_pageid-minus-1.json with its page id."""
    known = {PY_ID: {"pageid": PY_ID, "ns": 0, "title": PY_TITLE},
             DA_ID: {"pageid": DA_ID, "ns": 0, "title": "Douglas Adams"}}
    missing = recorded("missing_info_pageid-minus-1.json")["query"]["pages"]["-1"]
    out = {}
    for pid, rev in pages.items():
        out[str(pid)] = dict(known[pid], lastrevid=rev) if rev else dict(missing, pageid=pid)  # ADDED
    return {"batchcomplete": "", "query": {"pages": out}}


@pytest.fixture
def server():
    with WikiReplayServer() as s:
        yield s


@pytest.fixture
def wsettings(server, tmp_path):
    """Settings for the replay server: short timeouts and backoff so fault tests stay fast."""
    return Settings(data_dir=tmp_path / "data", wikipedia_api=server.url_template, wikipedia_timeout_s=5.0,
                    wikipedia_backoff_s=0.02, wikipedia_retries=3, wikipedia_contact="docchat-tests@example.invalid")


@pytest.fixture
def wlib(wsettings, embedder):
    lib = Library(wsettings, embedder=embedder)
    yield lib
    lib.close()


def snapshot(lib: Library) -> tuple:
    """Everything a failure must leave alone: documents (ids, revisions, chunks, flags) and stored chunk count."""
    return (sorted((d.doc_id, d.revision_id, d.chunks, d.flags, d.title) for d in lib.documents()),
            lib.store.count_chunks())


def stored_chunks(lib: Library, doc_id: str):
    from rag_core.store.vector_store import METADATA_KEY, chunk_from_payload

    points = [p for batch in lib.store.backend.points(with_vectors=False) for p in batch
              if p.payload[METADATA_KEY]["doc_id"] == doc_id]
    return sorted((chunk_from_payload(p.payload) for p in points), key=lambda c: c.index)


# -- addresses and language codes ---------------------------------------------
@pytest.mark.parametrize("bad", ["en.evil.example", "en/../x", "evil.example#", "", "e", "english-language-x",
                                 "en:80", "127.0.0.1", "www", "en@evil.example", "en\nx"])
def test_bad_language_codes_are_refused_before_any_request(server, wsettings, bad):
    with pytest.raises(WikipediaBadLanguage):
        W.search(wsettings, "Python", lang=bad)
    with pytest.raises(WikipediaBadLanguage):
        W.api_url(Settings(), bad)
    r = wiki_sync.import_article(None, wsettings, "Python", lang=bad)  # type: ignore[arg-type] - fails before the library
    assert r.status == "failed" and "language code" in r.error
    assert server.count() == 0


def test_only_wikipedia_hosts_without_the_override():
    plain = Settings()
    assert W.api_url(plain, "de") == "https://de.wikipedia.org/w/api.php"
    assert W.api_url(plain, " EN\n") == "https://en.wikipedia.org/w/api.php"
    assert W.api_url(plain, " Simple ") == "https://simple.wikipedia.org/w/api.php"
    assert W.api_url(plain, "zh-min-nan") == "https://zh-min-nan.wikipedia.org/w/api.php"
    assert W.api_url(plain, "be-tarask") == "https://be-tarask.wikipedia.org/w/api.php"
    over = load_settings({"DOCCHAT_WIKIPEDIA_API": "http://127.0.0.1:8080/{lang}/w/api.php"})
    assert W.api_url(over, "fr") == "http://127.0.0.1:8080/fr/w/api.php"
    assert W.parse_article_ref("https://de.wikipedia.org/wiki/Berlin#Geschichte") == ("de", "Berlin")
    assert W.parse_article_ref("https://en.m.wikipedia.org/wiki/Python_%28programming_language%29", "fr") == (
        "en", PY_TITLE)
    assert W.parse_article_ref("  Douglas_Adams ", "en") == ("en", "Douglas Adams")
    for bad in ("", "   ", "A|B", "x" * 300, "[[Link]]"):
        with pytest.raises(WikipediaBadTitle):
            W.parse_article_ref(bad)
    assert W.article_url("en", "Hitchhiker's Guide (book)") == "https://en.wikipedia.org/wiki/Hitchhiker%27s_Guide_(book)"
    assert W.section_url(PY_URL_ADDED, "Design_philosophy_and_features") == PY_URL_ADDED + "#Design_philosophy_and_features"
    assert W.section_url(PY_URL_ADDED, None) == PY_URL_ADDED
    assert W.section_url("u", "100%25_sure") == "u#100%2525_sure"


# -- sections --------------------------------------------------------------------------
def test_sections_from_the_recorded_extract_are_exact():
    art = W.Article("en", PY_TITLE, PY_ID, PY_REV_ADDED, PY_URL_ADDED, PY_EXTRACT)
    doc = W.build_document(art, retrieved_at="2026-03-29T20:57:38+00:00")
    assert doc.text == PY_EXTRACT  # verbatim, == marker lines included
    src = doc.source
    assert (src.kind, src.title, src.url, src.license, src.revision_id, src.lang, src.page_id) == (
        "wikipedia", PY_TITLE, PY_URL_ADDED, "CC BY-SA 4.0", PY_REV_ADDED, "en", PY_ID)
    import hashlib

    assert src.sha256 == hashlib.sha256(PY_EXTRACT.encode()).hexdigest()
    assert src.retrieved_at == "2026-03-29T20:57:38+00:00"
    by_path = {s.heading_path: s for s in doc.sections}
    lead = doc.sections[0]
    assert lead.heading_path == () and lead.anchor is None and lead.char_start == 0
    assert PY_EXTRACT[lead.char_start:lead.char_end].startswith("Python is a high-level, general-purpose")
    hist = by_path[("History",)]
    assert hist.anchor == "History"
    assert PY_EXTRACT[hist.char_start:hist.char_end].startswith("Python was conceived in the late 1980s")
    assert PY_EXTRACT[:hist.char_start].rstrip().endswith("== History ==")
    sub = by_path[("Implementations", "Limitations of the reference implementation")]
    assert sub.anchor == "Limitations_of_the_reference_implementation"
    assert by_path[("Syntax and semantics", "Indentation")].anchor == "Indentation"
    for s in doc.sections:  # no heading line inside a section; ranges are ordered and tight
        body = PY_EXTRACT[s.char_start:s.char_end]
        assert "\n==" not in body and not body.startswith("==") and body == body.strip()
    assert all(a.char_end <= b.char_start for a, b in zip(doc.sections, doc.sections[1:], strict=False))
    # Lists of sources and links are kept in the text but not indexed.
    paths = {p[0] for p in by_path if p}
    assert not paths & {"See also", "References", "Further reading", "External links"}
    assert "== Further reading ==" in doc.text
    assert W.make_doc_id("en", PY_ID, PY_REV_ADDED) == doc.doc_id
    assert W.make_doc_id("en", PY_ID, PY_REV_ADDED + 1) != doc.doc_id
    from rag_core.service.library import scoped_doc_id

    assert scoped_doc_id(doc.doc_id, "alice") != doc.doc_id != scoped_doc_id(doc.doc_id, "bob")


def test_repeated_headings_get_numbered_anchors_like_mediawiki():
    # Parser input only (not a Wikipedia response): two sections share a heading.
    text = "Lead.\n\n== Works ==\n\n=== Reception ===\nA.\n\n== Life ==\n\n=== Reception ===\nB.\n\n== Notes ==\nC.\n"
    secs = W.split_sections(text)
    assert [(s.heading_path, s.anchor, text[s.char_start:s.char_end]) for s in secs] == [
        ((), None, "Lead."), (("Works", "Reception"), "Reception", "A."), (("Life", "Reception"), "Reception_2", "B.")]


# -- search ------------------------------------------------------------------------------
def test_search_returns_plain_snippets_and_sends_a_descriptive_user_agent(server, wsettings):
    hits = W.search(wsettings, "  Python   programming ")
    assert [h.title for h in hits[:2]] == [PY_TITLE, "History of Python"]
    assert hits[0].page_id == PY_ID and hits[0].url == PY_URL_ADDED
    assert hits[0].snippet.startswith("Python is a high-level, general-purpose programming language.")
    assert all("<" not in h.snippet and "&" not in h.snippet.replace(" & ", "") for h in hits)
    assert len(hits) == 10
    (req,) = server.seen()
    assert req.outcome == "file:search_list-search_python-programming.json"
    assert req.lang == "en" and req.params["srsearch"] == "Python programming" and req.params["list"] == "search"
    assert req.params["srnamespace"] == "0" and req.params["format"] == "json"
    assert req.user_agent.startswith("DocChat/") and "docchat-tests@example.invalid" in req.user_agent
    assert "httpx/" in req.user_agent
    assert [h.title for h in W.search(wsettings, "Python programming", limit=3)] == [h.title for h in hits[:3]]
    assert W.search(wsettings, "gobbilygook") == []
    assert W.search(wsettings, "   ") == [] and server.count() == 3  # blank words: no request


def test_api_error_in_a_200_response_becomes_a_clear_error(server, wsettings):
    server.serve_file("search_list-search_srwhat-title_api-error.json")
    with pytest.raises(WikipediaAPIError) as e:
        W.search(wsettings, "Python programming")
    assert e.value.code == "search-title-disabled"
    assert '"title" search is disabled.' in str(e.value)
    assert server.count() == 1  # never retried


# -- faults and retries -------------------------------------------------------------------
def test_429_with_retry_after_is_honoured_then_succeeds(server, wsettings):
    server.fault("429", retry_after="1")
    t0 = time.monotonic()
    hits = W.search(wsettings, "Python programming")
    assert time.monotonic() - t0 >= 0.95  # waited as told, not the 0.02 s backoff
    assert hits and [s.outcome for s in server.seen()] == ["fault:429", "file:search_list-search_python-programming.json"]


def test_503_twice_then_success_retries_with_backoff(server, wsettings):
    server.fault("5xx", times=2)
    assert W.search(wsettings, "Python programming")
    assert [s.status for s in server.seen()] == [503, 503, 200]


def test_persistent_5xx_gives_up_after_the_retries(server, wsettings):
    server.fault("5xx", times=None, status=502)
    with pytest.raises(WikipediaServerError) as e:
        W.search(wsettings, "Python programming")
    assert server.count() == wsettings.wikipedia.retries + 1 and "HTTP 502" in str(e.value)


def test_backoff_doubles_with_jitter_and_retry_after_dates_are_understood(server, wsettings):
    server.fault("5xx", times=None)
    waits: list[float] = []
    with (W.WikipediaClient(wsettings.with_overrides(wikipedia_backoff_s=0.5), sleep=waits.append) as client,
          pytest.raises(WikipediaServerError)):
        W.search(wsettings, "Python programming", client=client)
    assert len(waits) == 3 and server.count() == 4
    for n, w in enumerate(waits):  # 0.5 s * 2^n, jittered into [0.5x, 1.5x)
        assert 0.25 * 2 ** n <= w < 0.75 * 2 ** n
    import email.utils
    from datetime import UTC, datetime, timedelta

    import httpx

    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= _retry_after(httpx.Headers({"Retry-After": when})) <= 30
    assert _retry_after(httpx.Headers({"Retry-After": "7"})) == 7.0
    assert _retry_after(httpx.Headers()) is None


def test_too_long_retry_after_fails_at_once(server, wsettings):
    server.fault("429", times=None, retry_after="3600")
    t0 = time.monotonic()
    with pytest.raises(WikipediaRateLimited) as e:
        W.search(wsettings, "Python programming")
    assert time.monotonic() - t0 < 2 and server.count() == 1 and "3600" in str(e.value)


@pytest.mark.parametrize("status", [404, 400, 403])
def test_other_4xx_are_never_retried(server, wsettings, status):
    server.fault("status", times=None, status=status)
    with pytest.raises(WikipediaRequestRejected) as e:
        W.search(wsettings, "Python programming")
    assert server.count() == 1 and f"HTTP {status}" in str(e.value)


def test_timeouts_are_retried_then_reported(server, wsettings):
    fast = wsettings.with_overrides(wikipedia_timeout_s=0.3)
    server.fault("timeout", times=1, delay=1.0)
    assert W.search(fast, "Python programming")
    assert [s.outcome for s in server.seen()] == ["fault:timeout", "file:search_list-search_python-programming.json"]
    server.clear()
    server.fault("timeout", times=None, delay=1.0)
    with pytest.raises(WikipediaTimeout) as e:
        W.search(fast, "Python programming")
    assert server.count() == 4 and "4 attempts" in str(e.value)


def test_truncated_body_is_a_clear_error_without_retry(server, wsettings):
    server.fault("truncated")
    with pytest.raises(WikipediaBadResponse) as e:
        W.search(wsettings, "Python programming")
    assert "cut off" in str(e.value) and server.count() == 1


def test_unreachable_host_is_reported(wsettings):
    import socket

    s = socket.socket()  # find a closed port: bind, note, close
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    dead = wsettings.with_overrides(wikipedia_api=f"http://127.0.0.1:{port}/{{lang}}/w/api.php")
    with pytest.raises(WikipediaUnreachable):
        W.search(dead, "Python")


# -- import ------------------------------------------------------------------------------
@pytest.mark.slow
def test_import_article_with_sections_and_attribution(server, wsettings, wlib):
    server.respond({"titles": PY_TITLE, "prop": "extracts"}, python_body())
    stages = []
    r = wiki_sync.import_article(wlib, wsettings, "Python_(programming_language)", progress=lambda s, d, t: stages.append(s))
    assert r.status == "added", r.error
    assert (r.title, r.lang, r.revision_id, r.url, r.redirected_from) == (PY_TITLE, "en", PY_REV_ADDED, PY_URL_ADDED, None)
    assert r.doc_id == W.make_doc_id("en", PY_ID, PY_REV_ADDED) and r.chunks > 20
    assert stages[0] == "downloading" and "embedding" in stages and "saving" in stages
    (req,) = server.seen()
    assert set(req.params["prop"].split("|")) == {"extracts", "info", "pageprops"}
    assert req.params["explaintext"] == "1" and req.params["exsectionformat"] == "wiki" and req.params["redirects"] == "1"

    (info,) = wlib.documents()
    assert (info.kind, info.title, info.url, info.revision_id, info.lang, info.page_id, info.chunks) == (
        "wikipedia", PY_TITLE, PY_URL_ADDED, PY_REV_ADDED, "en", PY_ID, r.chunks)
    chunks = stored_chunks(wlib, r.doc_id)
    assert len(chunks) == r.chunks
    for c in chunks:  # verbatim text, exact offsets and full attribution on every chunk
        assert PY_EXTRACT[c.char_start:c.char_end] == c.text
        s = c.source
        assert (s.url, s.license, s.revision_id, s.lang, s.page_id, s.kind) == (
            PY_URL_ADDED, "CC BY-SA 4.0", PY_REV_ADDED, "en", PY_ID, "wikipedia")
        assert s.retrieved_at and s.added_at
        assert c.anchor == (W.anchor_for(c.heading_path[-1]) if c.heading_path else None)
    assert {c.anchor for c in chunks} >= {None, "History", "Indentation", "Performance"}
    hit = wlib.search("Who began working on Python in the late 1980s?", k=3)[0].chunk
    assert hit.doc_id == r.doc_id and W.section_url(hit.source.url, hit.anchor).startswith(PY_URL_ADDED)

    again = wiki_sync.import_article(wlib, wsettings, PY_TITLE)
    assert (again.status, again.doc_id, again.chunks) == ("unchanged", r.doc_id, r.chunks)
    assert wlib.store.count_chunks() == r.chunks and server.count() == 2


def test_redirect_is_followed_and_recorded(server, wsettings, wlib):
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())
    r = wiki_sync.import_article(wlib, wsettings, "Adams, Douglas")
    assert r.status == "added", r.error
    assert (r.title, r.redirected_from, r.revision_id) == ("Douglas Adams", "Adams, Douglas", DA_REV)
    assert r.url == "https://en.wikipedia.org/wiki/Douglas_Adams"
    (c, *_) = stored_chunks(wlib, r.doc_id)
    assert c.text.startswith("Douglas Noel Adams (11 March 1952 – 11 May 2001)") and c.anchor is None


def test_disambiguation_returns_candidates_and_imports_nothing(server, wsettings, wlib):
    r = wiki_sync.import_article(wlib, wsettings, "Douglas Adams (disambiguation)")
    assert r.status == "disambiguation" and r.doc_id is None
    assert "Douglas Adams" in r.candidates and "Doug Adams (baseball)" in r.candidates and len(r.candidates) == 10
    assert not any(":" in c for c in r.candidates)  # Talk: and Help: links are not candidates
    assert [s.params.get("prop") for s in server.seen()] == ["extracts|info|pageprops", "links"]
    bush = wiki_sync.import_article(wlib, wsettings, "Bush")  # flagged in formatversion=1 pageprops
    assert bush.status == "disambiguation" and bush.url == "https://en.wikipedia.org/wiki/Bush"
    assert wlib.documents() == [] and wlib.store.count_chunks() == 0
    assert server.unmatched == []


@pytest.mark.parametrize("title, shown", [("NonExistentPage_WikiAPI_Test_12345", "NonExistentPage WikiAPI Test 12345"),
                                          ("purpleberry", "Purpleberry")])
def test_missing_page_is_reported(server, wsettings, wlib, title, shown):
    r = wiki_sync.import_article(wlib, wsettings, title)
    assert r.status == "failed" and f"There is no article titled “{shown}” on en.wikipedia.org" in r.error
    assert wlib.documents() == []


def test_failed_imports_leave_the_library_exactly_as_it_was(server, wsettings, wlib):
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())
    assert wiki_sync.import_article(wlib, wsettings, "Adams, Douglas").status == "added"
    before = snapshot(wlib)
    for kind, kw in (("5xx", {"times": None}), ("truncated", {}), ("status", {"status": 404}),
                     ("429", {"times": None, "retry_after": "999"})):
        server.clear()
        server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body(rev=DA_REV + 1))
        server.fault(kind, **kw)
        r = wiki_sync.import_article(wlib, wsettings, "Adams, Douglas")
        assert r.status == "failed" and r.error, kind
        assert snapshot(wlib) == before, kind
    # A recorded body without a revision id is refused, not stored with a made-up one.
    server.clear()
    r = wiki_sync.import_article(wlib, wsettings, PY_TITLE)
    assert r.status == "failed" and "revision id" in r.error and snapshot(wlib) == before


def test_importing_a_newer_revision_replaces_the_older_one(server, wsettings, wlib):
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())
    old = wiki_sync.import_article(wlib, wsettings, "Adams, Douglas")
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body(rev=DA_REV + 5))
    new = wiki_sync.import_article(wlib, wsettings, "Adams, Douglas")
    assert new.status == "added" and new.replaced == (old.doc_id,) and new.revision_id == DA_REV + 5
    assert [d.doc_id for d in wlib.documents()] == [new.doc_id]
    mine = wiki_sync.import_article(wlib, wsettings, "Adams, Douglas", owner="alice")  # other owners keep their own copy
    assert mine.status == "added" and mine.doc_id != new.doc_id and mine.replaced == ()
    assert len(wlib.documents()) == 2


# -- refresh ----------------------------------------------------------------------------
@pytest.mark.slow
def test_refresh_sorts_articles_into_buckets(server, wsettings, wlib):
    server.respond({"titles": PY_TITLE, "prop": "extracts"}, python_body())
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())
    py = wiki_sync.import_article(wlib, wsettings, PY_TITLE)
    da = wiki_sync.import_article(wlib, wsettings, "Adams, Douglas")
    assert py.status == da.status == "added"
    check = {"prop": "info", "pageids": f"{PY_ID}|{DA_ID}"}

    # 1. Nothing changed upstream.
    server.respond(check, info_body({PY_ID: PY_REV_ADDED, DA_ID: DA_REV}))
    before = snapshot(wlib)
    rep = wiki_sync.refresh(wlib, wsettings)
    assert {i.doc_id for i in rep.unchanged} == {py.doc_id, da.doc_id} and rep.total == 2
    assert snapshot(wlib) == before and server.count(check) == 1  # one batched request for both

    # 2. Network trouble: everything "failed", nothing touched.
    server.fault("5xx", times=None, match={"prop": "info"})
    rep = wiki_sync.refresh(wlib, wsettings)
    assert {i.doc_id for i in rep.failed} == {py.doc_id, da.doc_id} and not rep.unchanged
    assert "HTTP 503" in rep.failed[0].message and snapshot(wlib) == before
    server.clear()

    # 3. Douglas Adams has a new revision, Python was deleted upstream.
    new_rev = DA_REV + 1000
    server.respond(check, info_body({PY_ID: None, DA_ID: new_rev}))
    server.respond({"pageids": str(DA_ID), "prop": "extracts"}, adams_body(rev=new_rev, by_pageid=True))
    dry = wiki_sync.refresh(wlib, wsettings, dry_run=True)
    assert dry.dry_run and [i.doc_id for i in dry.changed] == [da.doc_id] and dry.changed[0].new_revision_id == new_rev
    assert [i.doc_id for i in dry.removed_upstream] == [py.doc_id]
    assert snapshot(wlib) == before and server.count({"prop": "extracts"}) == 0  # dry run: nothing fetched or written

    # The changed article's re-fetch fails: it stays exactly as it was (and Python gets flagged).
    server.fault("5xx", times=None, match={"prop": "extracts"})
    rep = wiki_sync.refresh(wlib, wsettings)
    assert [i.doc_id for i in rep.failed] == [da.doc_id] and [i.doc_id for i in rep.removed_upstream] == [py.doc_id]
    assert wlib.store.get(da.doc_id).revision_id == DA_REV
    assert wlib.store.get(py.doc_id).flags == ("removed upstream",)
    server.clear()
    server.respond(check, info_body({PY_ID: None, DA_ID: new_rev}))
    server.respond({"pageids": str(DA_ID), "prop": "extracts"}, adams_body(rev=new_rev, by_pageid=True))

    seen_during_ingest = []

    def watch(stage, done, total):
        if stage in ("embedding", "saving"):  # the old copy must be listed while the new one is written
            seen_during_ingest.append(da.doc_id in {d.doc_id for d in wlib.documents()})

    rep = wiki_sync.refresh(wlib, wsettings, progress=watch)
    (ch,) = rep.changed
    assert ch.doc_id == da.doc_id and ch.new_revision_id == new_rev
    assert ch.new_doc_id == W.make_doc_id("en", DA_ID, new_rev)
    assert seen_during_ingest and all(seen_during_ingest)
    assert [i.doc_id for i in rep.removed_upstream] == [py.doc_id]
    docs = {d.doc_id: d for d in wlib.documents()}
    assert set(docs) == {py.doc_id, ch.new_doc_id}  # old revision gone, removed article kept
    assert docs[ch.new_doc_id].revision_id == new_rev and docs[py.doc_id].flags == ("removed upstream",)
    assert all(c.source.revision_id == new_rev for c in stored_chunks(wlib, ch.new_doc_id))
    assert stored_chunks(wlib, da.doc_id) == []
    assert wlib.store.count_chunks() == docs[py.doc_id].chunks + docs[ch.new_doc_id].chunks
    req = server.seen({"prop": "extracts", "pageids": str(DA_ID)})[-1]
    assert "titles" not in req.params  # re-fetched by page id, so a renamed article is still found

    # 4. Python is back upstream: the flag is cleared.
    server.clear()
    server.respond({"prop": "info", "pageids": f"{PY_ID}|{DA_ID}"}, info_body({PY_ID: PY_REV_ADDED, DA_ID: new_rev}))
    rep = wiki_sync.refresh(wlib, wsettings)
    assert len(rep.unchanged) == 2 and wlib.store.get(py.doc_id).flags == ()


def test_refresh_of_an_empty_library_sends_nothing(server, wsettings, wlib):
    rep = wiki_sync.refresh(wlib, wsettings)
    assert rep.total == 0 and server.count() == 0


# -- CLI ---------------------------------------------------------------------------------
def test_cli_wiki_search_as_a_user_runs_it(server, tmp_path):
    """The one real `python -m rag_core` process of the suite (the entry point's smoke test); the other command-line
    tests run main() in the test process (the `cli` fixture)."""
    env = {**os.environ, "DOCCHAT_WIKIPEDIA_API": server.url_template, "DOCCHAT_DATA_DIR": str(tmp_path / "d")}
    run = subprocess.run([sys.executable, "-m", "rag_core", "wiki-search", "Python", "programming"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "1. Python (programming language)"
    assert lines[1].startswith("   Python is a high-level, general-purpose programming language.")
    assert lines[2] == "   " + PY_URL_ADDED
    assert server.count() == 1


def test_cli_wiki_search_json_and_errors(server, monkeypatch, capsys):
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_API", server.url_template)
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_BACKOFF", "0.01")
    assert main(["wiki-search", "gobbilygook", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"lang": "en", "query": "gobbilygook", "hits": []}
    assert main(["wiki-search", "x", "--lang", "en.evil.example"]) == 2
    assert "not a Wikipedia language code" in capsys.readouterr().err
    server.fault("5xx", times=None)
    assert main(["wiki-search", "Python", "programming"]) == 2
    assert capsys.readouterr().err.strip() == ("Error: Wikipedia's servers are having trouble (HTTP 503, 4 attempts). "
                                               "Try again in a few minutes.")
    assert server.count() == 5  # 1 + 4 attempts; the bad language code never left the machine


def test_cli_wiki_and_refresh(server, tmp_path, monkeypatch, capsys, embedder):
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_API", server.url_template)
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_BACKOFF", "0.01")
    data = str(tmp_path / "cli")
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())

    assert main(["wiki", "Adams,", "Douglas", "--data-dir", data]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "“Adams, Douglas” redirected to “Douglas Adams”."
    assert out[1].startswith("added      Douglas Adams  (id wp-") and f"revision {DA_REV})" in out[1]
    assert out[2].strip() == "https://en.wikipedia.org/wiki/Douglas_Adams  ·  CC BY-SA 4.0"

    assert main(["wiki", "Adams, Douglas", "--data-dir", data, "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["status"] == "unchanged" and js["redirected_from"] == "Adams, Douglas" and js["title"] == "Douglas Adams"

    assert main(["wiki", "Douglas Adams (disambiguation)", "--data-dir", data]) == 3
    out = capsys.readouterr().out
    assert "is a disambiguation page" in out and "\n  Doug Adams (baseball)\n" in out

    assert main(["wiki", "purpleberry", "--data-dir", data, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "failed"

    server.respond({"prop": "info", "pageids": str(DA_ID)}, info_body({DA_ID: DA_REV + 1}))
    assert main(["wiki-refresh", "--dry-run", "--data-dir", data]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Checked 1 Wikipedia article (dry run: nothing was changed)."
    assert out[1:4] == ["unchanged (0)", "changed (1)", f"  Douglas Adams  [en, revision {DA_REV} → {DA_REV + 1}, id "
                        + W.make_doc_id("en", DA_ID, DA_REV) + "]"]
    server.fault("5xx", times=None, match={"prop": "info"})
    assert main(["wiki-refresh", "--data-dir", data, "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["dry_run"] is False and len(rep["failed"]) == 1 and "HTTP 503" in rep["failed"][0]["message"]
