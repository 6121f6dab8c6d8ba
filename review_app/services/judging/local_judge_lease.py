"""llama.cpp's server for as long as the process that started it lives.

``python -m review_app.services.judging.local_judge_lease --lease-fd N ARGS...`` runs
``llama_cpp.server ARGS...`` in this process, with a thread reading file descriptor
``N``: the read end of a pipe whose write end only the starting process holds. The
kernel closes that end when the starting process ends, however it ends (an exit, an
exception, ``SIGKILL``), and the read then returns end-of-file: this process exits at
once. A server started by ``serve`` or ``jobs work`` is thus never left behind,
adopted by init (issue 35). A parent-death signal would not do: it fires when the
starting *thread* ends, and a job worker's thread may end while its process lives on.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading

LEASE_OPTION = "--lease-fd"


def _watch(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break  # end of file: the starting process is gone
        except InterruptedError:
            continue
        except OSError:
            break
    os._exit(0)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != LEASE_OPTION:
        raise SystemExit(f"usage: {LEASE_OPTION} FD llama_cpp.server arguments...")
    fd = int(argv[1])
    threading.Thread(target=_watch, args=(fd,), name="lease", daemon=True).start()
    sys.argv = ["llama_cpp.server", *argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
