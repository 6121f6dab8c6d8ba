"""A ``review-app`` command run in a child process that writes, when it exits, which of
the heavy modules it had loaded (tests/test_command_imports.py,
benchmarks/bench_startup.py)."""

from __future__ import annotations

import sys

HEAVY = (
    "scipy",
    "pandas",
    "sklearn",
    "statsmodels",
    "streamlit",
    "altair",
    "krippendorff",
    "numpy",
)

SHARED_CLI = (
    "review_app.cli.application",
    "review_app.cli.shared",
    "review_app.cli.output",
    "review_app.cli.progress",
)
"""The command line's modules every command may use; each other module of
``review_app.cli`` holds commands (or their rendering) and is loaded only for them."""

LOADED_OUT_ENV = "LOADED_OUT"
"""The child writes the JSON list of the HEAVY modules it loaded, then the command modules
of ``review_app.cli`` it loaded (all but :data:`SHARED_CLI`), to the file named here."""

_PROBE = f"""
import atexit, json, os, sys
heavy = {HEAVY!r}
shared = {SHARED_CLI!r}
atexit.register(lambda: open(os.environ[{LOADED_OUT_ENV!r}], "w").write(
    json.dumps([m for m in heavy if m in sys.modules] + sorted(
        m for m in sys.modules if m.startswith("review_app.cli.") and m not in shared))))
sys.argv = ["review-app", *sys.argv[1:]]
from review_app.__main__ import main
main()
"""


def probe_command(args: list[str]) -> list[str]:
    """The argv of a child running ``review-app ARGS`` under the probe."""
    return [sys.executable, "-c", _PROBE, *args]
