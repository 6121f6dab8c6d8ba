"""The judge-run registry: a run's name, finding or creating it, listing runs, the data
token of a rubric version's runs, and a run's verdicts as columns.

A judge run is identified by judge + prompt version + model (docs/reference.md, "Judge
verdicts"), within one rubric version. Runs leave this module as frozen values
(:class:`storage.models.JudgeRunPublic`, :class:`RunListing`), never as rows; only
:func:`find_or_create_run`, a building block inside its caller's transaction, returns the
row the caller goes on to update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import NotFound
from review_app.rubrics import Rubric
from review_app.services.team.people import Actor, authorize
from storage import judging
from storage.engine import read_only
from storage.models import JudgeRun, JudgeRunBase, JudgeRunPublic


def run_name(run: JudgeRunBase) -> str:
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


@dataclass(frozen=True)
class RunListing:
    """One stored judge run with its verdict and error counts (``judge runs``)."""

    id: int
    name: str
    """``judge@prompt_version/model``."""
    judge: str
    prompt_version: str
    model: str
    rubric: str
    """``rubric_id@version``."""
    source: str
    """``import`` or ``run``."""
    status: str
    verdicts: int
    errors: int
    prompt_sha256: str | None
    calibrated: bool
    """Whether a calibration map is stored with the run."""
    summary: dict[str, Any] | None
    """The run's stored totals (seconds, tokens, the last pass), as JSON."""

    def to_dict(self) -> dict[str, Any]:
        """What ``judge runs --json`` prints for the run."""
        return asdict(self)


def list_judge_runs(
    engine: Engine, actor: Actor, *, rubric: Rubric | None = None
) -> list[RunListing]:
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
                RunListing(
                    id=run.id,
                    name=run_name(run),
                    judge=run.judge,
                    prompt_version=run.prompt_version,
                    model=run.model,
                    rubric=f"{run.rubric_id}@{run.rubric_version}",
                    source=run.source,
                    status=run.status,
                    verdicts=total,
                    errors=errors,
                    prompt_sha256=run.prompt_sha256,
                    calibrated=run.calibration_json is not None,
                    summary=json.loads(run.summary_json) if run.summary_json else None,
                )
            )
    return result


def judge_token(engine: Engine, actor: Actor, *, rubric: Rubric) -> tuple[int, str, int, int]:
    """A value that changes whenever the rubric version's judge runs or verdicts change."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return judging.judge_token(session, rubric_id=rubric.id, version=rubric.version)


def run_verdicts(
    engine: Engine, rubric: Rubric, run_ids: Sequence[int] | None
) -> list[tuple[JudgeRunPublic, judging.VerdictColumns]]:
    """The rubric version's runs (or ``run_ids`` of them) with their verdicts as columns.

    A building block: the caller has authorized the actor (every use case that calls it
    takes one). An unknown run id is ``NotFound``.
    """
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
            columns = judging.verdict_columns(session, run_id=run.id)
            result.append((JudgeRunPublic.model_validate(run), columns))
    return result
