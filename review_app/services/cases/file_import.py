"""What every file import shares: the file's hash for the audit log, and the check
that each record's case is stored, as an error naming the file, line and field."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from sqlmodel import Session

from review_app.errors import InputError
from storage.cases import event_actors

R = TypeVar("R", bound="Located")


class Located(Protocol):
    """A record read from a file: the line it came from and the case it is about."""

    @property
    def line(self) -> int: ...

    @property
    def case_id(self) -> str: ...


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record_error(message: str, *, source: str, record: Located, field: str) -> InputError:
    return InputError(message, source=source, line=record.line, field=field)


def with_stored_turns(
    session: Session, records: Sequence[R], *, source: str
) -> Iterator[tuple[R, dict[int, str]]]:
    """Each record with its case as stored (turn -> actor), in the order of ``records``.

    A record whose case is not in the database is an error naming its line.
    """
    actors = event_actors(session, case_ids=sorted({r.case_id for r in records}))
    for record in records:
        turns = actors.get(record.case_id)
        if turns is None:
            raise record_error(
                f"no case {record.case_id!r} in the database",
                source=source,
                record=record,
                field="case_id",
            )
        yield record, turns
