"""Bytes to text: strict UTF-8, and the line of the first byte that is not."""

from __future__ import annotations

from review_app.errors import InputError

UTF8_BOM = b"\xef\xbb\xbf"


def decode_utf8(data: bytes, *, source: str, allow_bom: bool = True) -> str:
    """UTF-8 bytes as text, or an ``InputError`` naming the line of the first bad byte.

    ``allow_bom`` drops the byte-order mark spreadsheets and Windows editors write at
    the start of a file; without it the mark stays in the text (for the caller to refuse).
    """
    body = data[len(UTF8_BOM) :] if allow_bom and data.startswith(UTF8_BOM) else data
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        line = body[: error.start].count(b"\n") + 1
        raise InputError("not valid UTF-8 text", source=source, line=line) from None
