"""Reviewer reliability and agreement over time: which reviewer to trust on which codes, and
whether agreement moves.

``review-app reviewers reliability --rubric R [--json]`` and ``review-app agreement
--over-time --json``, and the team and agreement pages. The figures come from the pure
modules :mod:`review_app.agreement.reliability` (Dawid-Skene over every current label,
anchored on adjudicated gold) and :mod:`review_app.agreement.over_time`; this module
reads the labels, gold labels and publications. Both reports are JSON documents
(printed, and stored as payloads of the computed reports); :class:`ReliabilityReport`
and :class:`OverTimeReport` name their keys.
"""

from __future__ import annotations

from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, TypedDict

from sqlalchemy import Engine
from sqlmodel import Session

import storage.carry
import storage.gold
import storage.labels
from review_app.agreement.over_time import (
    DEFAULT_BATCH,
    DifferenceJson,
    PeriodJson,
    PublicationJson,
    SessionAgreementJson,
    agreement_over_time,
)
from review_app.agreement.reliability import (
    MIN_CODE_UNITS,
    MIX_UP_SHARE,
    ReviewerReliabilityJson,
    reviewer_reliability,
)
from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.stats.core import CLUSTER_METHOD, EstimateJson
from storage.engine import read_only

__all__ = [
    "OverTimeReport",
    "ReliabilityReport",
    "agreement_over_time_report",
    "reliability_report",
]


class ReliabilityReport(TypedDict):
    """``reviewers reliability --json``: docs/reference.md, "Reviewer reliability JSON"."""

    rubric: str
    codes: list[str]
    priors: dict[str, float]
    units: int
    labels: int
    anchored_units: int
    conversations: int
    iterations: int
    converged: bool
    resamples: int
    seed: int
    method: str | None
    reviewers: list[ReviewerReliabilityJson]
    below_others: list[str]
    sentence: str
    warnings: list[str]


def reliability_report(
    engine: Engine, actor: Actor, *, rubric: Rubric, n_resamples: int = 200, seed: int = 0
) -> ReliabilityReport:
    """Each reviewer's confusion matrix and accuracy under a rubric version (policy
    owners): Dawid-Skene over every current label, adjudicated gold as anchors,
    intervals from ``n_resamples`` conversation-bootstrap resamples (0: none)."""
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(n_resamples, bool) or n_resamples < 0:
        raise InputError(f"must be 0 or more, got {n_resamples}", field="--resamples")
    if isinstance(seed, bool) or seed < 0:
        raise InputError(f"must be zero or more, got {seed}", field="--seed")
    with Session(read_only(engine)) as session:
        columns = storage.labels.current_label_columns(
            session, rubric_id=rubric.id, version=rubric.version
        )
        adjudicated = storage.gold.current_gold(
            session, rubric_id=rubric.id, version=rubric.version
        )
    units = list(zip(columns.case_ids, columns.turns, strict=True))
    result = reviewer_reliability(
        units=units,
        reviewers=columns.reviewers,
        codes=columns.codes,
        anchors={unit: gold.code for unit, gold in adjudicated.items()},
        clusters=columns.case_ids,
        code_order=rubric.codes,
        n_resamples=n_resamples,
        seed=seed,
    )
    below = [r.name for r in result.below_others]
    if not result.reviewers:
        sentence = "No labels under this rubric version yet: nothing to estimate."
    elif below:
        sentence = " ".join(r.sentence for r in result.below_others) + (
            " Look at their labels on those codes with them, or point them to the codes' "
            "definitions and examples."
        )
    elif n_resamples == 0:
        sentence = "No intervals were asked for, so no reviewer is compared with the others."
    else:
        values = [r.accuracy.value for r in result.reviewers if r.accuracy.value is not None]
        sentence = (
            f"No reviewer is below the others: estimated accuracies run from {min(values):.2f} "
            f"to {max(values):.2f}."
        )
    return {
        "rubric": rubric.ref,
        "codes": list(result.codes),
        "priors": result.priors,
        "units": result.n_units,
        "labels": result.n_labels,
        "anchored_units": result.n_anchored,
        "conversations": result.n_conversations,
        "iterations": result.iterations,
        "converged": result.converged,
        "resamples": result.n_resamples,
        "seed": result.seed,
        "method": CLUSTER_METHOD if n_resamples else None,
        "reviewers": [r.to_dict() for r in result.reviewers],
        "below_others": below,
        "sentence": sentence,
        "warnings": result.warnings,
    }


