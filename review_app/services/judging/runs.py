"""The judge-run registry: a run's name and identity, finding or creating it, listing runs,
the data token of a rubric version's runs, and a run's verdicts as columns.

A judge run is identified by judge + prompt version + model + endpoint (docs/reference.md,
"Judge verdicts", "Judge endpoints"), within one rubric version. Wherever a run is named,
its identity is said in full (:attr:`RunListing.label`): prompt version, model, endpoint,
rubric version, and its state: complete, stopped at k of n, failed, or running, with the
units it covered. Runs leave this module as frozen values
(:class:`storage.models.JudgeRunPublic`, :class:`RunListing`), never as rows; only
:func:`find_or_create_run`, a building block inside its caller's transaction, returns the
row the caller goes on to update.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import NotFound
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.operations.page_run import token_part
from storage import cases as cases_storage
from storage import judging
from storage.engine import read_only
from storage.models import JudgeRun, JudgeRunBase, JudgeRunPublic


def run_name(run: JudgeRunBase) -> str:
    """``judge@prompt_version/model``, and `` at <endpoint>`` for a run made at an
    endpoint (imported verdicts have none): unique within a rubric version."""
    base = f"{run.judge}@{run.prompt_version}/{run.model}"
    return f"{base} at {run.endpoint}" if run.endpoint else base


def find_or_create_run(
    session: Session,
    *,
    rubric: Rubric,
    judge: str,
    prompt_version: str,
    model: str,
    endpoint: str = "",
    **created: Any,
) -> JudgeRun:
    """The run of ``judge@prompt_version/model`` at ``endpoint`` under ``rubric``; a new
    one (with the ``created`` fields) when there is none yet."""
    run = judging.find_run(
        session,
        judge=judge,
        prompt_version=prompt_version,
        model=model,
        endpoint=endpoint,
        rubric_id=rubric.id,
        version=rubric.version,
    )
    if run is None:
        run = judging.create_run(
            session,
            judge=judge,
            prompt_version=prompt_version,
            model=model,
            endpoint=endpoint,
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            **created,
        )
    return run


COMPLETE, STOPPED, FAILED, RUNNING = "complete", "stopped", "failed", "running"
"""A run's state as people read it (the stored ``status`` ``partial`` reads ``stopped``)."""

_PROMPT_NUMBER = re.compile(r"v(\d+)")


