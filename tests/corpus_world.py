"""A generated corpus in a real database, for the tests of estimates, routing, strata and
reviewer reliability: the cases imported, the bundled rubric synced, the assistant turns
as units, and unanimous gold given on demand from each unit's true code.

Each test module says what is true and what its judges answer (a subclass sets
``truth`` and imports its verdicts); the corpus and the gold are the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import Engine

from benchmarks.corpus import generate_corpus
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import import_labels
from review_app.services.rubrics.rubric_catalog import RubricCatalog, sync_rubrics
from tests.judge_support import write_jsonl

OPERATOR = Actor.operator()
RUBRIC = "role-adherence@1"

Unit = tuple[str, int]


class CorpusWorld:
    """``cases`` generated conversations of ``events`` events each (seeded), imported."""

    def __init__(self, engine: Engine, tmp_path: Path, *, cases: int, events: int, seed: int):
        self.engine = engine
        self.tmp = tmp_path
        self.cases = list(generate_corpus(cases, events, seed=seed))
        import_paths(engine, OPERATOR, [write_jsonl(tmp_path / "corpus.jsonl", self.cases)])
        self.catalog: RubricCatalog = sync_rubrics(engine, OPERATOR)
        self.rubric: Rubric = self.catalog.get(RUBRIC)
        self.units: list[Unit] = sorted(
            (case["case_id"], event["turn"])
            for case in self.cases
            for event in case["transcript"]
            if event["actor"] == "assistant"
        )
        self.truth: dict[Unit, str] = {}
        """Each unit's true code, set by the test module."""
        self.gold: set[Unit] = set()
        """The units given gold by :meth:`label`."""

    def label(self, units: Iterable[Unit], name: str) -> None:
        """Two reviewers (rita and sam) give every unit its true code: unanimous gold."""
        units = list(units)
        lines = ["case_id,turn,reviewer,label,rubric,rationale"]
        for case_id, turn in units:
            for reviewer in ("rita", "sam"):
                lines.append(f"{case_id},{turn},{reviewer},{self.truth[(case_id, turn)]},{RUBRIC},")
        path = self.tmp / f"{name}.csv"
        path.write_text("\n".join(lines) + "\n")
        import_labels(self.engine, OPERATOR, path, catalog=self.catalog)
        self.gold.update(units)
