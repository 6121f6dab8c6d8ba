"""SQLite writers wait their turn in the write queue (storage/write_queue.py)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from review_app.errors import DatabaseBusy
from storage import write_queue
from storage.engine import create_database_engine, read_only


def _engine(path: Path, **kwargs):  # type: ignore[no-untyped-def]
    engine = create_database_engine(f"sqlite:///{path}", **kwargs)
    with engine.begin() as connection:
        connection.execute(text("create table if not exists t (writer integer, n integer)"))
    return engine


def _lock_is_free(path: Path) -> bool:
    fd = os.open(write_queue.lock_path(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_the_lock_is_held_for_the_write_transaction_only(tmp_path: Path) -> None:
    path = tmp_path / "review.db"
    engine = _engine(path)
    try:
        assert _lock_is_free(path)
        with engine.begin() as connection:
            connection.execute(text("insert into t values (1, 1)"))
            assert not _lock_is_free(path)
        assert _lock_is_free(path)
        with pytest.raises(RuntimeError), engine.begin() as connection:
            connection.execute(text("insert into t values (1, 2)"))
            raise RuntimeError("rolled back")
        assert _lock_is_free(path)
        with read_only(engine).connect() as connection:  # a reader never queues
            connection.execute(text("select count(*) from t")).scalar_one()
            assert _lock_is_free(path)
        with engine.connect() as connection:
            assert connection.execute(text("select count(*) from t")).scalar_one() == 1
    finally:
        engine.dispose()


def test_a_writer_waiting_past_the_busy_timeout_gets_database_busy(tmp_path: Path) -> None:
    path = tmp_path / "review.db"
    _engine(path).dispose()
    impatient = _engine(path, busy_timeout_ms=200)
    holder = write_queue.acquire(write_queue.lock_path(path), 1.0)
    try:
        began = time.monotonic()
        busy = pytest.raises(DatabaseBusy, match=r"more than 0\.2 s")
        with busy, impatient.begin() as connection:
            connection.execute(text("insert into t values (2, 1)"))
        assert 0.15 < time.monotonic() - began < 5
    finally:
        os.close(holder)
    # the abandoned wait gave its place back: the next write goes through
    with impatient.begin() as connection:
        connection.execute(text("insert into t values (2, 2)"))
    with impatient.connect() as connection:
        assert connection.execute(text("select n from t")).scalars().all() == [2]
    assert _lock_is_free(path)
    impatient.dispose()


def test_a_killed_holder_never_blocks_the_others(tmp_path: Path) -> None:
    path = tmp_path / "review.db"
    _engine(path).dispose()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
            str(write_queue.lock_path(path)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        engine = create_database_engine(f"sqlite:///{path}", busy_timeout_ms=20_000)
        done = threading.Event()

        def write() -> None:
            with engine.begin() as connection:
                connection.execute(text("insert into t values (3, 1)"))
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert not done.wait(0.5)  # waiting in line behind the holder
        holder.send_signal(signal.SIGKILL)
        assert done.wait(10), "the write did not go through after its holder died"
        writer.join()
        engine.dispose()
    finally:
        holder.kill()
        holder.wait()


def test_writers_in_threads_and_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "review.db"
    _engine(path).dispose()
    script = (
        "import sys\n"
        "from sqlalchemy import text\n"
        "from storage.engine import create_database_engine\n"
        "engine = create_database_engine('sqlite:///' + sys.argv[1])\n"
        "for n in range(40):\n"
        "    with engine.begin() as c:\n"
        "        row = {'w': int(sys.argv[2]), 'n': n}\n"
        "        c.execute(text('insert into t values (:w, :n)'), row)\n"
    )
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(path), str(w)], env=env)
        for w in range(4)
    ]
    engine = _engine(path)

    def thread_writer(w: int) -> None:
        for n in range(40):
            with engine.begin() as connection:
                connection.execute(text("insert into t values (:w, :n)"), {"w": w, "n": n})

    threads = [threading.Thread(target=thread_writer, args=(w,)) for w in range(10, 14)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [p.wait(60) for p in processes] == [0, 0, 0, 0]
    with engine.connect() as connection:
        rows = connection.execute(text("select writer, count(*) from t group by 1")).all()
    engine.dispose()
    assert dict(rows) == {w: 40 for w in (0, 1, 2, 3, 10, 11, 12, 13)}
    assert _lock_is_free(path)


def test_the_queue_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(write_queue.WRITE_QUEUE_ENV, "0")
    path = tmp_path / "review.db"
    engine = _engine(path)
    try:
        holder = write_queue.acquire(write_queue.lock_path(path), 1.0)
        try:  # the lock file is ignored: the write goes straight to SQLite's lock
            with engine.begin() as connection:
                connection.execute(text("insert into t values (4, 1)"))
        finally:
            os.close(holder)
    finally:
        engine.dispose()
