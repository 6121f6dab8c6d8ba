"""Progress bars on a terminal only (CI logs and pipes stay clean)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PROGRESS_MIN_BYTES = 8 * 1024 * 1024


class unit_progress:
    """A progress bar over units of work."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.progress: Any = None

    def __enter__(self) -> Callable[[int, int], None] | None:
        if not sys.stderr.isatty():
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self.progress = Progress(
            BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
        )
        self.progress.start()
        task = self.progress.add_task(self.description, total=None)

        def update(done: int, total: int) -> None:
            self.progress.update(task, completed=done, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


class file_progress:
    """A progress bar per large file."""

    def __init__(self) -> None:
        self.progress: Any = None

    def __enter__(self) -> Callable[[Path, int], Callable[[int], None] | None] | None:
        if not sys.stderr.isatty():
            return None
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            transient=True,
        )
        self.progress.start()

        def factory(path: Path, size: int) -> Callable[[int], None] | None:
            if size < _PROGRESS_MIN_BYTES:
                return None
            task = self.progress.add_task(path.name, total=size)
            return lambda n: self.progress.advance(task, n)

        return factory

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
