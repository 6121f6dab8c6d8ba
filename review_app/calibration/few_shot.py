"""Choosing adjudicated, contrasting few-shot examples for a judge prompt."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any, TypedDict

from review_app.stats.checks import check_int, check_seed
from review_app.stats.core import (
    break_mapping_from_verdicts,
)
from review_app.stats.units import Unit

_EXAMPLE_KINDS = ("pass", "fail", "borderline")


class FewShotJson(TypedDict):
    """A chosen example: the rubric example shape and its unit."""

    label: str
    kind: str
    context: str
    reply: str
    why: str
    case_id: str
    turn: int
    judge_label: str | None


def few_shot_examples(
    candidates: Sequence[Mapping[str, Any]],
    *,
    verdict_by_code: Mapping[str, str],
    per_label: int = 1,
    kinds: Collection[str] = _EXAMPLE_KINDS,
    exclude_units: Collection[Hashable] = (),
    seed: int = 0,
) -> list[FewShotJson]:
    """Choose adjudicated, contrasting examples for a judge prompt.

    ``candidates`` are gold units as dicts with the fields ``case_id``, ``turn``,
    ``label`` (the adjudicated code) and ``reply`` (the assistant text), and optionally
    ``context`` (what led to the reply), ``why`` (or ``rationale``), ``judge_label`` (the
    judge's code for the unit in the run being improved) and ``agreement`` (share of
    reviewers who gave the gold code, 0..1).

    For every code whose verdict is in ``kinds`` (abstain codes are never examples), up to
    ``per_label`` candidates are chosen, preferring in this order:

    1. units the judge got wrong (``judge_label`` present and different), which are the
       boundaries the prompt has yet to teach;
    2. conversations not already used by an earlier pick, so examples come from
       different cases;
    3. higher reviewer ``agreement`` (clear-cut examples; missing counts as 0);
    4. a seeded, platform-independent hash of ``(case_id, turn)``.

    Units in ``exclude_units`` (``(case_id, turn)``, e.g. the evaluation set) are never
    chosen, so the prompt does not contain its own test items. The result lists fail
    codes first, then borderline, then pass, each group by code, as dicts in the rubric
    example shape ``{"label", "kind", "context", "reply", "why"}`` plus ``case_id``,
    ``turn`` and ``judge_label``. The same input always gives the same output.

    Raises ``ValueError`` with these messages:

    - ``"per_label must be an integer >= 1, got <value>"``
    - ``"kinds must be a subset of pass, fail, borderline, got <value>"``
    - ``"verdict of code <code> must be pass, fail, borderline or abstain, got <value>"``
    - ``"candidate <i> lacks the field <name>"``
    - ``"candidate <i> has label <code>, which is not a code of the rubric"``
    - ``"candidate <i> repeats unit <unit>"``
    """
    per_label = check_int(per_label, "per_label", 1)
    seed = check_seed(seed)
    wanted = set(kinds)
    if not wanted <= set(_EXAMPLE_KINDS):
        raise ValueError(
            f"kinds must be a subset of pass, fail, borderline, got {sorted(wanted)!r}"
        )
    break_mapping_from_verdicts(verdict_by_code)  # validates the verdicts
    excluded = set(exclude_units)

    by_code: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    seen: set[Unit] = set()
    for index, candidate in enumerate(candidates):
        for name in ("case_id", "turn", "label", "reply"):
            if name not in candidate:
                raise ValueError(f"candidate {index} lacks the field {name!r}")
        unit = (candidate["case_id"], candidate["turn"])
        if unit in seen:
            raise ValueError(f"candidate {index} repeats unit {unit!r}")
        seen.add(unit)
        code = candidate["label"]
        if code not in verdict_by_code:
            raise ValueError(
                f"candidate {index} has label {code!r}, which is not a code of the rubric"
            )
        if unit in excluded or verdict_by_code[code] not in wanted:
            continue
        by_code.setdefault(code, []).append((index, candidate))

    def tie_break(candidate: Mapping[str, Any]) -> str:
        text = f"{seed}|{candidate['case_id']!r}|{candidate['turn']!r}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def agreement(candidate: Mapping[str, Any]) -> float:
        value = candidate.get("agreement")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0.0
        return float(value) if math.isfinite(value) else 0.0

    kind_order = {"fail": 0, "borderline": 1, "pass": 2}
    chosen: list[FewShotJson] = []
    used_cases: set[Any] = set()
    for code in sorted(by_code, key=lambda c: (kind_order[verdict_by_code[c]], c)):
        pool = list(by_code[code])
        for _ in range(min(per_label, len(pool))):
            best = min(
                pool,
                key=lambda item: (
                    not _judge_missed(item[1]),
                    item[1]["case_id"] in used_cases,
                    -agreement(item[1]),
                    tie_break(item[1]),
                ),
            )
            pool.remove(best)
            candidate = best[1]
            used_cases.add(candidate["case_id"])
            chosen.append(
                {
                    "label": code,
                    "kind": verdict_by_code[code],
                    "context": str(candidate.get("context") or ""),
                    "reply": str(candidate["reply"]),
                    "why": str(candidate.get("why") or candidate.get("rationale") or ""),
                    "case_id": candidate["case_id"],
                    "turn": candidate["turn"],
                    "judge_label": candidate.get("judge_label"),
                }
            )
    return chosen


def _judge_missed(candidate: Mapping[str, Any]) -> bool:
    judge_label = candidate.get("judge_label")
    return judge_label is not None and judge_label != candidate["label"]
