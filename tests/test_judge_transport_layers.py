"""The judge's HTTP client sits below the run (issue 39): ``judging/transport.py`` imports
no other module of ``services``; the endpoints file and a unit's prompts build on the
transport, never on the run (``judge_runner``), so the run is the only one that joins them.
"""

from __future__ import annotations

import ast
from pathlib import Path

JUDGING = Path(__file__).resolve().parents[1] / "review_app" / "services" / "judging"
SERVICES = "review_app.services."

ALLOWED: dict[str, set[str]] = {
    "transport": set(),
    "unit_prompts": {"judging.transport"},
    "endpoints": {"judging.transport", "judging.local_judge", "access.actors"},
}
"""What each of these modules may import from ``services`` (module paths below it)."""


def _service_imports(module: str) -> set[str]:
    tree = ast.parse((JUDGING / f"{module}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(name.removeprefix(SERVICES) for name in names if name.startswith(SERVICES))
    return found


def test_the_transport_and_what_builds_on_it_never_import_the_run() -> None:
    for module, allowed in ALLOWED.items():
        extra = _service_imports(module) - allowed
        assert extra == set(), f"judging/{module}.py imports {sorted(extra)}"
