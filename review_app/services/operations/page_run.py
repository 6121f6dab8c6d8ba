"""Reads made once per page run: the data tokens' parts and other cheap reads a page
asks for several times while it draws.

Inside :func:`one_token_read` (the entry script wraps every page run in it) each part of
the data tokens (a version's labels and gold labels, its judge runs, its audit samples,
the cases) is read from the database once and reused: the judge page asks for five
reports, whose tokens read the same parts. A change made by others shows at the next run;
a commit made inside the block forgets what was read, so what is asked after it sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.rubrics.model import Rubric
from storage.engine import on_every_commit

T = TypeVar("T")

# (engine, part, rubric id, version) -> a part of the data tokens, read once inside
# :func:`one_token_read`.
_TOKEN_PARTS: ContextVar[dict[tuple[Any, ...], Any] | None] = ContextVar(
    "token_parts", default=None
)


@contextmanager
def one_token_read() -> Iterator[None]:
    """Inside this block each part of the data tokens (a version's labels and gold
    labels, its judge runs, its audit samples, the cases) is read from the database once
    and reused: for one run of a page, whose reports read the same parts (the judge page
    asks for five reports). A change made by others shows at the next run; a commit made
    inside the block (this run's own label, gold label, verdicts, stored report) forgets
    the parts read, so a report asked for after it is of the data with it."""
    token = _TOKEN_PARTS.set({})
    try:
        yield
    finally:
        _TOKEN_PARTS.reset(token)


def _forget_token_parts() -> None:
    # At every commit of the process, in the committing thread's context: only a page
    # run inside one_token_read has parts to forget.
    parts = _TOKEN_PARTS.get()
    if parts:
        parts.clear()


on_every_commit(_forget_token_parts)


def token_part(
    engine: Engine,
    session: Session,
    name: str,
    read: Callable[..., Any],
    version: Rubric | None = None,
) -> Any:
    """One part of the data tokens (``labels``, ``judge``, ``audit`` of ``version``;
    ``cases``), read with ``read(session, ...)``, or reused when read earlier inside
    :func:`one_token_read` (one page run): for the reports' tokens and for what else a
    page checks against them (the judge runs' listings). A building block: the caller
    authorized its actor."""
    known = _TOKEN_PARTS.get()
    where = {} if version is None else {"rubric_id": version.id, "version": version.version}
    memo_key = (engine, name, *where.values())
    if known is not None and memo_key in known:
        return known[memo_key]
    found = read(session, **where)
    if known is not None:
        known[memo_key] = found
    return found


def run_memo(engine: Engine, name: str, read: Callable[[], T]) -> T:
    """``read()`` once per :func:`one_token_read` block (one run of a page) for ``name``;
    outside such a block, every time. Like the reports' token parts, forgotten at a
    commit made inside the block."""
    known = _TOKEN_PARTS.get()
    memo_key = (engine, name)
    if known is not None and memo_key in known:
        found: T = known[memo_key]
        return found
    value = read()
    if known is not None:
        known[memo_key] = value
    return value
