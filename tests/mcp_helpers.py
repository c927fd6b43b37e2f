"""What the MCP tests share: a spawned server's environment and running an MCP client's coroutine."""
from __future__ import annotations

import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio


def free_port() -> int:
    """A TCP port nothing listens on at the moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The spawned server's environment: the tmp library, offline model, and an Ollama address nothing listens on
    (so `ask` falls back to the extractive answer at once, whatever runs on this machine)."""
    return {"DOCCHAT_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "OLLAMA_HOST": f"http://127.0.0.1:{free_port()}", **extra}


def run_async(main: Callable[[], Awaitable[None]]) -> None:
    """anyio.run(main) on a fresh thread: earlier tests in this process (Playwright's sync API in tests/e2e) leave an
    event loop running on the main thread, where a second loop cannot start."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            anyio.run(main)
        except BaseException as e:  # noqa: BLE001 - handed back to the test below
            failure.append(e)

    worker = threading.Thread(target=target, name="mcp-client")
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
