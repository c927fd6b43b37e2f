"""The order `make test` hands tests to its two worker processes (tests/conftest.py): the browser tier first, in file
order, then the modules with slow tests. The order that counts is the one each worker collects (the scheduler sends
tests by that order), and a worker process has no `numprocesses` option: the hook must reorder there too."""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _root_conftest() -> Any:
    """tests/conftest.py loaded once more under a name of its own (pytest loaded it as one conftest among three)."""
    spec = importlib.util.spec_from_file_location("docchat_root_conftest", ROOT / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


class _Config:
    rootpath = ROOT

    def __init__(self, numprocesses: int | None, worker: bool) -> None:
        self.numprocesses = numprocesses
        if worker:
            self.workerinput = {"workerid": "gw0"}

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.numprocesses if name == "numprocesses" else default


def _item(nodeid: str, slow: bool = False) -> Any:
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: object() if slow and name == "slow" else None)


def _items() -> list[Any]:
    return [_item("tests/unit/test_a.py::test_quick"),
            _item("tests/integration/test_b.py::test_one", slow=True),
            _item("tests/e2e/test_app_browser.py::test_first"),
            _item("tests/integration/test_c.py::test_one", slow=True),
            _item("tests/integration/test_c.py::test_two", slow=True),
            _item("tests/e2e/test_demo_browser.py::test_second"),
            _item("tests/e2e/test_app_browser.py::test_third")]


@pytest.mark.parametrize(("numprocesses", "worker"), [(2, False), (None, True)], ids=["controller", "worker"])
def test_browser_tier_first_in_file_order_then_the_slowest_modules(numprocesses, worker):
    items = _items()
    _root_conftest().pytest_collection_modifyitems(_Config(numprocesses, worker), items)
    assert [i.nodeid for i in items] == [
        "tests/e2e/test_app_browser.py::test_first", "tests/e2e/test_demo_browser.py::test_second",
        "tests/e2e/test_app_browser.py::test_third",
        "tests/integration/test_c.py::test_one", "tests/integration/test_c.py::test_two",
        "tests/integration/test_b.py::test_one", "tests/unit/test_a.py::test_quick"]


def test_without_workers_nothing_moves():
    items = _items()
    before = [i.nodeid for i in items]
    _root_conftest().pytest_collection_modifyitems(_Config(None, False), items)
    assert [i.nodeid for i in items] == before


def test_the_browser_tier_is_one_scope_a_module_with_its_own_fixture_another_and_every_other_test_its_own():
    class Config:
        rootpath = ROOT
        option = SimpleNamespace(loadscopereorder=True, numprocesses=2, tx=["2*popen"], dist="loadgroup", maxworkerrestart=None)

        def getvalue(self, name: str) -> Any:
            return getattr(self.option, name)

        def getoption(self, name: str, default: Any = None) -> Any:
            return getattr(self.option, name, default)

    config = Config()
    scheduler = _root_conftest().pytest_xdist_make_scheduler(config, None)
    assert config.option.loadscopereorder is False  # the collection's order (above) is the order of the work
    split = scheduler._split_scope
    assert split("tests/e2e/test_app_browser.py::test_x") == split("tests/e2e/test_demo_browser.py::test_y")
    grouped = "tests/integration/test_real_llm.py"  # builds a module-scoped model server
    assert split(f"{grouped}::test_a") == split(f"{grouped}::test_b") == grouped
    assert split("tests/unit/test_suite_order.py::test_a") == "tests/unit/test_suite_order.py::test_a"
