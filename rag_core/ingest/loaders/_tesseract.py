"""Where Tesseract is installed on macOS and Windows, to find its language data (rag_core.ingest.loaders.ocr).

PyMuPDF brings Tesseract's engine; it needs only the language packs ("tessdata"). Homebrew puts them in
<prefix>/share/tessdata beside <prefix>/bin/tesseract (/opt/homebrew on Apple silicon, /usr/local on Intel), MacPorts in
/opt/local, and the Windows installer (UB Mannheim) in C:\\Program Files\\Tesseract-OCR\\tessdata beside tesseract.exe.
An app started from the Dock or the Start menu does not see a shell's PATH, so these folders are looked in too.
"""
from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

#: Homebrew on Apple silicon, Homebrew on Intel Macs (and source installs), MacPorts.
UNIX_PROGRAM_FOLDERS = ("/opt/homebrew/bin", "/usr/local/bin", "/opt/local/bin")


def tesseract_folders() -> list[Path]:
    """The folders Tesseract's installers put its program in, for this system."""
    if sys.platform == "win32":
        bases = [os.environ.get("PROGRAMFILES") or r"C:\Program Files", os.environ.get("PROGRAMFILES(X86)"),
                 os.path.join(os.environ["LOCALAPPDATA"], "Programs") if os.environ.get("LOCALAPPDATA") else None]
        return [Path(base) / "Tesseract-OCR" for base in bases if base]
    return [Path(folder) for folder in UNIX_PROGRAM_FOLDERS]


def tessdata_beside_program() -> list[str]:
    """Language-data folders beside a Tesseract program found on PATH or in `tesseract_folders()`, in that order:
    <folder>/tessdata (the Windows installer) and <prefix>/share/tessdata (Homebrew, MacPorts, Linux)."""
    folders = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p] + tesseract_folders()
    found: list[str] = []
    for folder in folders:
        for program in (folder / "tesseract", folder / "tesseract.exe"):
            if not program.is_file():
                continue
            for place in dict.fromkeys((program.parent, program.resolve().parent)):  # Homebrew links into its Cellar
                found += [str(place / "tessdata"), str(place.parent / "share" / "tessdata"),
                          *sorted(glob.glob(str(place.parent / "share" / "tesseract-ocr" / "*" / "tessdata")),
                                  reverse=True)]
    return list(dict.fromkeys(found))
