"""SQLite writers wait their turn: a lock file beside the database, taken before
``BEGIN IMMEDIATE`` and released when the transaction ends.

SQLite's own busy handler retries a locked database after sleeps that grow from
1 ms to 100 ms. Under many writers (sixteen reviewers on one server, or several
``serve`` processes on one file) a writer that has waited long sleeps long, and
newcomers, still at 1 ms, take the lock in the gaps: the slowest saves wait for
seconds. Here a writer blocks on ``flock`` instead; the kernel wakes waiters as
soon as the lock is free, so the lock passes from one writer to the next without a
sleep and no writer is overtaken by the polling of others. Measured in
``benchmarks/bench_writers.py`` (16 writer processes).

The lock is an advisory ``flock`` on ``<database>.write-queue``: it binds every
Role Review process on the machine, threads included (each connection opens its own
file description), and is released by the kernel when a process dies, so a killed
writer never blocks the rest. Other programs writing the file directly still meet
SQLite's own lock and busy timeout, as before. ``REVIEW_APP_SQLITE_WRITE_QUEUE=0``
turns the queue off (SQLite's busy handler alone).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

WRITE_QUEUE_ENV = "REVIEW_APP_SQLITE_WRITE_QUEUE"


def write_queue_enabled() -> bool:
    return os.environ.get(WRITE_QUEUE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def lock_path(database: str | Path) -> Path:
    path = Path(database).expanduser()
    return path.with_name(path.name + ".write-queue")


class WriteQueueTimeout(Exception):
    """The lock was not ours within the timeout."""


def _open_lock_file(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags, 0o600)


def acquire(path: Path, timeout: float) -> int:
    """A file descriptor holding the exclusive lock on ``path``; closing it releases.

    Raises :class:`WriteQueueTimeout` when the lock stays taken for ``timeout`` seconds.
    """
    fd = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        pass
    except BaseException:
        os.close(fd)
        raise
    # Wait in the kernel (no polling) on a helper thread, so the wait can time out.
    guard = threading.Lock()
    acquired = threading.Event()
    state: dict[str, Any] = {"abandoned": False, "error": None}

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as error:  # pragma: no cover - flock on a regular file
            state["error"] = error
        with guard:
            if state["abandoned"] or state["error"] is not None:
                os.close(fd)  # gives the lock (if taken) to the next in line
            else:
                acquired.set()

    threading.Thread(target=wait, name="sqlite-write-queue", daemon=True).start()
    if acquired.wait(timeout):
        return fd
    with guard:
        if acquired.is_set():
            return fd
        state["abandoned"] = True
        if state["error"] is not None:
            raise state["error"]
    raise WriteQueueTimeout(f"the write lock stayed taken for {timeout:g} s")


class QueuedConnection(sqlite3.Connection):
    """A sqlite3 connection that gives the write lock back when its transaction ends."""

    write_lock_fd: int | None = None

    def hold_write_lock(self, path: Path, timeout: float) -> None:
        if self.write_lock_fd is None:
            self.write_lock_fd = acquire(path, timeout)

    def release_write_lock(self) -> None:
        fd, self.write_lock_fd = self.write_lock_fd, None
        if fd is not None:
            os.close(fd)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.release_write_lock()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.release_write_lock()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.release_write_lock()
