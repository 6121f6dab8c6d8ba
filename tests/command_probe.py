"""A ``review-app`` command run in a child process that writes, when it exits, which of
the heavy modules it had loaded (tests/test_command_imports.py,
benchmarks/bench_startup.py)."""

from __future__ import annotations

import sys

HEAVY = ("scipy", "pandas", "sklearn", "statsmodels", "streamlit", "altair", "krippendorff")

LOADED_OUT_ENV = "LOADED_OUT"
"""The child writes the JSON list of the HEAVY modules it loaded to the file named here."""

_PROBE = f"""
import atexit, json, os, sys
heavy = {HEAVY!r}
atexit.register(lambda: open(os.environ[{LOADED_OUT_ENV!r}], "w").write(
    json.dumps([m for m in heavy if m in sys.modules])))
sys.argv = ["review-app", *sys.argv[1:]]
from review_app.__main__ import main
main()
"""


def probe_command(args: list[str]) -> list[str]:
    """The argv of a child running ``review-app ARGS`` under the probe."""
    return [sys.executable, "-c", _PROBE, *args]
