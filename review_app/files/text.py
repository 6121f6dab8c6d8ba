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


def read_whole(path: Path, *, limit: int = MAX_WHOLE_FILE_BYTES, too_large: str = "") -> bytes:
    """The bytes of a file read whole: at most ``limit`` bytes (:data:`MAX_WHOLE_FILE_BYTES`
    unless told); ``InputError`` names the file when it is larger (``too_large``, when
    given, is the refusal's message) or cannot be read.

    No more than ``limit`` bytes are read, whatever the file's size said a moment before
    (a file that grows, a device)."""
    source = str(path)
    refusal = too_large or f"the file is larger than {limit} bytes"
    try:
        if path.stat().st_size > limit:
            raise InputError(refusal, source=source)
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise InputError(f"cannot be read ({error.strerror or error})", source=source) from None
    if len(data) > limit:
        raise InputError(refusal, source=source)
    return data


def short_text_refusal(limit: int, kind: str, *, of: str = "file") -> str:
    """The message refusing a short text (a rubric, a judge prompt) over ``limit`` bytes:
    ``the file is larger than 1024 KB; a rubric is a short text``."""
    return f"the {of} is larger than {limit // 1024} KB; {kind} is a short text"


def read_short_text(path: Path, *, limit: int, kind: str) -> str:
    """A short text file read whole (a rubric's YAML, a judge prompt): at most ``limit``
    bytes (:func:`short_text_refusal`, ``kind`` saying what the file is), strict UTF-8
    (the line of the first bad byte), a leading byte-order mark dropped."""
    raw = read_whole(path, limit=limit, too_large=short_text_refusal(limit, kind))
    return decode_utf8(raw, source=str(path))


def check_short_text(
    text: str, *, limit: int, kind: str, source: str, field: str | None = None
) -> None:
    """The bound of :func:`read_short_text` for such a text typed, pasted or stored: its
    UTF-8 at most ``limit`` bytes, else ``InputError`` (``the text is larger than ...``)."""
    if len(text) > limit or len(text.encode("utf-8")) > limit:
        raise InputError(short_text_refusal(limit, kind, of="text"), source=source, field=field)


def holds_text(path: Path, text: str) -> bool:
    """Whether the file holds exactly ``text`` (as UTF-8); reads no more than its length."""
    expected = text.encode("utf-8")
    try:
        if path.stat().st_size != len(expected):
            return False
        with path.open("rb") as handle:
            return handle.read(len(expected) + 1) == expected
    except OSError:
        return False


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
