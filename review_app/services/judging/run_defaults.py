"""Which judge run a page or a command uses when nobody chose one, and which two runs it
compares: like with like (docs/reference.md, "Which run by default").

- Only **complete** runs are defaults. A stopped, failed or running run is used only when
  someone chooses it, and is then named as such (:attr:`RunListing.state_text`).
- **The run**: the team's judge (the rubric version's current judge, chosen by a policy
  owner: :func:`choose_team_judge`) when its run is complete, else the newest complete run.
- **A comparison** pairs a newer run with an earlier one that has the same model at the same
  endpoint and an earlier prompt (a lower ``vN`` of the same judge; for another judge, the
  run made first). The newer run: the one asked for (the workbench's prompt version), else
  the latest prompt version of the newest complete run's judge with that run's model and
  endpoint (so a baseline run after the new version stays the earlier one). The earlier
  run: the team's judge when it is among the candidates, else the latest earlier prompt
  version.
- No comparable earlier run: no pair, a sentence saying so, and the baseline to run on the
  newer run's endpoint (:attr:`Pairing.baseline`).
- A pair chosen by hand that differs in more than the prompt gets one sentence naming the
  confound (:func:`confound`).

The team's judge is stored (table ``team_judges``, newest row current) and each choice is
audited (``team_judge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError, NotFound
from review_app.rubrics.model import Rubric, parse_rubric_ref
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.runs import (
    RunListing,
    list_judge_runs,
    listing_of,
    rubric_listings,
)
from storage import audit, judging, team_judges
from storage.engine import read_only
from storage.models import TeamJudge


@dataclass(frozen=True)
class TeamJudgeChoice:
    """The rubric version's current judge: a prompt version with its model and endpoint."""

    rubric: str
    judge: str
    prompt_version: str
    model: str
    endpoint: str
    run_id: int
    """The run it was chosen from."""
    chosen_by: str
    chosen_at: datetime

    @property
    def prompt(self) -> str:
        return f"{self.judge}@{self.prompt_version}"

    def matches(self, run: RunListing) -> bool:
        """Whether ``run`` is a run of this judge (same prompt, model and endpoint)."""
        return (run.judge, run.prompt_version, run.model, run.endpoint, run.rubric) == (
            self.judge,
            self.prompt_version,
            self.model,
            self.endpoint,
            self.rubric,
        )

    def sentence(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else " (imported verdicts)"
        return (
            f"The team's judge for {self.rubric} is {self.prompt} with model {self.model}"
            f"{where}, chosen by {self.chosen_by} on {self.chosen_at:%Y-%m-%d}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "prompt": self.prompt,
            "judge": self.judge,
            "prompt_version": self.prompt_version,
            "model": self.model,
            "endpoint": self.endpoint,
            "run": self.run_id,
            "chosen_by": self.chosen_by,
            "chosen_at": self.chosen_at.isoformat(timespec="seconds"),
        }


def team_judge(engine: Engine, actor: Actor, *, rubric: Rubric) -> TeamJudgeChoice | None:
    """The rubric version's current judge, or ``None`` when no one chose one (policy
    owners and admins)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return _team_judge(session, rubric)


def _team_judge(session: Session, rubric: Rubric) -> TeamJudgeChoice | None:
    row = team_judges.current(session, rubric_id=rubric.id, version=rubric.version)
    return None if row is None else _choice(row, rubric.ref)


def team_judge_runs(engine: Engine, actor: Actor, *, runs: Sequence[RunListing]) -> set[int]:
    """The ids of those of ``runs`` made by their rubric version's team judge (same
    prompt version, model and endpoint): what ``judge runs`` marks. Policy owners and
    admins; reads the team's choices only, not the rubric files."""
    authorize(engine, actor, "policy_owner")
    choices: dict[str, TeamJudgeChoice] = {}
    with Session(read_only(engine)) as session:
        for ref in sorted({run.rubric for run in runs}):
            rubric_id, version = parse_rubric_ref(ref)
            row = team_judges.current(session, rubric_id=rubric_id, version=version)
            if row is not None:
                choices[ref] = _choice(row, ref)
    return {run.id for run in runs if (team := choices.get(run.rubric)) and team.matches(run)}


def _choice(row: TeamJudge, rubric_ref: str) -> TeamJudgeChoice:
    return TeamJudgeChoice(
        rubric=rubric_ref,
        judge=row.judge,
        prompt_version=row.prompt_version,
        model=row.model,
        endpoint=row.endpoint,
        run_id=row.run_id,
        chosen_by=row.chosen_by,
        chosen_at=row.chosen_at,
    )


