"""One unit for the adjudicate page with the judge's column: the default run's verdict
on it (one complete run for every unit: the team's judge, else the newest complete run).

Adjudication (review_app/services/labels/adjudication.py) sits below judging and shows
the reviewers' labels; this module adds the judge's verdict from the floor above.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Engine
from sqlmodel import Session

import storage.judging
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor
from review_app.services.judging.run_defaults import run_choices
from review_app.services.labels.adjudication import JudgeOnUnit, UnitDetail, unit_detail
from storage.engine import read_only


def _judge_on_unit(
    engine: Engine, actor: Actor, *, rubric: Rubric, case_id: str, turn: int
) -> JudgeOnUnit | None:
    """The default run's verdict on the unit (one complete run for every unit)."""
    choices = run_choices(engine, actor, rubric=rubric)
    run = choices.default
    if run is None or choices.why is None:
        return None
    with Session(read_only(engine)) as session:
        verdict = storage.judging.unit_verdict(session, run_id=run.id, case_id=case_id, turn=turn)
    return JudgeOnUnit(run.id, run.label, choices.why, verdict)


def unit_detail_with_judge(
    engine: Engine, actor: Actor, *, rubric: Rubric, case_id: str, turn: int, context: int = 4
) -> UnitDetail:
    """One unit for the adjudicate page (:func:`~review_app.services.labels.adjudication.
    unit_detail`, policy owners) with the judge's column: the default run's verdict on it
    (one complete run for every unit: the team's judge, else the newest complete run)."""
    detail = unit_detail(engine, actor, rubric=rubric, case_id=case_id, turn=turn, context=context)
    return replace(
        detail,
        judge=_judge_on_unit(engine, actor, rubric=rubric, case_id=detail.case_id, turn=turn),
    )
