"""Per-turn labels against a rubric version, blind between reviewers.

* A label is one code of the rubric version plus an optional rationale, on an event
  the rubric applies to (assistant turns for role-adherence).
* Append-only: changing a label adds a row; the reviewer's latest label counts.
* Blind: a reviewer sees other reviewers' labels on a case only once they have
  labeled every turn of it themselves. Policy owners adjudicating see everything
  on the adjudication page; here they are reviewers like any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize, require_reviewer_id
from review_app.services.access.case_access import check_case_access, checked_case_id
from storage import assignments, audit, cases, labels
from storage.engine import read_only
from storage.labels import LabelRow

MAX_RATIONALE_CHARS = input_policy.MAX_NOTE_CHARS


class AlreadyApplied(Exception):
    """A key press of the review page that is stored already (a re-sent queue)."""


@dataclass(frozen=True)
class SavedLabel:
    label_id: int
    case_id: str
    turn: int
    code: str
    labeled_turns: int
    total_turns: int
    changed: bool = True
    """False when the unit already had this label and rationale (nothing was stored)."""


def _clean_rationale(rationale: str | None) -> str | None:
    if rationale is None:
        return None
    text = rationale.strip()
    if len(text) > MAX_RATIONALE_CHARS:
        raise InputError(
            f"a rationale is at most {MAX_RATIONALE_CHARS} characters", field="rationale"
        )
    input_policy.check_text(text, field="rationale")
    return text or None


def record_label(
    engine: Engine,
    actor: Actor,
    *,
    case_id: str,
    turn: int,
    rubric: Rubric,
    code: str,
    rationale: str | None = None,
    event: tuple[str, int] | None = None,
) -> SavedLabel:
    """Store the actor's label for one turn (a new row; the previous one stops counting).

    The same code and rationale as the actor's current label stores nothing (no history
    row, no audit entry) and returns with ``changed=False``.

    ``event`` is the review page's key press ``(client_id, seq)``: stored with the label
    in one transaction, and :class:`AlreadyApplied` is raised when it was stored before.
    """
    actor = authorize(engine, actor, "reviewer")
    reviewer_id = require_reviewer_id(actor)
    if code not in rubric.codes:
        raise InputError(
            f"{code!r} is not a code of {rubric.ref}; codes: {', '.join(rubric.codes)}",
            field="label",
        )
    text = _clean_rationale(rationale)
    with Session(engine) as session:
        # Before anything about the case is told (its turns, which are user events): a
        # reviewer saves only on cases in their queue or labeled by them, and one that
        # does not exist gets them the same answer as one that is not theirs.
        check_case_access(
            actor,
            assignments.case_hash_and_access(session, case_id=case_id, reviewer_id=reviewer_id),
            case_id=case_id,
        )
        actors = cases.event_actors_by_turn(session, case_id=case_id)
        if turn not in actors:
            raise InputError(f"case {case_id} has no turn {turn}", field="turn")
        if actors[turn] != rubric.applies_to:
            raise InputError(
                f"turn {turn} of {case_id} is a {actors[turn]} event; {rubric.ref} labels "
                f"{rubric.applies_to} turns",
                field="turn",
            )
        # One transaction: lock the reviewer's assignment (created on a first save),
        # flip the previous label, insert the new one, count. Everything the caller
        # gets back is read before the commit, so nothing touches the database after
        # it: once commit returns, the label is stored and acknowledged.
        assignment_id = assignments.lock_assignment(
            session,
            case_id=case_id,
            reviewer_id=reviewer_id,
            rubric_id=rubric.id,
            version=rubric.version,
        )
        if event is not None and labels.label_event_applied(
            session, reviewer_id=reviewer_id, client_id=event[0], seq=event[1]
        ):
            raise AlreadyApplied(f"key press {event[1]} of {event[0]} is stored already")
        total = sum(1 for actor_name in actors.values() if actor_name == rubric.applies_to)
        current = labels.current_label(
            session,
            case_id=case_id,
            turn=turn,
            reviewer_id=reviewer_id,
            rubric_id=rubric.id,
            version=rubric.version,
        )
        if current is not None and current[1:] == (code, text):
            # The same label and rationale again (a key pressed twice on a labeled turn):
            # nothing changes, so no new history row; the press is still recorded once.
            if event is not None:
                labels.add_label_event(
                    session,
                    reviewer_id=reviewer_id,
                    client_id=event[0],
                    seq=event[1],
                    case_id=case_id,
                    turn=turn,
                    label_id=current[0],
                )
            labeled = labels.count_current_labeled_turns(
                session,
                case_id=case_id,
                reviewer_id=reviewer_id,
                rubric_id=rubric.id,
                version=rubric.version,
            )
            unchanged = SavedLabel(current[0], case_id, turn, code, labeled, total, changed=False)
            session.commit()
            return unchanged
        before = None if current is None else current[1]
        label_id = labels.add_label(
            session,
            case_id=case_id,
            turn=turn,
            reviewer_id=reviewer_id,
            rubric_id=rubric.id,
            version=rubric.version,
            code=code,
            rationale=text,
        )
        if event is not None:
            labels.add_label_event(
                session,
                reviewer_id=reviewer_id,
                client_id=event[0],
                seq=event[1],
                case_id=case_id,
                turn=turn,
                label_id=label_id,
            )
        labeled = labels.count_current_labeled_turns(
            session,
            case_id=case_id,
            reviewer_id=reviewer_id,
            rubric_id=rubric.id,
            version=rubric.version,
        )
        assignments.record_progress(
            session,
            assignment_id=assignment_id,
            labeled_turns=labeled,
            complete=labeled >= total,
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="label",
            object_type="unit",
            object_key=f"{rubric.ref}:{case_id}:{turn}",
            summary={"before": before, "after": code, "rationale": text is not None},
        )
        saved = SavedLabel(label_id, case_id, turn, code, labeled, total)
        session.commit()
    return saved


@dataclass(frozen=True)
class CaseLabels:
    """What the actor may see of the labels on one case."""

    mine: dict[int, LabelRow]
    my_history: dict[int, list[LabelRow]]
    """Every label the actor gave per turn, oldest first (the last one counts)."""
    others: dict[int, list[LabelRow]] | None
    """Other reviewers' current labels per turn; ``None`` while the actor is blind."""
    labeled_turns: int
    total_turns: int
    other_reviewers: list[str] = field(default_factory=list)
    needs_relabeling: frozenset[int] = frozenset()
    """Turns whose label went stale when ``import --replace`` changed the conversation
    (the reviewer's latest label there is history now; the turn counts as unlabeled)."""

    @property
    def complete(self) -> bool:
        return self.total_turns > 0 and self.labeled_turns >= self.total_turns

    @property
    def blind(self) -> bool:
        return self.others is None


