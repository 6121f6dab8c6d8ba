"""What the "most informative first" queue order reads: judge verdicts per turn, every
reviewer's current label per turn, and the deterministic violations, for some cases."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlmodel import Session, col

from storage.models import Finding, JudgeRun, JudgeVerdict, Label

_CHUNK = 500


def judge_turn_verdicts(
    session: Session, *, case_ids: Sequence[str], rubric_id: str, version: int
) -> list[tuple[str, int, int, str | None, float | None]]:
    """``(case_id, turn, run_id, label, score)`` of every answered per-turn verdict."""
    found: list[tuple[str, int, int, str | None, float | None]] = []
    for start in range(0, len(case_ids), _CHUNK):
        chunk = list(case_ids[start : start + _CHUNK])
        rows = session.execute(
            select(
                col(JudgeVerdict.case_id),
                col(JudgeVerdict.turn),
                col(JudgeVerdict.run_id),
                col(JudgeVerdict.label),
                col(JudgeVerdict.score),
            )
            .join(JudgeRun, col(JudgeRun.id) == col(JudgeVerdict.run_id))
            .where(
                col(JudgeRun.rubric_id) == rubric_id,
                col(JudgeRun.rubric_version) == version,
                col(JudgeVerdict.case_id).in_(chunk),
                col(JudgeVerdict.turn).is_not(None),
                col(JudgeVerdict.error).is_(None),
            )
        )
        found.extend((c, int(t), r, label, score) for c, t, r, label, score in rows)
    return found


def current_labels(
    session: Session, *, case_ids: Sequence[str], rubric_id: str, version: int
) -> list[tuple[str, int, int, str]]:
    """``(case_id, turn, reviewer_id, code)`` of every reviewer's current label."""
    found: list[tuple[str, int, int, str]] = []
    for start in range(0, len(case_ids), _CHUNK):
        chunk = list(case_ids[start : start + _CHUNK])
        rows = session.execute(
            select(
                col(Label.case_id), col(Label.turn), col(Label.reviewer_id), col(Label.code)
            ).where(
                col(Label.rubric_id) == rubric_id,
                col(Label.rubric_version) == version,
                col(Label.current),
                col(Label.case_id).in_(chunk),
            )
        )
        found.extend((c, t, r, code) for c, t, r, code in rows)
    return found


def violation_turns(
    session: Session, *, case_ids: Sequence[str], evaluator_version: str
) -> list[tuple[str, int]]:
    """``(case_id, turn)`` of every deterministic violation."""
    found: list[tuple[str, int]] = []
    for start in range(0, len(case_ids), _CHUNK):
        chunk = list(case_ids[start : start + _CHUNK])
        rows = session.execute(
            select(col(Finding.case_id), col(Finding.turn)).where(
                col(Finding.kind) == "violation",
                col(Finding.evaluator_version) == evaluator_version,
                col(Finding.case_id).in_(chunk),
                col(Finding.turn).is_not(None),
            )
        )
        found.extend((c, int(t)) for c, t in rows)
    return found