@dataclass(frozen=True)
class RunListing:
    """One stored judge run: its identity, state and counts (``judge runs``)."""

    id: int
    name: str
    """``judge@prompt_version/model`` (`` at <endpoint>`` when made at one)."""
    judge: str
    prompt_version: str
    model: str
    endpoint: str
    """The endpoint's name (``host:port`` for a ``--base-url`` run); empty: imported."""
    rubric: str
    """``rubric_id@version``."""
    source: str
    """``import`` or ``run``."""
    status: str
    """As stored: ``running``, ``partial``, ``failed`` or ``complete``."""
    state: str
    """``complete``, ``stopped``, ``failed`` or ``running``."""
    state_text: str
    """The state in words: ``complete, 84 turns``, ``stopped at 6 of 84 turns``,
    ``failed: HTTP 500 after 4 attempts``, ``complete, 84 turns; 3 of 84 failed at the
    endpoint``."""
    asked: int | None
    """Units its latest pass was asked to cover (``None``: imported, or not recorded)."""
    covered: int
    """Turns with a kept verdict (answered, or an answer that could not be parsed)."""
    endpoint_errors: int
    """Units whose request failed at the endpoint (a later run of it asks them again)."""
    first_error: str | None
    """The first endpoint failure's message, when there is one."""
    verdicts: int
    errors: int
    prompt_sha256: str | None
    calibrated: bool
    """Whether a calibration map is stored with the run."""
    summary: dict[str, Any] | None
    """The run's stored totals (seconds, tokens, the last pass), as JSON."""

    @property
    def prompt(self) -> str:
        """``judge@vN``: the prompt version it ran."""
        return f"{self.judge}@{self.prompt_version}"

    @property
    def setup(self) -> str:
        """Model and endpoint in words: ``loop-model at loopback``, ``gemma (imported)``."""
        where = f" at {self.endpoint}" if self.endpoint else " (imported verdicts)"
        return f"model {self.model}{where}"

    @property
    def label(self) -> str:
        """The run named by its identity, never by its id: ``role-judge@v3 · model
        loop-model at loopback · role-adherence@1 · complete, 84 turns``."""
        return f"{self.prompt} · {self.setup} · {self.rubric} · {self.state_text}"

    @property
    def picker_label(self) -> str:
        """The run in a picker: its identity and state word, no counts (an option whose
        text changes while the page is open resets the picker): ``role-judge@v3 · model
        loop-model at loopback · role-adherence@1 · stopped``."""
        state = "imported" if self.source == "import" and self.complete else self.state
        return f"{self.prompt} · {self.setup} · {self.rubric} · {state}"

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def same_setup(self, other: RunListing) -> bool:
        """Same model at the same endpoint (and rubric version): comparable runs."""
        return (self.model, self.endpoint, self.rubric) == (
            other.model,
            other.endpoint,
            other.rubric,
        )

    def prompt_number(self) -> int | None:
        """``N`` of a ``vN`` prompt version (``None`` for another name)."""
        match = _PROMPT_NUMBER.fullmatch(self.prompt_version)
        return int(match[1]) if match else None

    def earlier_than(self, other: RunListing) -> bool:
        """Whether this run's prompt comes before ``other``'s: a lower ``vN`` of the same
        judge; otherwise (another judge, another naming) the run made first."""
        mine, theirs = self.prompt_number(), other.prompt_number()
        if self.judge == other.judge and mine is not None and theirs is not None:
            return mine < theirs
        return self.id < other.id

    def tokens_per_answer(self) -> float | None:
        """Mean tokens (prompt + answer) of its answers, from its stored totals (``None``
        for imported verdicts, or a run that recorded none)."""
        totals = self.summary or {}
        tokens = int(totals.get("prompt_tokens") or 0) + int(totals.get("completion_tokens") or 0)
        answers = totals.get("answers")
        if not isinstance(answers, int):  # recorded before the count was kept
            last = totals.get("last") or {}
            answers = int(last.get("answered") or 0) + int(last.get("answer_errors") or 0)
            tokens = int(last.get("prompt_tokens") or 0) + int(last.get("completion_tokens") or 0)
        return tokens / answers if answers and tokens else None

    def to_dict(self) -> dict[str, Any]:
        """What ``judge runs --json`` prints for the run."""
        return {**asdict(self), "label": self.label}


def _state(
    status: str, source: str, counts: judging.RunCounts, summary: dict[str, Any] | None
) -> tuple[str, str, int | None]:
    """``(state, state_text, asked)`` of a run from its stored status and counts."""
    last = (summary or {}).get("last") or {}
    asked = last.get("units") if isinstance(last.get("units"), int) else None
    turns = f"{counts.answered_turns:,d} turn{'' if counts.answered_turns == 1 else 's'}"
    if status == "partial":
        if asked is not None:
            done = (
                int(last.get("skipped", 0))
                + int(last.get("answered", 0))
                + int(last.get("answer_errors", 0))
            )
            return STOPPED, f"stopped at {done:,d} of {asked:,d} turns", asked
        return STOPPED, f"stopped after {turns}", asked
    if status == "failed":
        return FAILED, f"failed: {counts.first_endpoint_error or 'every request failed'}", asked
    if status == "running":
        return RUNNING, f"running, {turns} so far" + (f" of {asked:,d}" if asked else ""), asked
    text = ("imported, " if source == "import" else "complete, ") + turns
    if counts.endpoint_errors:
        text += f"; {counts.endpoint_errors:,d} failed at the endpoint (running it again asks them)"
    return COMPLETE, text, asked