def case_labels(engine: Engine, actor: Actor, *, case_id: str, rubric: Rubric) -> CaseLabels:
    """The actor's labels on the case and, once they labeled every turn, the others'.

    A reviewer asks only about cases in their queue or labeled by them (the same
    ``PermissionDenied`` for one that is not theirs and one that does not exist)."""
    actor = authorize(engine, actor, "reviewer")
    case_id = checked_case_id(case_id)
    with Session(read_only(engine)) as session:
        if not actor.has_role("policy_owner"):
            check_case_access(
                actor,
                assignments.case_hash_and_access(
                    session, case_id=case_id, reviewer_id=actor.reviewer_id
                ),
                case_id=case_id,
            )
        # The turns and the actor's labels (history too) in one query.
        labelable: set[int] = set()
        mine: dict[int, LabelRow] = {}
        history: dict[int, list[LabelRow]] = {}
        for turn, event_actor, row in labels.turns_with_labels(
            session,
            case_id=case_id,
            rubric_id=rubric.id,
            version=rubric.version,
            reviewer_id=actor.reviewer_id,
        ):
            if event_actor == rubric.applies_to:
                labelable.add(turn)
            if row is not None:
                history.setdefault(row.turn, []).append(row)
                if row.current:
                    mine[row.turn] = row
        total = len(labelable)
        labeled = sum(1 for turn in mine if turn in labelable)
        complete = total > 0 and labeled >= total
        others: dict[int, list[LabelRow]] | None = None
        names: list[str] = []
        if complete:
            others = {}
            for row in labels.labels_for_case(
                session, case_id=case_id, rubric_id=rubric.id, version=rubric.version
            ):
                if row.reviewer_id != actor.reviewer_id:
                    others.setdefault(row.turn, []).append(row)
                    names.append(row.reviewer)
    stale = frozenset(
        turn
        for turn, rows in history.items()
        if turn in labelable and turn not in mine and rows[-1].stale
    )
    return CaseLabels(mine, history, others, labeled, total, sorted(set(names)), stale)
