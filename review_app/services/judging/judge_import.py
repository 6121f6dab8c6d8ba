"""LLM-judge verdicts as stored: importing a verdict file (the runs themselves:
:mod:`review_app.services.judging.runs`).

A judge run is identified by judge + prompt version + model (docs/reference.md, "Judge
verdicts"), within one rubric version.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.judging import (
    VerdictRecord,
    read_verdict_file,
)
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.file_import import file_sha256, record_error, with_stored_turns
from review_app.services.judging.runs import find_or_create_run, run_name
from storage import audit, judging


@dataclass
class JudgeImportSummary:
    runs: dict[str, int] = field(default_factory=dict)
    """``judge@prompt_version/model`` -> verdicts stored."""

    def line(self) -> str:
        parts = ", ".join(f"{name}: {count}" for name, count in sorted(self.runs.items()))
        return f"stored {sum(self.runs.values())} verdicts in {len(self.runs)} runs ({parts})"


def import_verdicts(
    engine: Engine, actor: Actor, path: Path, *, rubric: Rubric, score_means: str = "break"
) -> JudgeImportSummary:
    """Import a verdict file (docs/reference.md, "Judge verdicts") in one transaction."""
    actor = authorize(engine, actor, "policy_owner")
    records = read_verdict_file(path, rubric=rubric, score_means=score_means)
    source = str(path)
    summary = JudgeImportSummary()
    now = datetime.now(UTC)
    with Session(engine) as session:
        for record, turns in with_stored_turns(session, records, source=source):
            if record.turn is not None and turns.get(record.turn) != rubric.applies_to:
                raise record_error(
                    f"case {record.case_id} has no {rubric.applies_to} turn {record.turn}",
                    source=source,
                    record=record,
                    field="turn",
                )
        grouped: dict[tuple[str, str, str], list[VerdictRecord]] = defaultdict(list)
        for record in records:
            grouped[record.run_key].append(record)
        for (judge, prompt_version, model), group in sorted(grouped.items()):
            run = find_or_create_run(
                session,
                rubric=rubric,
                judge=judge,
                prompt_version=prompt_version,
                model=model,
                source="import",
            )
            assert run.id is not None
            judging.replace_verdicts(
                session,
                run_id=run.id,
                now=now,
                rows=[
                    (r.case_id, r.turn, r.label, r.score, r.reason, None, None, None, None, None)
                    for r in group
                ],
            )
            judging.touch_run(session, run, status="complete")
            summary.runs[run_name(run)] = len(group)
        audit.add_entry(
            session,
            actor=actor.name,
            action="verdicts_import",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "file": path.name,
                "sha256": file_sha256(path),
                "runs": dict(sorted(summary.runs.items())),
                "score_means": score_means,
            },
        )
        session.commit()
    return summary
