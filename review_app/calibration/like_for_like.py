"""The judge and the reviewers measured on the same units against the same reference.

Cohen (1960) for kappa; percentile bootstrap intervals (Efron & Tibshirani 1993).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

from review_app.stats.checks import check_int, check_seed
from review_app.stats.confusion import confusion_from_codes
from review_app.stats.core import (
    CLUSTER_METHOD,
    UNIT_METHOD,
    Estimate,
    EstimateJson,
    bootstrap_confusions,
    bootstrap_method,
    cluster_codes,
    kappa_from_confusion,
    percentile_interval,
)
from review_app.stats.units import UnitT, sort_key, sorted_units


class ReviewerPair(TypedDict):
    """Two reviewers and the judge on the units all three labeled."""

    reviewers: list[str]
    units: int
    reviewer_kappa: EstimateJson
    judge_kappa: dict[str, EstimateJson]
    """The judge's kappa with each of the two, by reviewer."""


class LeaveOneOut(TypedDict):
    """A reviewer and the judge against gold the reviewer's own label did not make."""

    reviewer: str
    units: int
    gold_source: str
    reviewer_kappa: EstimateJson
    judge_kappa: EstimateJson


class LikeForLike(TypedDict):
    """:func:`like_for_like` (docs/reference.md, "Judge report JSON")."""

    method: str
    pairs: list[ReviewerPair]
    leave_one_out_gold: list[LeaveOneOut]


def kappa_estimate(
    first: Sequence[Hashable],
    second: Sequence[Hashable],
    *,
    n_resamples: int,
    seed: int,
    clusters: Sequence[Hashable] | None = None,
    no_units_reason: str = "no shared units",
    constant_reason: str = (
        "Cohen's kappa is undefined: both sides gave one and the same code to every unit"
    ),
) -> Estimate:
    """Cohen's kappa of two code sequences over the same units, with a bootstrap interval.

    kappa = (p_o - p_e) / (1 - p_e) (Cohen 1960, :func:`kappa_from_confusion`). The 95%
    percentile interval resamples units, or, given ``clusters`` (one conversation key
    per unit), whole conversations (cluster bootstrap); ``method`` says which. No
    interval when ``n_resamples`` is 0 or fewer than 2 units (or conversations) are
    behind the kappa. ``no_units_reason`` and ``constant_reason`` say why the kappa is
    undefined when there are no units, or when both sides used one code throughout.
    """
    labels = sorted({*first, *second}, key=sort_key)
    position = {code: i for i, code in enumerate(labels)}
    k = max(len(labels), 1)
    a = np.array([position[c] for c in first], dtype=np.int64)
    b = np.array([position[c] for c in second], dtype=np.int64)
    n = len(a)
    if n == 0:
        return Estimate(None, 0, None, no_units_reason)
    confusion = confusion_from_codes(a, b, n_categories=k)
    value = float(kappa_from_confusion(confusion))
    if not math.isfinite(value):
        return Estimate(None, n, None, constant_reason)
    codes = None if clusters is None else cluster_codes(list(clusters))
    n_clusters = n if codes is None else int(codes.max()) + 1
    if n_resamples == 0:
        return Estimate(value, n, None, "no confidence interval: n_resamples is 0")
    if n < 2 or n_clusters < 2:
        what = "units" if n < 2 else "conversations"
        return Estimate(value, n, None, f"no confidence interval from fewer than 2 {what}")
    boot = bootstrap_confusions(a, b, k, n_resamples=n_resamples, seed=seed, clusters=codes)
    interval, reason = percentile_interval(kappa_from_confusion(boot))
    return Estimate(
        value, n, interval, reason, method=bootstrap_method(codes) if interval else None
    )


def like_for_like(
    labels_by_reviewer: Mapping[Any, Mapping[UnitT, str]],
    judged: Mapping[UnitT, str],
    *,
    cluster_of: Callable[[UnitT], Hashable] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> LikeForLike:
    """The judge and the reviewers measured on the same units against the same reference.

    - ``pairs``: for every two reviewers ``a`` and ``b``, on the units that ``a``, ``b``
      and the judge all labeled: kappa(``a``, ``b``) beside kappa(judge, ``a``) and
      kappa(judge, ``b``). The judge is as good as a reviewer when its kappa with each
      reviewer is about the reviewers' kappa with each other.
    - ``leave_one_out_gold``: for every reviewer ``r``, the units where two or more
      *other* reviewers labeled and all agree (gold that ``r``'s label did not make) and
      the judge labeled: kappa(``r``, that gold) beside kappa(judge, that gold).

    Kappa is Cohen's (1960); intervals are percentile bootstraps over conversations
    when ``cluster_of`` is given (cluster bootstrap), over units otherwise.
    """
    n_resamples = check_int(n_resamples, "n_resamples", 0)
    seed = check_seed(seed)
    reviewers = sorted(labels_by_reviewer, key=sort_key)

    def estimate(
        units: list[UnitT], first: Mapping[UnitT, str], second: Mapping[UnitT, str]
    ) -> Estimate:
        return kappa_estimate(
            [first[u] for u in units],
            [second[u] for u in units],
            n_resamples=n_resamples,
            seed=seed,
            clusters=None if cluster_of is None else [cluster_of(u) for u in units],
        )

    pairs: list[ReviewerPair] = []
    for i, a in enumerate(reviewers):
        for b in reviewers[i + 1 :]:
            first, second = labels_by_reviewer[a], labels_by_reviewer[b]
            units = sorted_units(u for u in first.keys() & second.keys() if u in judged)
            pairs.append(
                {
                    "reviewers": [str(a), str(b)],
                    "units": len(units),
                    "reviewer_kappa": estimate(units, first, second).to_dict(),
                    "judge_kappa": {
                        str(a): estimate(units, judged, first).to_dict(),
                        str(b): estimate(units, judged, second).to_dict(),
                    },
                }
            )
    leave_one_out: list[LeaveOneOut] = []
    for r in reviewers:
        own = labels_by_reviewer[r]
        gold: dict[UnitT, str] = {}
        for unit in own:
            if unit not in judged:
                continue
            others = [
                labels_by_reviewer[o][unit]
                for o in reviewers
                if o != r and unit in labels_by_reviewer[o]
            ]
            if len(others) >= 2 and len(set(others)) == 1:
                gold[unit] = others[0]
        units = sorted_units(gold)
        leave_one_out.append(
            {
                "reviewer": str(r),
                "units": len(units),
                "gold_source": "unanimous among the other reviewers (2 or more)",
                "reviewer_kappa": estimate(units, own, gold).to_dict(),
                "judge_kappa": estimate(units, judged, gold).to_dict(),
            }
        )
    return {
        "method": CLUSTER_METHOD if cluster_of is not None else UNIT_METHOD,
        "pairs": pairs,
        "leave_one_out_gold": leave_one_out,
    }
