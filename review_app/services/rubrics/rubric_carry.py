"""Publishing rubric version N+1: carry what still holds, queue for re-review what changed.

docs/reference.md, "Rubric versions: mapping and carry-over". One write transaction
(taken beside reviewers' saves without deadlocking, tried again while they hold the
tables): the mapping is checked (a used code left unaccounted for refuses the publication),
then current labels, gold labels and judge verdicts of codes that map one-to-one with
``same`` or ``reworded`` are copied into N+1 (marked carried: source row, publication,
so from which version, when and by whom), labels of ``narrowed``, ``widened``, ``split``
and ``merged`` codes go to their reviewers' re-review queue, and one audit entry holds
the counts. Version N is only read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

import storage.units
from review_app.errors import InputError
from review_app.rubrics.mapping import RE_REVIEW_CHANGES, RubricMapping, map_rubrics
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize, require_reviewer_id
from review_app.services.rubrics.rubric_catalog import (
    RubricCatalog,
    source_name,
    store_rubric_version,
)
from storage import assignments, audit, carry, judging
from storage.engine import read_only
from storage.models import utcnow


@dataclass
class CarryReport:
    """What one publication did; :meth:`to_dict` is ``rubrics publish --json``."""

    rubric: str
    from_ref: str
    carried: dict[str, int]
    """Reviewer labels carried, per code of version N."""
    not_carried: dict[str, int]
    """Current reviewer labels of version N under codes that do not map one-to-one."""
    re_review_units: int
    re_review: dict[str, int]
    gold_carried: dict[str, int] = field(default_factory=dict)
    judge_carried: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "from": self.from_ref,
            "carried": self.carried,
            "not_carried": self.not_carried,
            "re_review_units": self.re_review_units,
            "re_review": self.re_review,
        }

    def lines(self) -> list[str]:
        total = sum(self.carried.values())
        return [
            f"{self.rubric}: carried {total} labels, {sum(self.gold_carried.values())} gold "
            f"labels and {sum(self.judge_carried.values())} judge verdicts from {self.from_ref}",
            *(f"  carried   {code:<28} {n}" for code, n in sorted(self.carried.items())),
            *(f"  re-review {code:<28} {n}" for code, n in sorted(self.not_carried.items())),
            f"{self.re_review_units} units to label again, for "
            + (
                ", ".join(f"{name} ({n})" for name, n in sorted(self.re_review.items())) or "nobody"
            ),
        ]


def _previous(catalog: RubricCatalog, rubric: Rubric) -> Rubric:
    if rubric.version == 1:
        raise InputError(f"{rubric.ref} is the first version: there is nothing to carry")
    return catalog.for_reports(f"{rubric.id}@{rubric.version - 1}")


def mapping_for(catalog: RubricCatalog, rubric: Rubric) -> RubricMapping:
    return map_rubrics(_previous(catalog, rubric), rubric)


def publish_rubric(
    engine: Engine,
    actor: Actor,
    *,
    catalog: RubricCatalog,
    ref: str,
    wait_seconds: float = carry.PUBLISH_WAIT_SECONDS,
    dry_run: bool = False,
) -> CarryReport:
    """Publish ``ref`` (version N+1, a draft until now): carry version N's labels into it
    where their meaning held.

    Policy owners and admins may publish; reviewers are refused. Version N must be
    published. One write transaction holding the publication's locks, taken in the order
    saves take theirs and tried again while other writers hold them, for
    ``wait_seconds`` at most (:func:`storage.carry.run_publication`); one audit entry,
    ``rubric_publish``, with the version's content hash and everything carried and
    queued. ``dry_run`` does all of it in that transaction and rolls it back: the report
    is what publishing now would do, and nothing is stored (``rubrics publish
    --dry-run``, the preview of the rubrics page).
    """
    actor = authorize(engine, actor, "policy_owner")
    new = catalog.any_version(ref)
    mapping = mapping_for(catalog, new)
    old = mapping.old
    one_to_one = mapping.carried()
    re_review_codes = [code for code in old.codes if mapping.fate(code) in RE_REVIEW_CHANGES]
    names: dict[str, Any] = {
        "rubric_id": new.id,
        "from_version": old.version,
        "to_version": new.version,
    }

    def publish(session: Session) -> CarryReport:
        at = utcnow()
        labels_now = storage.units.current_code_counts(
            session, table="labels", rubric_id=old.id, version=old.version
        )
        gold_now = storage.units.current_code_counts(
            session, table="gold_labels", rubric_id=old.id, version=old.version
        )
        used = {
            code: labels_now.get(code, 0) + gold_now.get(code, 0)
            for code in set(labels_now) | set(gold_now)
        }
        mapping.check_publishable(used)
        was_published = catalog.is_published(new.ref)
        stored_before = store_rubric_version(
            session, new, yaml_text=catalog.yaml_texts.get(new.ref), published_by=actor.name
        )
        # "before": the content that acted before (none: the version was a draft)
        before = stored_before if was_published else None
        carry_id = carry.create_carry(session, actor=actor.name, at=at, **names)
        carried = storage.units.carry_labels(
            session, table="labels", carry_id=carry_id, mapping=one_to_one, at=at, **names
        )
        gold = storage.units.carry_labels(
            session, table="gold_labels", carry_id=carry_id, mapping=one_to_one, at=at, **names
        )
        judge = judging.carry_judge_verdicts(
            session, carry_id=carry_id, mapping=one_to_one, at=at, **names
        )
        units, per_reviewer = carry.queue_re_reviews(
            session, carry_id=carry_id, codes=re_review_codes, **names
        )
        assignments.carry_assignments(
            session, at=at, count_assistant_turns=new.applies_to == "assistant", **names
        )
        report = CarryReport(
            rubric=new.ref,
            from_ref=old.ref,
            carried=carried,
            not_carried={
                code: n for code, n in sorted(labels_now.items()) if code not in one_to_one
            },
            re_review_units=units,
            re_review=per_reviewer,
            gold_carried=gold,
            judge_carried=judge,
        )
        summary = {
            **report.to_dict(),
            "gold_carried": gold,
            "judge_carried": judge,
            "mapping": one_to_one,
        }
        carry.finish_carry(session, carry_id=carry_id, summary=summary)
        audit.add_entry(
            session,
            actor=actor.name,
            action="rubric_publish",
            object_type="rubric",
            object_key=new.ref,
            summary={
                "before": before,
                "after": new.sha256,
                "source": source_name(new),
                "carry": carry_id,
                **summary,
            },
        )
        return report

    return carry.run_publication(engine, publish, wait_seconds=wait_seconds, dry_run=dry_run)


@dataclass(frozen=True)
class ReReviewItem:
    """One unit a reviewer is asked to label again, with what they said before."""

    case_id: str
    turn: int
    old_ref: str
    old_code: str
    old_definition: str
    new_codes: tuple[str, ...]
    """The codes of the new version that took over the old one."""
    done: bool


def re_review_queue(
    engine: Engine,
    actor: Actor,
    *,
    catalog: RubricCatalog,
    rubric: Rubric,
    case_id: str | None = None,
) -> list[ReReviewItem]:
    """The actor's own re-review units under ``rubric`` (of one case, if given)."""
    actor = authorize(engine, actor, "reviewer")
    if actor.reviewer_id is None or rubric.version == 1:
        return []
    reviewer_id = require_reviewer_id(actor)
    with Session(read_only(engine)) as session:
        rows = carry.re_reviews_of(
            session,
            reviewer_id=reviewer_id,
            rubric_id=rubric.id,
            version=rubric.version,
            case_id=case_id,
        )
    if not rows:
        return []
    mapping = mapping_for(catalog, rubric)
    items = []
    for row, done in rows:
        successors = tuple(o.code for o in mapping.successors(row.old_code))
        items.append(
            ReReviewItem(
                case_id=row.case_id,
                turn=row.turn,
                old_ref=mapping.old.ref,
                old_code=row.old_code,
                old_definition=mapping.old.label(row.old_code).definition,
                new_codes=successors,
                done=done,
            )
        )
    return items


@dataclass(frozen=True)
class CarryRecord:
    to_ref: str
    from_ref: str
    actor: str
    at: str
    summary: dict[str, Any]


def carry_history(engine: Engine, actor: Actor, *, rubric_id: str) -> list[CarryRecord]:
    """Every publication of ``rubric_id``'s versions, oldest first (policy owners and
    admins: the counts per code and per reviewer are not for reviewers, who label blind)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        rows = carry.carries_of(session, rubric_id=rubric_id)
        return [
            CarryRecord(
                to_ref=f"{row.rubric_id}@{row.to_version}",
                from_ref=f"{row.rubric_id}@{row.from_version}",
                actor=row.actor,
                at=row.at.isoformat(timespec="seconds"),
                summary=json.loads(row.summary_json),
            )
            for row in rows
        ]
