"""DocChat's public demo on Streamlit Community Cloud, deployed from `main`: the repository's app.py, in demo mode.

Community Cloud reads the dependency file beside the entry point first, then the one at the repository's root
(docs.streamlit.io, "App dependencies"): the requirements.txt beside this file installs PyTorch's CPU-only wheel,
where the root's would pull the multi-GB CUDA build. It runs `streamlit run` from the repository's root, so the
root's .streamlit/config.toml applies. Streamlit puts this file's folder on the import path and finds the pages
beside it: rag_core, ui and pages here are links to the repository's own folders, so the code that runs is main's.

Main file path on share.streamlit.io: deploy/streamlit-cloud/streamlit_app.py (README, "Host the demo").
"""
import os
import runpy
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app.py"

# The public demo, unless the environment or the app's secrets (which take precedence) set DOCCHAT_MODE.
os.environ.setdefault("DOCCHAT_MODE", "demo")
runpy.run_path(str(APP), run_name="__main__")
