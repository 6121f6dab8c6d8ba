"""The bundled sample set behind ``review-app demo``: load it, idempotently."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.importing import ImportSummary, import_paths
from review_app.services.exchange.labels_io import LabelImportSummary, import_labels
from review_app.services.judging.judge_import import JudgeImportSummary, import_verdicts
from review_app.services.judging.run_defaults import choose_team_judge, team_judge
from review_app.services.judging.runs import list_judge_runs
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person, list_people
from review_app.services.team.queue import AssignmentReport, assign_cases

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo_data"
DEMO_CASES = DEMO_DIR / "cases"
DEMO_LABELS = DEMO_DIR / "labels.csv"
DEMO_VERDICTS = DEMO_DIR / "judge_verdicts.jsonl"
DEMO_REVIEWERS = ("ana", "ben", "chloe")
DEMO_POLICY_OWNER = "olivia"
DEMO_RUBRIC = "role-adherence@1"
DEMO_JUDGE = "role-judge@v2/gemma-3-270m-it"
"""The demo's judge run the team uses (its prompt v2 reads role changes correctly)."""


@dataclass
class DemoReport:
    cases: ImportSummary
    assignments: AssignmentReport | None
    labels: LabelImportSummary | None
    verdicts: JudgeImportSummary | None

    def lines(self) -> list[str]:
        lines = [f"cases: {self.cases.line()}"]
        if self.labels is not None:
            lines.append(f"labels: {self.labels.line()}")
        if self.assignments is not None:
            lines.append(f"queues: {self.assignments.line()}")
        if self.verdicts is not None:
            lines.append(f"judge: {self.verdicts.line()}")
        return lines


def _demo_case_ids() -> list[str]:
    """The ids of the bundled sample conversations (one file each, named by its id)."""
    return sorted(path.stem for path in DEMO_CASES.glob("*.json"))


def load_demo(engine: Engine, actor: Actor, *, local_user: str | None = None) -> DemoReport:
    """Import the sample conversations, create the sample reviewers, fill their queues, and
    make the v2 judge run the team's judge.

    ``local_user``: the one person of local single-user mode, made an admin and given the
    demo's cases too; ``None`` (the command under sign-in) makes no such person.

    Running it again changes nothing that is already there. Admins only (the command
    line's operator).
    """
    operator = authorize(engine, actor, "admin")
    cases = import_paths(engine, operator, [DEMO_CASES])
    catalog = sync_rubrics(engine, operator)
    existing = {person.name for person in list_people(engine)}
    for name in DEMO_REVIEWERS:
        if name not in existing:
            add_person(engine, operator, name=name, role="reviewer")
    if DEMO_POLICY_OWNER not in existing:
        add_person(engine, operator, name=DEMO_POLICY_OWNER, role="policy_owner")
    reviewers = list(DEMO_REVIEWERS)
    if local_user:
        if local_user not in existing and local_user not in reviewers:
            add_person(engine, operator, name=local_user, role="admin")
        reviewers.append(local_user)
    assignments = None
    if DEMO_RUBRIC in catalog.usable:
        # Its own cases (never every stored case) to its own reviewers (never anyone
        # else), each added whoever else already has the case.
        assignments = assign_cases(
            engine,
            operator,
            rubric=catalog.get(DEMO_RUBRIC),
            reviewers=reviewers,
            mode="add",
            case_ids=_demo_case_ids(),
        )
    labels = verdicts = None
    if DEMO_RUBRIC in catalog.usable:
        labels = import_labels(
            engine, operator, DEMO_LABELS, catalog=sync_rubrics(engine, operator)
        )
        rubric = catalog.get(DEMO_RUBRIC)
        verdicts = import_verdicts(engine, operator, DEMO_VERDICTS, rubric=rubric)
        if team_judge(engine, operator, rubric=rubric) is None:
            run = next(
                r for r in list_judge_runs(engine, operator, rubric=rubric) if r.name == DEMO_JUDGE
            )
            choose_team_judge(engine, operator, rubric=rubric, run_id=run.id)
    return DemoReport(cases, assignments, labels, verdicts)
