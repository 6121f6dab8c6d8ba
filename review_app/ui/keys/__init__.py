"""The review page's keyboard: a small Streamlit component (plain HTML/JS, no build).

It draws the labeling panel (turn, label keys, the definition of the chosen code, the
rationale) pinned beside the transcript, listens for keys on the page itself (its frame
is same-origin), keeps its own focus so the next key goes to the next turn at once,
and queues each label key as ``(seq, turn, code)``. The whole unacknowledged queue is
the component's value; the page stores it with
:func:`review_app.services.labels.key_events.apply_key_events` and hands back the highest
sequence number stored (``acked``), so a re-sent queue is never applied twice. A queue
a render leaves unacknowledged (the database was busy) is sent again after 2 s, by one
timer that a new key makes unnecessary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st
import streamlit.components.v1 as components

FRONTEND = Path(__file__).resolve().parent / "frontend"
KEY = "review_keys"

_component = components.declare_component("review_keys", path=str(FRONTEND))


EARLY = (Path(__file__).resolve().parent / "early.html").read_text(encoding="utf-8")


def early_keys() -> None:
    """Catch label keys from the first moments of a page load, before the panel is up.

    Drawn first by the entry script, so it reaches the browser with the first message
    of a run; the panel replays what it caught (review page only)."""
    st.html(EARLY, unsafe_allow_javascript=True, width=1)


def keyboard(**args: Any) -> Any:
    """Draw the panel; returns the last queue the browser sent (or ``None``)."""
    return _component(key=KEY, default=None, **args)