RELIABILITY_RULES = (
    f"A reviewer mixes up a code when they give another code to at least "
    f"{100 * MIX_UP_SHARE:.0f}% of the turns whose true code it is (read on codes with at "
    f"least {MIN_CODE_UNITS:.0f} of their turns)."
)


class SessionFigures(TypedDict):
    """Agreement in a session's first hour and after it, pooled and by reviewer."""

    first_hour: EstimateJson
    later: EstimateJson
    difference: DifferenceJson
    falls: bool
    reviewers: dict[str, SessionAgreementJson]


class OverTimeReport(TypedDict):
    """``agreement --over-time --json``: docs/reference.md, "Agreement over time JSON"."""

    rubric: str
    by: str
    batch: int
    periods: list[PeriodJson]
    publications: list[PublicationJson]
    session: SessionFigures
    sentences: list[str]
    warnings: list[str]


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def agreement_over_time_report(
    engine: Engine, actor: Actor, *, rubric: Rubric, batch: int = DEFAULT_BATCH
) -> OverTimeReport:
    """Agreement per week (or batch of ``batch`` labels) over every version of the
    rubric up to ``rubric``, publications marked, and by position in a session (policy
    owners). Labels carried into a version count in the version they were given in."""
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(batch, bool) or batch < 1:
        raise InputError(f"must be at least 1, got {batch}", field="--batch")
    units: list[tuple[str, int]] = []
    reviewers: list[str] = []
    codes: list[str] = []
    times: list[datetime] = []
    versions: list[str] = []
    in_sessions: list[bool] = []
    gold: dict[tuple[str, Any], str] = {}
    imported = 0
    with Session(read_only(engine)) as session:
        labeled = storage.labels.rubric_versions_with_labels(session)
        for version in range(1, rubric.version + 1):
            if (rubric.id, version) not in labeled:
                continue
            ref = f"{rubric.id}@{version}"
            found = storage.labels.current_labels_with_times(
                session, rubric_id=rubric.id, version=version
            )
            for i in range(len(found)):
                if found.carried[i]:
                    continue
                units.append((found.case_ids[i], found.turns[i]))
                reviewers.append(found.reviewers[i])
                codes.append(found.codes[i])
                times.append(_utc(found.created_at[i]))
                versions.append(ref)
                in_sessions.append(not found.imported[i])
                imported += found.imported[i]
            for unit, row in storage.gold.current_gold(
                session, rubric_id=rubric.id, version=version
            ).items():
                gold[(ref, unit)] = row.code
        publications = [
            (f"{rubric.id}@{carry.to_version}", _utc(carry.at))
            for carry in storage.carry.carries_of(session, rubric_id=rubric.id)
            if carry.to_version <= rubric.version
        ]
    result = agreement_over_time(
        units=units,
        reviewers=reviewers,
        codes=codes,
        times=times,
        versions=versions,
        gold=gold,
        publications=publications,
        in_sessions=in_sessions,
        batch=batch,
        conversation_of=itemgetter(0),
    )
    warnings = list(result.warnings)
    if imported:
        warnings.append(
            f"{imported} labels came from label files: their time is when the file was "
            "imported, and they are left out of the session figures"
        )
    return {
        "rubric": rubric.ref,
        "by": result.by,
        "batch": result.batch,
        "periods": [p.to_dict() for p in result.periods],
        "publications": result.publications,
        "session": {
            **result.session.to_dict(),
            "reviewers": {
                name: figures.to_dict() for name, figures in result.session_by_reviewer.items()
            },
        },
        "sentences": result.sentences,
        "warnings": warnings,
    }
