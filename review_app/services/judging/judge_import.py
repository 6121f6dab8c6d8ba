"""LLM-judge verdicts as stored: importing a verdict file, listing runs.

A judge run is identified by judge + prompt version + model (docs/reference.md, "Judge
verdicts"), within one rubric version.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import NotFound
from review_app.judging import (
    VerdictRecord,
    read_verdict_file,
)
from review_app.rubrics import Rubric
from review_app.services.cases.file_import import file_sha256, record_error, with_stored_turns
from review_app.services.team.people import Actor, authorize
from storage import audit, judging
from storage.engine import read_only
from storage.models import JudgeRun


@dataclass
class JudgeImportSummary:
    runs: dict[str, int] = field(default_factory=dict)
    """``judge@prompt_version/model`` -> verdicts stored."""

    def line(self) -> str:
        parts = ", ".join(f"{name}: {count}" for name, count in sorted(self.runs.items()))
        return f"stored {sum(self.runs.values())} verdicts in {len(self.runs)} runs ({parts})"


def run_name(run: JudgeRun) -> str:
    return f"{run.judge}@{run.prompt_version}/{run.model}"


def find_or_create_run(
    session: Session,
    *,
    rubric: Rubric,
    judge: str,
    prompt_version: str,
    model: str,
    **created: Any,
) -> JudgeRun:
    """The run of ``judge@prompt_version/model`` under ``rubric``; a new one (with the
    ``created`` fields) when there is none yet."""
    run = judging.find_run(
        session,
        judge=judge,
        prompt_version=prompt_version,
        model=model,
        rubric_id=rubric.id,
        version=rubric.version,
    )
    if run is None:
        run = judging.create_run(
            session,
            judge=judge,
            prompt_version=prompt_version,
            model=model,
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            **created,
        )
    return run


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


def list_judge_runs(
    engine: Engine, actor: Actor, *, rubric: Rubric | None = None
) -> list[dict[str, Any]]:
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        runs = judging.list_runs(
            session,
            rubric_id=rubric.id if rubric else None,
            version=rubric.version if rubric else None,
        )
        result = []
        for run in runs:
            assert run.id is not None
            total, errors = judging.verdict_counts(session, run_id=run.id)
            result.append(
                {
                    "id": run.id,
                    "name": run_name(run),
                    "judge": run.judge,
                    "prompt_version": run.prompt_version,
                    "model": run.model,
                    "rubric": f"{run.rubric_id}@{run.rubric_version}",
                    "source": run.source,
                    "status": run.status,
                    "verdicts": total,
                    "errors": errors,
                    "prompt_sha256": run.prompt_sha256,
                    "calibrated": run.calibration_json is not None,
                    "summary": json.loads(run.summary_json) if run.summary_json else None,
                }
            )
    return result


def judge_token(engine: Engine, actor: Actor, *, rubric: Rubric) -> tuple[int, str, int, int]:
    """A value that changes whenever the rubric version's judge runs or verdicts change."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return judging.judge_token(session, rubric_id=rubric.id, version=rubric.version)


def _run_verdicts(
    engine: Engine, rubric: Rubric, run_ids: Sequence[int] | None
) -> list[tuple[JudgeRun, judging.VerdictColumns]]:
    with Session(read_only(engine)) as session:
        runs = judging.list_runs(session, rubric_id=rubric.id, version=rubric.version)
        if run_ids:
            wanted = set(run_ids)
            unknown = wanted - {r.id for r in runs}
            if unknown:
                raise NotFound(f"no judge run {min(unknown)} for {rubric.ref}")
            runs = [r for r in runs if r.id in wanted]
        result = []
        for run in runs:
            assert run.id is not None
            result.append((run, judging.verdict_columns(session, run_id=run.id)))
            session.expunge(run)
    return result
