"""Where the web app's files are (app.py, pages/, .streamlit/config.toml, samples/), in a checkout or installed.

In the repository they stay at the top level, where `streamlit run app.py`, the Docker image and Streamlit Community
Cloud use them. An installed DocChat (`pip install .`, `pipx install .`, `uv tool install .`) has no checkout, so
its wheel carries the same files as the package `docchat_app`: pyproject.toml maps that package onto the checkout's
top level with setuptools' package-dir (`docchat_app` = "." whose only module is app.py, `docchat_app.pages` =
pages/, `docchat_app.samples` = samples/, and .streamlit/config.toml as package data). Chosen because nothing moves
or is copied, no build hook runs, and the installed folder has the checkout's layout, so Streamlit finds pages/ beside
app.py and the demo finds samples/ the same way in both. The package is located by name, never imported: it is a
folder of Streamlit scripts and data files, not code for rag_core to call.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

APP_PACKAGE = "docchat_app"  # the installed copy of the app's files (pyproject.toml, [tool.setuptools])
CONFIG = Path(".streamlit") / "config.toml"  # the project's Streamlit settings, relative to the app's folder
_CHECKOUT = Path(__file__).resolve().parents[2]


def is_app_dir(folder: Path) -> bool:
    """True when `folder` holds the web app: app.py beside .streamlit/config.toml."""
    return (folder / "app.py").is_file() and (folder / CONFIG).is_file()


def app_dir() -> Path:
    """The folder of app.py, pages/, .streamlit/config.toml and samples/: the checkout this code runs from, else the
    installed package `docchat_app` (else the checkout's path, so that the caller names the missing file)."""
    if is_app_dir(_CHECKOUT):
        return _CHECKOUT
    try:
        spec = importlib.util.find_spec(APP_PACKAGE)
    except (ImportError, ValueError):  # a broken installation: fall through to the checkout's path
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if is_app_dir(Path(location)):
            return Path(location)
    return _CHECKOUT
