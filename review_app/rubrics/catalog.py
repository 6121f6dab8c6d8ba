"""The rubrics directory: every version in it, one version by reference, where it is."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from review_app.errors import InputError, NotFound
from review_app.rubrics.model import Rubric, parse_rubric_ref
from review_app.rubrics.parsing import load_rubric_file

RUBRICS_DIR_ENV = "REVIEW_APP_RUBRICS_DIR"


def load_rubrics(root: str | os.PathLike[str]) -> list[Rubric]:
    """Every ``<root>/<id>/v<N>.yaml``, sorted by (id, version).

    Subdirectories of a rubric directory (such as ``judges/``) and files that are not
    YAML are ignored. A YAML file that is not named ``v<N>.yaml``, or that sits
    directly in ``root``, is an error: a misnamed rubric must not vanish silently.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise InputError("the rubrics directory does not exist", source=str(root_path))
    rubrics: list[Rubric] = []
    for entry in sorted(root_path.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_file():
            if entry.suffix in (".yaml", ".yml"):
                raise InputError(
                    "rubric files belong in <rubrics dir>/<id>/v<N>.yaml, "
                    "not directly in the rubrics directory",
                    source=str(entry),
                )
            continue
        for candidate in sorted(entry.iterdir()):
            if candidate.is_file() and candidate.suffix in (".yaml", ".yml"):
                rubrics.append(load_rubric_file(candidate))
    rubrics.sort(key=lambda rubric: (rubric.id, rubric.version))
    return rubrics


def get_rubric(rubrics: Iterable[Rubric], ref: str) -> Rubric:
    """The rubric ``ref`` names among ``rubrics``; :class:`NotFound` if it is not there."""
    rubric_id, version = parse_rubric_ref(ref)
    available = list(rubrics)
    for rubric in available:
        if rubric.id == rubric_id and rubric.version == version:
            return rubric
    known = ", ".join(rubric.ref for rubric in available) or "none"
    raise NotFound(f"no rubric {rubric_id}@{version}; available: {known}")


def default_rubrics_dir() -> Path:
    """Where rubrics are read from by default.

    ``$REVIEW_APP_RUBRICS_DIR`` if set; otherwise the repository's ``rubrics/``
    directory when running from a checkout; otherwise the copy bundled in the wheel.
    """
    configured = os.environ.get(RUBRICS_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    checkout = Path(__file__).resolve().parents[2] / "rubrics"
    if checkout.is_dir():
        return checkout
    return Path(__file__).parent.parent / "_bundled_rubrics"
