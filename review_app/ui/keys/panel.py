"""The review page's keyboard: a small Streamlit component (plain HTML/JS, no build).

It draws the labeling panel (turn, the version's key map: each code with its key, the
definition of the chosen code, the rationale) pinned beside the transcript, listens
for keys on the page itself (its frame is same-origin), keeps its own focus so the
next key goes to the next turn at once, and queues each label key as
``(seq, turn, code)``. The whole unacknowledged queue is
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

    The served page carries the same script in its head (review_app/ui/page_head.py),
    listening from the document's first moment; drawn first by the entry script too, it
    reaches the browser with the first message of a run where the page was served
    otherwise (a second copy does nothing). The panel replays what it caught."""
    st.html(EARLY, unsafe_allow_javascript=True, width=1)


def keyboard(**args: Any) -> Any:
    """Draw the panel; returns the last queue the browser sent (or ``None``)."""
    return _component(key=KEY, default=None, **args)
