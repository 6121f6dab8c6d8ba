"""Rendering untrusted strings without ever interpreting them.

Transcript text, rationales and anything else that came from an import is shown
with ``st.text`` (literal). Short identifiers (roles, actions, codes) that appear
inside Streamlit's Markdown (captions, alerts) go in code spans, where Markdown is
not interpreted; anything that could break out of a code span is shown as a
placeholder instead.
"""

from __future__ import annotations

import re

# No backtick, backslash or whitespace other than inner plain spaces (a code span
# drops one leading and trailing space), so a name like "Ana Lopez" stays readable.
_IDENTIFIER = re.compile(r"[^`\s\\](?:(?:[^`\s\\]| ){0,118}[^`\s\\])?")


def code_span(value: object) -> str:
    """A Markdown code span for a short identifier, never a link or an image."""
    text = str(value)
    if _IDENTIFIER.fullmatch(text):
        return f"`{text}`"
    return "`(unprintable name)`"


def code_list(values: list[str] | tuple[str, ...]) -> str:
    return ", ".join(code_span(v) for v in values) if values else "nothing"
