"""Demo quotas that hold across sessions (issue 13, item 9): per client address and for the whole demo, for
documents, bytes, questions and page images, with Wikipedia imports counted by their text.

Real library (bundled model, embedded Qdrant on a temp folder), real ingest of small texts, the real Wikipedia client
against the replay server (tests/wiki_server.py); time moves through the hub's injected clock.
"""
from __future__ import annotations

import pytest
from wiki_server import WikiReplayServer

from rag_core.core.config import Settings, load_settings
from rag_core.core.errors import LimitReached, SettingsError
from rag_core.demo.hub import DemoHub, new_session_id
from rag_core.demo.quotas import MB, UNKNOWN_CLIENT, client_address
from rag_core.demo.workspace import DemoWorkspace
from rag_core.service.jobs import IngestQueue
from rag_core.service.workspace import LocalWorkspace
from tests.integration.test_wikipedia import PY_EXTRACT, PY_ID, PY_REV_ADDED, PY_TITLE, info_body, python_body

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

HOME, OFFICE, CAFE, LIBRARY = "203.0.113.7", "198.51.100.2", "192.0.2.44", "2001:db8:1:2::/64"


class Clock:
    """A clock the tests move by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def demo(data_dir, **kw) -> Settings:
    """Demo settings with roomy defaults; each test tightens the limit it is about."""
    base = dict(data_dir=data_dir, mode="demo", demo_max_files_per_session=10, demo_max_session_mb=50,
                demo_max_file_mb=10, demo_questions_per_minute=50, demo_max_files_per_client=50,
                demo_max_client_mb=100, demo_client_questions_per_minute=100, demo_total_files=100,
                demo_total_mb=500, demo_questions_per_minute_total=500, demo_session_idle_minutes=30)
    base.update(kw)
    return Settings(**base)


@pytest.fixture
def clock():
    return Clock()


def hub_for(library, clock, **kw) -> DemoHub:
    return DemoHub(library, demo(library.settings.library.data_dir, **kw), clock=clock)


def note(i: int) -> bytes:
    return f"Note {i}: the spare kettle is in cupboard number {i}.".encode()


def padded(mb: float, words: str = "Quota note about owls.") -> bytes:
    """A file of about `mb` MB that loads as one short sentence (cheap to embed)."""
    return words.encode() + b" " * int(mb * MB)


# --------------------------------------------------------------------------- documents per client
def test_new_sessions_from_one_address_cannot_exceed_its_document_cap(library, clock):
    hub = hub_for(library, clock, demo_max_files_per_session=3, demo_max_files_per_client=4)
    stored, refused = [], []
    for _ in range(10):  # the attack of the report: a fresh session each time, from the same address
        s = hub.session(new_session_id(), HOME)
        for i in range(2):
            try:
                r = s.ingest_bytes(note(len(stored)), f"note{i}.txt")
                assert r.status == "added", r
                stored.append((s, r.doc_id))
            except LimitReached as e:
                refused.append(str(e))
    assert len(stored) == 4 and len(library.documents()) == 4
    assert len(refused) == 16 and set(refused) == {
        "This demo already holds 4 documents from your network, the most it allows for one network; delete a "
        "document or try again later."}

    # Another address is independent; the usage line of a session from HOME shows its network's use.
    other = hub.session(new_session_id(), OFFICE)
    assert other.ingest_bytes(note(99), "office.txt").status == "added"
    queue = IngestQueue(library)
    try:
        line = DemoWorkspace(hub.session(new_session_id(), HOME), queue).limits().usage_line or ""
    finally:
        queue.close()
    assert line.startswith("Your demo space: 0 of 3 documents") and "your network: 4 of 4 documents" in line

    # Deleting one of the network's documents makes room again ...
    first, doc_id = stored[0]
    first.delete(doc_id)
    late = hub.session(new_session_id(), HOME)
    assert late.ingest_bytes(note(100), "late.txt").status == "added"
    with pytest.raises(LimitReached, match="from your network"):
        late.check_room("one more")
    # ... and so does the expiry of a session: its documents stop counting with it.
    clock.now += 20 * 60
    for s, _ in stored[2:]:
        s.documents()  # still active
    late.documents()
    clock.now += 11 * 60  # the session that held stored[1] has been idle 31 minutes
    assert stored[1][0].session_id in hub.cleanup_idle()
    late.check_room("one more")  # no LimitReached


def test_sessions_without_an_address_share_one_bucket(library, clock):
    hub = hub_for(library, clock, demo_max_files_per_client=1)
    a, b = hub.session(new_session_id()), hub.session(new_session_id(), None)
    assert hub.ledger.client_of(a.session_id) == hub.ledger.client_of(b.session_id) == UNKNOWN_CLIENT
    assert a.ingest_bytes(note(1), "a.txt").status == "added"
    with pytest.raises(LimitReached, match="from your network"):
        b.ingest_bytes(note(2), "b.txt")
    assert hub.session(new_session_id(), HOME).ingest_bytes(note(3), "c.txt").status == "added"


# --------------------------------------------------------------------------- bytes per client and for the demo
def test_bytes_per_client_and_for_the_whole_demo(library, clock):
    hub = hub_for(library, clock, demo_max_client_mb=1, demo_total_mb=2)
    a, b = hub.session(new_session_id(), HOME), hub.session(new_session_id(), HOME)
    assert a.ingest_bytes(padded(0.6), "a.txt").status == "added"
    with pytest.raises(LimitReached) as err:
        b.ingest_bytes(padded(0.6, "Another owl note."), "b.txt")
    assert str(err.value) == ("Adding “b.txt” would take this demo past its storage limit for your network (1 MB); "
                              "delete a document or try again later.")
    assert b.ingest_bytes(padded(0.3, "A small owl note."), "small.txt").status == "added"
    u = b.usage()
    assert u.bytes == len(padded(0.3, "A small owl note.")) and u.client_bytes == u.bytes + len(padded(0.6))

    # Other addresses have their own room, until the whole demo's storage is used up.
    assert hub.session(new_session_id(), OFFICE).ingest_bytes(padded(0.9, "Office owls."), "o.txt").status == "added"
    cafe = hub.session(new_session_id(), CAFE)
    with pytest.raises(LimitReached, match="past its total storage limit; try again later"):
        cafe.ingest_bytes(padded(0.5, "Cafe owls."), "cafe.txt")
    assert len(library.documents()) == 3


def test_whole_demo_document_cap_and_the_usage_line(library, clock):
    hub = hub_for(library, clock, demo_total_files=3)
    for i, address in enumerate((HOME, OFFICE, CAFE)):
        assert hub.session(new_session_id(), address).ingest_bytes(note(i), f"n{i}.txt").status == "added"
    s = hub.session(new_session_id(), LIBRARY)
    with pytest.raises(LimitReached) as err:
        s.ingest_bytes(note(9), "n9.txt")
    assert str(err.value) == ("The demo holds as many visitors' documents as it can right now; try again later, or "
                              "run DocChat on your own computer.")
    queue = IngestQueue(library)
    try:
        line = DemoWorkspace(s, queue).limits().usage_line or ""
    finally:
        queue.close()
    assert line.endswith("; the demo is full right now, so new documents must wait.")
    # Reservations of work not yet run count too: two queued uploads can't both take the last place.
    hub2 = hub_for(library, clock, demo_total_files=4)
    hub2.session(new_session_id(), HOME).upload_work(note(5), "q.txt")
    with pytest.raises(LimitReached, match="as many visitors' documents"):
        hub2.session(new_session_id(), OFFICE).upload_work(note(6), "r.txt")


# --------------------------------------------------------------------------- questions per minute
def test_questions_per_client_and_for_the_whole_demo(library, clock):
    hub = hub_for(library, clock, demo_questions_per_minute=3, demo_client_questions_per_minute=5,
                  demo_questions_per_minute_total=8)
    asked, refused = 0, []
    for _ in range(12):  # the report: 12 new sessions, one question each
        try:
            hub.session(new_session_id(), HOME).start_answer("Where is the kettle?")
            asked += 1
        except LimitReached as e:
            refused.append(str(e))
    assert asked == 5 and len(refused) == 7
    assert refused[0].startswith("Visitors from your network have asked 5 questions in the last minute, the most "
                                 "the demo allows for one network; please wait about 60 seconds")
    # Another address still asks, until the whole demo's rate is used up.
    office = hub.session(new_session_id(), OFFICE)
    for _ in range(3):
        office.start_answer("Where is the kettle?")
    with pytest.raises(LimitReached, match=r"^You have asked 3 questions in the last minute"):
        office.start_answer("Again?")
    with pytest.raises(LimitReached, match=r"^The demo has received 8 questions in the last minute.*about \d+ sec"):
        hub.session(new_session_id(), CAFE).start_answer("Where is the kettle?")
    clock.now += 61
    assert hub.session(new_session_id(), HOME).answer("Where is the kettle?").mode in ("quotes", "not_found")


# --------------------------------------------------------------------------- page images
def test_page_render_limits(library, clock):
    hub = hub_for(library, clock, demo_page_renders_per_minute=3, demo_client_page_renders_per_minute=5,
                  demo_page_renders_per_minute_total=7)
    queue = IngestQueue(library)
    try:
        def ws(address: str | None) -> DemoWorkspace:
            return DemoWorkspace(hub.session(new_session_id(), address), queue)

        a = ws(HOME)
        for _ in range(3):
            a.allow_page_render()
        with pytest.raises(LimitReached) as err:
            a.allow_page_render()
        assert str(err.value) == ("You have opened 3 page images in the last minute, the most the demo allows; please "
                                  "wait about 60 seconds, then open the page again.")
        b = ws(HOME)
        b.allow_page_render()
        b.allow_page_render()
        with pytest.raises(LimitReached, match="^Visitors from your network have opened 5 page images"):
            b.allow_page_render()
        c = ws(OFFICE)
        c.allow_page_render()
        c.allow_page_render()
        with pytest.raises(LimitReached, match="^The demo has drawn 7 page images in the last minute"):
            ws(CAFE).allow_page_render()
        clock.now += 61
        a.allow_page_render()
        b.allow_page_render()
        local = LocalWorkspace(library, queue)
        for _ in range(100):
            assert local.allow_page_render() is None  # no limit on one's own computer
    finally:
        queue.close()


# --------------------------------------------------------------------------- Wikipedia imports
def test_wikipedia_imports_count_their_text_and_are_checked_before_storing(library, clock):
    size = len(PY_EXTRACT.encode("utf-8"))
    with WikiReplayServer() as server:
        server.respond({"titles": PY_TITLE, "prop": "extracts"}, python_body(), times=None)
        hub = hub_for(library, clock, wikipedia_api=server.url_template, wikipedia_backoff_s=0.02,
                      demo_max_session_mb=1, demo_max_client_mb=1, demo_max_file_mb=1)
        a = hub.session(new_session_id(), HOME)
        r = a.import_wikipedia(PY_TITLE)
        assert r.status == "added"
        u = a.usage()
        assert (u.files, u.bytes, u.client_bytes) == (1, size, size)
        assert a.import_wikipedia(PY_TITLE).status == "unchanged" and a.usage().bytes == size  # not counted twice

        # Another session of the same network, nearly full: the article is fetched, then refused before storing.
        b = hub.session(new_session_id(), HOME)
        assert b.ingest_bytes(padded(1 - 1.5 * size / MB), "big.txt").status == "added"
        before = (sorted(d.doc_id for d in library.documents()), library.store.count_chunks())
        fetched = server.count()
        r = b.import_wikipedia(PY_TITLE)
        assert r.status == "failed" and r.error == (
            f"Adding “{PY_TITLE}” would take this demo past its storage limit for your network (1 MB); delete a "
            "document or try again later.")
        assert server.count() > fetched
        assert (sorted(d.doc_id for d in library.documents()), library.store.count_chunks()) == before
        assert b.usage().files == 1  # the refused article's place was given back

        # "Check for updates" replaces the article by its new revision, which goes on counting.
        new_rev = PY_REV_ADDED + 1
        server.respond({"pageids": str(PY_ID), "prop": "info"}, info_body({PY_ID: new_rev}), times=1)
        server.respond({"pageids": str(PY_ID), "prop": "extracts"}, python_body(rev=new_rev), times=1)
        report = a.refresh_wikipedia()
        assert [i.new_revision_id for i in report.changed] == [new_rev]
        [doc] = a.my_documents()
        assert doc.revision_id == new_rev and a.usage().bytes == size


# --------------------------------------------------------------------------- the client address
def test_client_address_rules():
    assert client_address(None) is None and client_address("") is None
    assert client_address("203.0.113.7") == "203.0.113.7"
    assert client_address("::ffff:203.0.113.7") == "203.0.113.7"
    # One IPv6 customer holds a /64: rotating addresses inside it does not give more room.
    assert client_address("2001:db8:1:2::1") == client_address("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == LIBRARY
    assert client_address("2001:db8:1:3::1") != LIBRARY
    # X-Forwarded-For only when the proxy is trusted, and then its last entry (the earlier ones are the client's).
    assert client_address("10.0.0.5", "198.51.100.2") == "10.0.0.5"
    assert client_address("10.0.0.5", "6.6.6.6, 198.51.100.2", trust_proxy=True) == "198.51.100.2"
    assert client_address(None, "198.51.100.2:51234", trust_proxy=True) == "198.51.100.2"
    assert client_address(None, "[2001:db8:1:2::9]:443", trust_proxy=True) == LIBRARY
    assert client_address("10.0.0.5", "not an address", trust_proxy=True) == "10.0.0.5"
    assert client_address("garbage") is None


def test_quota_settings_are_bounded_and_named():
    s = load_settings({"DOCCHAT_DEMO_MAX_FILES_PER_CLIENT": "7", "DOCCHAT_DEMO_TRUST_PROXY": "true",
                       "DOCCHAT_DEMO_TOTAL_MB": "300", "DOCCHAT_DEMO_PAGE_RENDERS_PER_MINUTE": "4"})
    assert (s.demo.max_files_per_client, s.demo.trust_proxy, s.demo.total_mb, s.demo.page_renders_per_minute) == (
        7, True, 300, 4)
    assert load_settings({}).demo.trust_proxy is False
    for var in ("DOCCHAT_DEMO_MAX_FILES_PER_CLIENT", "DOCCHAT_DEMO_MAX_CLIENT_MB", "DOCCHAT_DEMO_TOTAL_FILES",
                "DOCCHAT_DEMO_CLIENT_QUESTIONS_PER_MINUTE", "DOCCHAT_DEMO_QUESTIONS_PER_MINUTE_TOTAL",
                "DOCCHAT_DEMO_PAGE_RENDERS_PER_MINUTE_TOTAL", "DOCCHAT_DEMO_CLIENT_PAGE_RENDERS_PER_MINUTE"):
        with pytest.raises(SettingsError, match=f"^{var}=0 is not allowed"):
            load_settings({var: "0"})
    with pytest.raises(SettingsError, match="DOCCHAT_DEMO_TRUST_PROXY=maybe is not allowed: use true or false"):
        load_settings({"DOCCHAT_DEMO_TRUST_PROXY": "maybe"})
