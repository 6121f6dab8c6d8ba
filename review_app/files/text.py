"""Bytes to text: strict UTF-8, and the line of the first byte that is not; small files whole."""

from __future__ import annotations

from pathlib import Path

from review_app.errors import InputError
from review_app.files.limits import MAX_WHOLE_FILE_BYTES

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


def read_whole(path: Path) -> bytes:
    """The bytes of a file read whole: at most :data:`MAX_WHOLE_FILE_BYTES`;
    ``InputError`` names the file when it is larger or cannot be read."""
    source = str(path)
    try:
        if path.stat().st_size > MAX_WHOLE_FILE_BYTES:
            raise InputError(f"the file is larger than {MAX_WHOLE_FILE_BYTES} bytes", source=source)
        return path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot be read ({error.strerror})", source=source) from None


def read_text_file(path: Path, *, allow_bom: bool = False) -> str:
    """A text file read whole (:func:`read_whole`) as UTF-8; ``InputError`` names the
    file and line, and refuses a file with nothing but white space.

    ``allow_bom`` accepts the byte-order mark spreadsheets write at the start of CSV.
    """
    source = str(path)
    raw = read_whole(path)
    if not raw.strip():
        raise InputError("the file is empty", source=source)
    return decode_utf8(raw, source=source, allow_bom=allow_bom)
