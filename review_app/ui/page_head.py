"""The early-key script in the head of the page the server sends, not only in a run.

A key pressed after a reload but before the first run's first element reaches the
browser (Streamlit's scripts loading, the websocket opening, the run starting: about
0.3 s) found no listener and was lost. The ``serve`` process (review_app/ui/launch.py)
therefore serves Streamlit's ``index.html`` with ``early.html`` at the top of its
``<head>``: the listener is there from the document's first moment and keeps every
label key until the panel replays it (review_app/ui/keys/frontend/index.html).

How: a directory of links to Streamlit's static files, but for a copy of
``index.html`` with the script added, and Streamlit told to serve that directory
(``streamlit.file_util.get_static_dir``, read when the server builds its routes). If
Streamlit's ``index.html`` has no ``<head>``, nothing changes: the entry script still
draws the same listener with the first element of every run (``panel.early_keys``).
Outside ``review_app.ui.keys.panel`` (which declares a component when imported): the
launcher calls it before Streamlit starts.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

EARLY = Path(__file__).resolve().parent / "keys" / "early.html"
HEAD = "<head>"


def patched_index(text: str, script: str) -> str | None:
    """Streamlit's ``index.html`` with ``script`` first in its head (None: no head)."""
    at = text.find(HEAD)
    if at < 0:
        return None
    at += len(HEAD)
    return text[:at] + "\n" + script + text[at:]


def static_dir_with_early_keys(original: Path, target: Path) -> Path | None:
    """``target`` made a copy of the static directory ``original`` (links to every entry
    but ``index.html``, which gets the script); None when ``index.html`` has no head."""
    index = patched_index(
        (original / "index.html").read_text(encoding="utf-8"), EARLY.read_text(encoding="utf-8")
    )
    if index is None:
        return None
    target.mkdir(parents=True, exist_ok=True)
    for entry in original.iterdir():
        if entry.name != "index.html":
            (target / entry.name).symlink_to(entry)
    (target / "index.html").write_text(index, encoding="utf-8")
    return target


def install() -> bool:
    """Make this process's Streamlit server send the script in every page's head.
    Returns whether it did (Streamlit's layout may change: then it does nothing)."""
    try:
        from streamlit import file_util
    except ImportError:
        return False
    original = Path(file_util.get_static_dir())
    target = Path(tempfile.mkdtemp(prefix="review-app-static-"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)  # the links, not their targets
    try:
        served = static_dir_with_early_keys(original, target / "static")
    except OSError:
        served = None
    if served is None:
        return False
    file_util.get_static_dir = lambda: str(served)
    return True