def choose_team_judge(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int
) -> TeamJudgeChoice:
    """Mark run ``run_id``'s prompt version, model and endpoint as the rubric version's
    judge (policy owners and admins; recorded in the audit log as ``team_judge``).

    Only a complete run may be chosen: a stopped or failed one is refused with why.
    """
    actor = authorize(engine, actor, "policy_owner")
    with Session(engine) as session:
        run = judging.get_run(session, run_id=run_id)
        if run is None or (run.rubric_id, run.rubric_version) != (rubric.id, rubric.version):
            raise NotFound(f"no judge run {run_id} for {rubric.ref}")
        listing = listing_of(session, run)
        if not listing.complete:
            raise InputError(
                f"run {run_id} ({listing.label}) is {listing.state_text}: only a complete run "
                "may be the team's judge; finish it first (running it again asks only the "
                "units left)",
                field="--run",
            )
        before = team_judges.current(session, rubric_id=rubric.id, version=rubric.version)
        row = team_judges.add_choice(
            session,
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            judge=run.judge,
            prompt_version=run.prompt_version,
            model=run.model,
            endpoint=run.endpoint,
            run_id=run_id,
            chosen_by=actor.name,
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="team_judge",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "before": None if before is None else before.run_id,
                "after": run_id,
                "run": listing.name,
            },
        )
        session.commit()
        return _choice(row, rubric.ref)


def team_run(runs: Sequence[RunListing], team: TeamJudgeChoice | None) -> RunListing | None:
    """The run of the team's judge among ``runs`` (any state), if any."""
    if team is None:
        return None
    return next((run for run in runs if team.matches(run)), None)


def default_run(runs: Sequence[RunListing], team: TeamJudgeChoice | None) -> RunListing | None:
    """The run used when none is chosen: the team's judge's run when complete, else the
    newest complete run; ``None`` when no run is complete."""
    chosen = team_run(runs, team)
    if chosen is not None and chosen.complete:
        return chosen
    complete = [run for run in runs if run.complete]
    return max(complete, key=lambda run: run.id) if complete else None


def why_default(run: RunListing, team: TeamJudgeChoice | None) -> str:
    """Why ``run`` (from :func:`default_run`) is the default, in words."""
    if team is not None and team.matches(run):
        return "the team's judge"
    if team is None:
        return "the newest complete run (no team's judge is chosen)"
    return "the newest complete run (the team's judge has no complete run)"


@dataclass(frozen=True)
class RunChoices:
    """A page's runs to choose from, the team's judge, and the run shown by default."""

    runs: list[RunListing]
    team: TeamJudgeChoice | None
    default: RunListing | None
    """:func:`default_run` (``None``: no run is complete)."""
    why: str | None
    """Why the default is the default (:func:`why_default`)."""


def run_choices(engine: Engine, actor: Actor, *, rubric: Rubric) -> RunChoices:
    """The rubric version's runs with the team's judge and the default run (policy owners
    and admins): what the judge page's run picker offers and opens on. One transaction:
    the runs' token and the team's judge (the listings are counted again only when the
    runs changed: :func:`review_app.services.judging.runs.rubric_listings`)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        runs = rubric_listings(engine, session, rubric=rubric)
        team = _team_judge(session, rubric)
    chosen = default_run(runs, team)
    return RunChoices(runs, team, chosen, None if chosen is None else why_default(chosen, team))


def run_or_default(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int | None
) -> RunListing:
    """Run ``run_id`` of ``rubric``, or the default run when ``None`` (commands'
    ``--run``); :class:`InputError` naming ``--run`` when there is none to use."""
    runs = list_judge_runs(engine, actor, rubric=rubric)
    if run_id is not None:
        found = next((run for run in runs if run.id == run_id), None)
        if found is None:
            raise NotFound(f"no judge run {run_id} for {rubric.ref}")
        return found
    chosen = default_run(runs, team_judge(engine, actor, rubric=rubric))
    if chosen is None:
        states = "; ".join(f"run {run.id}: {run.state_text}" for run in runs) or "none"
        raise InputError(
            f"{rubric.ref} has no complete judge run to use by default (runs: {states}); "
            "give --run N to use another",
            field="--run",
        )
    return chosen


@dataclass(frozen=True)
class Pairing:
    """Two runs to compare, or why there are none and what to run to get them."""

    first: RunListing | None
    """The earlier run (``None``: no comparable one)."""
    second: RunListing | None
    """The newer run (``None``: no complete run at all)."""
    how: str
    """How the pair was chosen, or why there is none, in one sentence."""
    baseline: str | None = None
    """With no comparable earlier run: the prompt version (``judge@vN``) to run on the
    newer run's endpoint to get one."""

    @property
    def found(self) -> bool:
        return self.first is not None and self.second is not None

    @property
    def ids(self) -> tuple[int, int]:
        assert self.first is not None and self.second is not None
        return self.first.id, self.second.id


