"""The Streamlit Community Cloud entry point (deploy/streamlit-cloud/streamlit_app.py) serves main's app in demo mode:
the same Chat page as app.py, the Library with the shared samples, through AppTest run on the entry point itself
(real model, real embedded Qdrant on a temp folder, the real bundled samples; no model server)."""
from __future__ import annotations

import os

import pytest
from ui_helpers import ROOT, plain, texts

ENTRY = ROOT / "deploy" / "streamlit-cloud" / "streamlit_app.py"
SAMPLE_TITLES = {"DocChat demo guide", "The Zen of Python", "Python (programming language)"}


def _page(at) -> str:
    """Every sentence on the page (markdown, captions, alerts), escapes removed."""
    return plain("\n".join(texts(at.markdown) + texts(at.caption) + texts(at.info) + texts(at.warning)
                           + texts(at.error) + texts(at.success)))


@pytest.mark.slow
def test_the_cloud_entry_point_serves_main_s_app_in_demo_mode(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from ui import state

    monkeypatch.setenv("DOCCHAT_MODE", "local")
    monkeypatch.delenv("DOCCHAT_MODE")  # unset, as on Community Cloud without secrets; unset again afterwards
    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens: quoted answers
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    state.reset_runtime()
    try:
        cloud = AppTest.from_file(str(ENTRY), default_timeout=240)
        cloud.run()
        assert not cloud.exception, cloud.exception
        assert os.environ["DOCCHAT_MODE"] == "demo"
        chat = _page(cloud)
        assert "Public demo" in chat and cloud.chat_input, chat[:500]

        same = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)  # the repository's own entry point
        same.run()
        assert not same.exception and _page(same) == chat

        cloud.switch_page("pages/library.py").run()  # the pages beside the entry point are main's
        assert not cloud.exception, cloud.exception
        library = _page(cloud)
        assert all(title in library for title in SAMPLE_TITLES), library[:800]
    finally:
        state.reset_runtime()
