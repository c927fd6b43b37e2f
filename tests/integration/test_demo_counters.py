"""The demo Library's counters (issue 28, item 7): when the network's count is higher than this tab's, the line says
why (documents added in other tabs, also closed or reloaded ones, still count) and when they stop counting.

Real library and hub, real ingest of two short notes; time moves through the hub's injected clock."""
from __future__ import annotations

import pytest

from rag_core.demo.answers import usage_line
from rag_core.demo.hub import new_session_id
from rag_core.demo.quotas import MB, Usage
from rag_core.demo.workspace import DemoWorkspace
from rag_core.service.jobs import IngestQueue
from tests.integration.test_demo_quotas import HOME, OFFICE, Clock, hub_for, note

pytestmark = pytest.mark.remembered_vectors


@pytest.fixture
def clock():
    return Clock()


def test_a_closed_tabs_documents_are_said_with_when_they_are_deleted(library, clock):
    hub = hub_for(library, clock, demo_max_files_per_client=30, demo_session_idle_minutes=60)
    closed = hub.session(new_session_id(), HOME)  # a tab that added two files, then was closed (or reloaded)
    assert [closed.ingest_bytes(note(i), f"n{i}.txt").status for i in range(2)] == ["added", "added"]
    clock.now += 13 * 60
    queue = IngestQueue(library)
    try:
        ws = DemoWorkspace(hub.session(new_session_id(), HOME), queue)  # the new tab, from the same network
        line = ws.limits().usage_line or ""
        assert line.startswith("Your demo space: 0 of 10 documents") and "your network: 2 of 30 documents" in line
        assert ("Your network's count includes 2 documents added in other browser tabs (perhaps ones closed or "
                "reloaded since); each is deleted 60 minutes after its tab was last used: the first in about 48 "
                "minutes if they stay unused.") in line  # 47 minutes left, and the clean-up looks once a minute
        elsewhere = DemoWorkspace(hub.session(new_session_id(), OFFICE), queue).limits().usage_line or ""
        assert "your network" not in elsewhere and "other browser tabs" not in elsewhere  # another network's

        clock.now += 47 * 60 + 1  # the closed tab's hour is over: the clean-up deletes its files
        ws.session._touch()
        hub.cleanup_idle()
        line = ws.limits().usage_line or ""
        assert "your network" not in line and "other browser tabs" not in line
    finally:
        queue.close()


def test_one_document_elsewhere_is_said_in_the_singular():
    u = Usage(1, 10, MB, 50 * MB, 5, 2, 30, 2 * MB, 200 * MB, others_freed_in_s=59.0, idle_minutes=30)
    assert usage_line(u, 10).endswith(
        "Your network's count includes 1 document added in another browser tab (perhaps one closed or reloaded "
        "since); it is deleted 30 minutes after that tab was last used: in about 1 minute if it stays unused.")