def _earlier_candidates(runs: Sequence[RunListing], newer: RunListing) -> list[RunListing]:
    return [
        run
        for run in runs
        if run.complete
        and run.id != newer.id
        and run.prompt != newer.prompt
        and run.same_setup(newer)
        and run.earlier_than(newer)
    ]


def default_pair(
    runs: Sequence[RunListing],
    team: TeamJudgeChoice | None,
    *,
    newer: RunListing | None = None,
    prompts: Sequence[str] = (),
) -> Pairing:
    """The default comparison (module docstring). ``newer``: the run to compare (else
    the newest complete run). ``prompts``: the stored prompt versions (``judge@vN``) a
    baseline may be suggested from."""
    if newer is None:
        complete = [run for run in runs if run.complete]
        if not complete:
            return Pairing(None, None, "no judge run is complete yet: nothing to compare")
        # The setup (model and endpoint) of the newest complete run, and in it the latest
        # prompt of that run's judge: a baseline run after the new version is still the
        # earlier one.
        newest = max(complete, key=lambda run: run.id)
        newer = max(
            (run for run in complete if run.same_setup(newest) and run.judge == newest.judge),
            key=_prompt_order,
        )
    candidates = _earlier_candidates(runs, newer)
    if not candidates:
        baseline = _baseline(newer, team, prompts)
        return Pairing(
            None,
            newer,
            f"no complete run of an earlier prompt version has {newer.setup}, as "
            f"{newer.prompt} has: there is nothing to compare it with like for like"
            + (f"; run {baseline} there first" if baseline else ""),
            baseline,
        )
    earlier = next((run for run in candidates if team is not None and team.matches(run)), None)
    why = "the team's judge"
    if earlier is None:
        earlier = max(candidates, key=_prompt_order)
        why = "the latest earlier prompt version"
    return Pairing(
        earlier,
        newer,
        f"{newer.prompt} against {earlier.prompt} ({why}), both complete, both {newer.setup}",
    )


def _prompt_order(run: RunListing) -> tuple[int, int]:
    return (run.prompt_number() or 0, run.id)


def _baseline(
    newer: RunListing, team: TeamJudgeChoice | None, prompts: Sequence[str]
) -> str | None:
    """The prompt to run on ``newer``'s endpoint for a like-for-like baseline: the team's
    judge's prompt when it is earlier, else the latest earlier version of the same judge."""
    number = newer.prompt_number()
    earlier: list[tuple[int, str]] = []
    for ref in prompts:
        judge, _, version = ref.partition("@")
        if judge != newer.judge or not version[1:].isdigit() or number is None:
            continue
        if int(version[1:]) < number:
            earlier.append((int(version[1:]), ref))
    if team is not None and team.prompt != newer.prompt and team.prompt in prompts:
        team_number = team.prompt_version[1:]
        if team.judge != newer.judge or (
            team_number.isdigit() and number is not None and int(team_number) < number
        ):
            return team.prompt
    return max(earlier)[1] if earlier else None


def confound(first: RunListing, second: RunListing) -> str | None:
    """One sentence naming what else than the prompt differs between two runs, and which
    of them is not complete; ``None`` when only the prompt differs and both are complete."""
    others = []
    if first.model != second.model:
        others.append(f"the model ({first.model} against {second.model})")
    if first.endpoint != second.endpoint:
        others.append(
            f"the endpoint ({first.endpoint or 'imported verdicts'} against "
            f"{second.endpoint or 'imported verdicts'})"
        )
    if first.rubric != second.rubric:
        others.append(f"the rubric version ({first.rubric} against {second.rubric})")
    parts = []
    if first.prompt == second.prompt:
        parts.append(
            f"Both runs ran {first.prompt}"
            + (f": they differ in {' and '.join(others)}, so this compares those" if others else "")
        )
    elif others:
        parts.append(
            f"These runs differ in more than the prompt, also in {' and '.join(others)}: a "
            "difference between them may come from that, not from the prompt"
        )
    unfinished = [
        f"{run.prompt} was {run.state_text}" for run in (first, second) if not run.complete
    ]
    if unfinished:
        parts.append(" and ".join(unfinished) + ", so they are compared on the units both judged")
    if not parts:
        return None
    return "; ".join(parts) + "."
