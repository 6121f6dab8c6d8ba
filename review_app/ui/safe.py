"""Showing untrusted text (from data or from the address) without ever interpreting it.

Streamlit renders Markdown in ``st.markdown``, ``st.write``, alerts (``st.error`` and
kin), captions, headings, toasts, and in the labels of links, buttons, expanders and
other widgets (``help=`` tooltips too). In any of them ``![x](http://host/p.png)``
fetches an image from that host and ``[text](http://host/)`` draws a link. So every
string built from data (case ids, names, codes, reasons, file names, error messages
that quote them) reaches such a call only through this module:

* :func:`escape`: any text, shown literally: every ASCII punctuation character is
  backslash-escaped (CommonMark lets any of them be escaped), so no image, link,
  emphasis, HTML, heading, list, table, ``:material/...:`` icon, ``:color[...]``
  directive or ``$`` formula can start; line breaks stay line breaks. GitHub's
  autolinks (``http://...``, ``www.``, ``name@host.org``, linked even without
  brackets) are found in the text after escapes are resolved, so a WORD JOINER
  (U+2060, invisible) goes after ``http``/``https``/``www`` and before ``@``.
* :func:`code_span`: a short identifier in a code span (literal too, and set apart).
* :func:`error_text`: an exception's message for an alert, escaped.

Long text (transcripts, rationales, notes) goes to ``st.text`` or ``st.code``, which
never interpret it. ``tests/test_page_markdown.py`` scans every page for Markdown
calls fed with anything but literals and this module's output.
"""

from __future__ import annotations

import re
import string

# No backtick, backslash or whitespace other than inner plain spaces (a code span
# drops one leading and trailing space), so a name like "Ana Lopez" stays readable.
_IDENTIFIER = re.compile(r"[^`\s\\](?:(?:[^`\s\\]| ){0,118}[^`\s\\])?")
_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_AUTOLINK_START = re.compile(r"(https?|www)(?=[:.])", re.IGNORECASE)
WORD_JOINER = "\u2060"


def escape(value: object) -> str:
    """``value`` as Markdown that renders exactly its text: nothing in it is markup.

    Every ASCII punctuation character gets a backslash (``![x](u)`` becomes
    ``\\!\\[x\\]\\(u\\)``, shown as typed); a line break becomes a hard break (two
    spaces and a newline), so a message of several lines keeps them. An autolink
    cannot start either: see the module's description.
    """
    text = _AUTOLINK_START.sub(rf"\1{WORD_JOINER}", str(value)).replace("@", WORD_JOINER + "@")
    escaped = _PUNCTUATION.sub(r"\\\1", text)
    return _LINE_BREAK.sub("  \n", escaped)


def code_span(value: object) -> str:
    """A Markdown code span for a short identifier, never a link or an image."""
    text = str(value)
    if _IDENTIFIER.fullmatch(text):
        return f"`{text}`"
    return "`(unprintable name)`"


def code_list(values: list[str] | tuple[str, ...]) -> str:
    return ", ".join(code_span(v) for v in values) if values else "nothing"


def error_text(error: BaseException) -> str:
    """An exception's message for ``st.error`` and kin: escaped (it may quote an id
    from the address, a file name, a value from a file)."""
    return escape(str(error))
