"""Errors a user can act on.

Every error caused by bad input is an :class:`InputError`: one sentence that names
the place (file, line, field) and what is wrong there. The command line prints it
to stderr and exits with code 2; the pages show it as an error box. Nothing that
raised an ``InputError`` has stored anything.

This module imports nothing of the project, so every layer may raise these errors:
the core and the services, and ``storage`` too (:class:`DatabaseBusy`).
"""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: a file, a line in it, a field of a record, or an option.

    ``str(error)`` is the whole message, for example
    ``cases.jsonl, line 3, field transcript[2].turn: expected an integer, got "4"``.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self.describe())

    def describe(self) -> str:
        place = []
        if self.source:
            place.append(self.source)
        if self.line is not None:
            place.append(f"line {self.line}")
        if self.field:
            place.append(f"field {self.field}")
        if place:
            return f"{', '.join(place)}: {self.message}"
        return self.message

    def located(self, *, source: str | None = None, line: int | None = None) -> InputError:
        """A copy of this error with the file (and line) filled in where missing."""
        return InputError(
            self.message,
            source=self.source or source,
            line=self.line if self.line is not None else line,
            field=self.field,
        )


class PermissionDenied(Exception):
    """The signed-in person's role does not allow this action."""


class NotFound(Exception):
    """A case, rubric, reviewer or run that was asked for does not exist."""


class DatabaseBusy(Exception):
    """Another writer held the database's write lock for longer than the busy timeout
    (SQLite's "database is locked"). The transaction that waited stored nothing; the
    same action can simply be tried again."""
