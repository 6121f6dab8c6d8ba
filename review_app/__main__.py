"""``review-app`` and ``python -m review_app``: the command line's entry point.

``inspect`` runs from a light module (standard library, orjson, the evaluator)
without loading Typer, SQLAlchemy or pydantic, so a CI step that inspects one
fixture per call pays little more than Python's start-up; ``inspect --help`` and
every other command go through the Typer application in :mod:`review_app.cli.application`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["inspect"] and "--help" not in args[1:]:
        from review_app.inspect_command import main as inspect_main

        try:
            code = inspect_main(args[1:])
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (``| head``): stop quietly
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = 1
        sys.exit(code)
    import gc
    import os

    # Fewer garbage collections while the command line and the ORM load: their tens of
    # thousands of new objects are not garbage, and collecting them every 700 allocations
    # cost a light command (reviewers list) about a tenth of its start-up. Collections
    # still run (every 20,000 allocations in the youngest generation).
    gc.set_threshold(20_000, 10, 10)
    # One BLAS thread unless the user says otherwise: the commands' matrix products
    # (bootstrap resamples x conversations) are short, and on a busy machine OpenBLAS
    # threads waiting for each other made `agreement` several times slower.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from review_app.cli.application import main as cli_main

    if argv is not None:
        sys.argv[1:] = args
    cli_main()


if __name__ == "__main__":
    main()