def listing_of(session: Session, run: JudgeRun) -> RunListing:
    """A stored run as a :class:`RunListing` (a building block inside a session)."""
    assert run.id is not None
    return _listing(run, judging.run_counts_of(session, run_id=run.id))


def listings_of(session: Session, runs: Sequence[JudgeRun]) -> list[RunListing]:
    """Stored runs as :class:`RunListing` values, their counts read in one query (a
    building block inside a session)."""
    counts = judging.runs_counts(session, run_ids=[run.id for run in runs if run.id is not None])
    empty = judging.RunCounts(0, 0, 0, 0, None)
    return [_listing(run, counts.get(run.id or 0, empty)) for run in runs]


def _listing(run: JudgeRun, counts: judging.RunCounts) -> RunListing:
    assert run.id is not None
    summary = json.loads(run.summary_json) if run.summary_json else None
    state, text, asked = _state(run.status, run.source, counts, summary)
    return RunListing(
        id=run.id,
        name=run_name(run),
        judge=run.judge,
        prompt_version=run.prompt_version,
        model=run.model,
        endpoint=run.endpoint,
        rubric=f"{run.rubric_id}@{run.rubric_version}",
        source=run.source,
        status=run.status,
        state=state,
        state_text=text,
        asked=asked,
        covered=counts.answered_turns,
        endpoint_errors=counts.endpoint_errors,
        first_error=counts.first_endpoint_error,
        verdicts=counts.verdicts,
        errors=counts.errors,
        prompt_sha256=run.prompt_sha256,
        calibrated=run.calibration_json is not None,
        summary=summary,
    )


_LISTINGS_MAX = 32
_listings: OrderedDict[tuple[str, str, int], tuple[Any, dict[int, tuple[Any, RunListing]]]] = (
    OrderedDict()
)
_listings_lock = threading.Lock()
"""Per database and rubric version: the token the runs were listed for, and each run's
listing with its own part of that token. Counting a run's verdicts reads all of them
(700,000 at team scale): a page's rerun counts none while nothing changed, and while a
run writes its answers only that run is counted again."""


def rubric_listings(engine: Engine, session: Session, *, rubric: Rubric) -> list[RunListing]:
    """The rubric version's runs as listings, each counted again only when it, its
    verdicts or the cases changed (a building block inside a session of ``engine``;
    frozen values, shared). The token is the reports' (its parts read once per page run)."""

    per_run = token_part(engine, session, "judge", judging.verdicts_token, rubric)
    cases = token_part(engine, session, "cases", cases_storage.cases_token)
    token = (per_run, cases)
    key = (str(engine.url), rubric.id, rubric.version)
    with _listings_lock:
        found = _listings.get(key)
        if found is not None and found[0] == token:
            _listings.move_to_end(key)
            return [listing for _, listing in found[1].values()]
        known = dict(found[1]) if found is not None else {}
    parts = {int(part[0]): (tuple(part), cases) for part in per_run}
    runs = judging.list_runs(session, rubric_id=rubric.id, version=rubric.version)
    stale = [run for run in runs if known.get(run.id or 0, (None,))[0] != parts.get(run.id or 0)]
    fresh = {listed.id: listed for listed in listings_of(session, stale)}
    listed = {
        run.id or 0: (parts.get(run.id or 0), fresh.get(run.id or 0) or known[run.id or 0][1])
        for run in runs
    }
    with _listings_lock:
        _listings[key] = (token, listed)
        while len(_listings) > _LISTINGS_MAX:
            _listings.popitem(last=False)
    return [listing for _, listing in listed.values()]


def list_judge_runs(
    engine: Engine, actor: Actor, *, rubric: Rubric | None = None
) -> list[RunListing]:
    """The stored runs (of ``rubric``), each with its identity and state. Policy owners."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        if rubric is not None:
            return rubric_listings(engine, session, rubric=rubric)
        return listings_of(session, judging.list_runs(session))


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
