"""Which reviewer can be trusted on which codes: Dawid-Skene over every label.

Pairwise kappa says how often two reviewers agree, not who is right. The Dawid-Skene
model (:mod:`review_app.stats.dawid_skene`) uses every current label of a rubric
version: each unit has a latent true code, each reviewer a confusion matrix, and
adjudicated gold fixes a unit's true code (an *anchor*; unanimous units are no anchor,
the model already weighs agreement). From the fit, per reviewer:

- ``confusion[c][l]``: the probability of giving code ``l`` to a turn whose true code
  is ``c``;
- ``accuracy``: the expected share of the reviewer's labels that are the true code,
  ``(1 / n_w) sum_{labels (i, l) of w} q_i(l)`` with ``q_i`` the posterior of unit
  ``i``; its 95% interval is the percentile interval of the same figure over cluster
  bootstrap resamples of conversations (Field & Welsh 2007), the model fitted again
  on each (started from the fit to all data);
- the codes it mixes up: every true code ``c`` with at least :data:`MIN_CODE_UNITS`
  expected turns of the reviewer where it gives another code ``l`` with probability
  at least :data:`MIX_UP_SHARE`, in a sentence;
- whether it is *below the others*: its accuracy is below the lower end of the
  interval of the other reviewers' pooled accuracy (their labels together, on the
  same resamples), and the percentile interval of the difference (others minus its
  own, resample by resample) lies above 0, from at least :data:`MIN_VERDICT_LABELS`
  labels (the second condition keeps a reviewer with few labels, whose own estimate
  varies more than the pooled one, from being named by chance), and only when at least
  :data:`MIN_ANCHORS` units are adjudicated or most units have three labels or more;
  the codes
  responsible are those whose shortfall in recall, weighted by the reviewer's share
  of turns of that code, makes up at least a tenth of the gap, with a recall at least
  :data:`MIX_UP_SHARE` below the others' on it.

References
----------
Dawid, A. P., & Skene, A. M. (1979). Maximum likelihood estimation of observer
    error-rates using the EM algorithm. Applied Statistics, 28(1), 20-28.
Field, C. A., & Welsh, A. H. (2007). Bootstrapping clustered data. Journal of the Royal
    Statistical Society B, 69(3), 369-390.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from review_app.stats.checks import check_int, check_seed
from review_app.stats.core import (
    CLUSTER_METHOD,
    MIN_BOOTSTRAP_UNITS,
    Estimate,
    EstimateJson,
    cluster_codes,
    cluster_draws,
    percentile_interval,
)
from review_app.stats.dawid_skene import DawidSkeneFit, dawid_skene

__all__ = [
    "MIN_ANCHORS",
    "MIN_CODE_UNITS",
    "MIN_VERDICT_LABELS",
    "MIX_UP_SHARE",
    "MixUp",
    "Reliability",
    "ReviewerReliability",
    "reviewer_reliability",
]

MIX_UP_SHARE = 0.2
"""A reviewer mixes up code ``c`` with ``l`` when it gives ``l`` to at least this share of
the turns whose true code is ``c``."""
MIN_CODE_UNITS = 5.0
"""A code needs at least this many expected turns of a reviewer before the reviewer's
row for it is read (a row estimated from two turns says nothing)."""
MIN_VERDICT_LABELS = 30
"""No reviewer is named below the others from fewer labels than this."""
MIN_ANCHORS = 10
"""Without this many adjudicated units, and with most units labelled fewer than three
times, the model cannot tell which of two disagreeing reviewers is right well enough
to name anyone."""
RESAMPLE_TOL = 1e-6
RESAMPLE_MAX_ITER = 50


class MixUpJson(TypedDict):
    true: str
    given: str
    probability: float
    units: float


class ReviewerReliabilityJson(TypedDict):
    """:meth:`ReviewerReliability.to_dict` (docs/reference.md, "Reviewer reliability
    JSON")."""

    name: str
    n_labels: int
    accuracy: float | None
    ci95: list[float] | None
    reason: str | None
    others: EstimateJson
    confusion: dict[str, dict[str, float]]
    """True code -> given code -> probability."""
    units_by_code: dict[str, float]
    mix_ups: list[MixUpJson]
    below_others: bool
    responsible_codes: list[str]
    sentence: str


@dataclass(frozen=True)
class MixUp:
    """A reviewer gives ``given`` to a share ``probability`` of the turns whose true
    code is ``true`` (``units``: the expected number of such turns of the reviewer)."""

    true: str
    given: str
    probability: float
    units: float

    def to_dict(self) -> MixUpJson:
        return {
            "true": self.true,
            "given": self.given,
            "probability": self.probability,
            "units": self.units,
        }


@dataclass(frozen=True)
class ReviewerReliability:
    """One reviewer's figures (module docstring)."""

    name: str
    n_labels: int
    accuracy: Estimate
    others: Estimate
    """The other reviewers' pooled accuracy, on the same resamples."""
    confusion: dict[str, dict[str, float]]
    """True code -> given code -> probability."""
    units_by_code: dict[str, float]
    """True code -> expected number of this reviewer's turns with that true code."""
    mix_ups: list[MixUp]
    below_others: bool
    responsible_codes: list[str]
    sentence: str

    def to_dict(self) -> ReviewerReliabilityJson:
        return {
            "name": self.name,
            "n_labels": self.n_labels,
            "accuracy": self.accuracy.value,
            "ci95": None if self.accuracy.ci95 is None else list(self.accuracy.ci95),
            "reason": self.accuracy.reason,
            "others": self.others.to_dict(),
            "confusion": self.confusion,
            "units_by_code": self.units_by_code,
            "mix_ups": [m.to_dict() for m in self.mix_ups],
            "below_others": self.below_others,
            "responsible_codes": self.responsible_codes,
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class Reliability:
    """Every reviewer's reliability from one Dawid-Skene fit."""

    codes: tuple[str, ...]
    priors: dict[str, float]
    reviewers: list[ReviewerReliability]
    n_units: int
    n_labels: int
    n_anchored: int
    n_conversations: int
    iterations: int
    converged: bool
    n_resamples: int
    seed: int
    warnings: list[str] = field(default_factory=list)

    @property
    def below_others(self) -> list[ReviewerReliability]:
        return [r for r in self.reviewers if r.below_others]


def _share(value: float) -> str:
    return f"{100 * value:.0f}%"


def _mix_ups(confusion: np.ndarray, units: np.ndarray, codes: Sequence[str]) -> list[MixUp]:
    found: list[MixUp] = []
    for c, true in enumerate(codes):
        if units[c] < MIN_CODE_UNITS:
            continue
        for g, given in enumerate(codes):
            if g != c and confusion[c, g] >= MIX_UP_SHARE:
                found.append(MixUp(true, given, float(confusion[c, g]), float(units[c])))
    found.sort(key=lambda m: -m.probability)
    return found


def _mix_up_sentence(name: str, mix_ups: list[MixUp]) -> str:
    if not mix_ups:
        return (
            f"{name} mixes up no codes: on every code with at least {MIN_CODE_UNITS:.0f} of "
            f"their turns, they give another code to less than {_share(MIX_UP_SHARE)} of them."
        )
    parts = [
        f"`{m.given}` to {_share(m.probability)} of the `{m.true}` turns (about "
        f"{m.units:.0f} turns)"
        for m in mix_ups
    ]
    return f"{name} gives " + "; ".join(parts) + "."


def _interval(values: np.ndarray, n_clusters: int, n_resamples: int) -> tuple[Any, str | None]:
    if n_resamples == 0:
        return None, "no interval: no bootstrap resamples asked for"
    if n_clusters < MIN_BOOTSTRAP_UNITS:
        return None, (
            f"no interval: only {n_clusters} conversations behind this accuracy (fewer than "
            f"{MIN_BOOTSTRAP_UNITS})"
        )
    return percentile_interval(values)


def reviewer_reliability(
    *,
    units: Sequence[Hashable],
    reviewers: Sequence[str],
    codes: Sequence[str],
    anchors: Mapping[Hashable, str] | None = None,
    clusters: Sequence[Hashable] | None = None,
    code_order: Sequence[str] = (),
    n_resamples: int = 200,
    seed: int = 0,
) -> Reliability:
    """Each reviewer's confusion matrix and accuracy (module docstring).

    Parameters
    ----------
    units, reviewers, codes : sequences of one entry per label
        The unit labelled (any hashable key), the reviewer and the code; a reviewer
        labels a unit at most once.
    anchors : mapping of unit to code, optional
        Adjudicated gold: fixes the true code of each unit that has labels.
    clusters : sequence, optional
        The conversation of each label's unit (one entry per label); by default each
        unit is a conversation of its own.
    code_order : sequence of str
        The order of the codes in the result (the rubric's); codes not in it follow,
        sorted.
    n_resamples : int, default 200
        Cluster bootstrap resamples for the intervals; 0 for none.
    seed : int, default 0
        Seed of the resamples.

    Raises
    ------
    ValueError
        ``"units, reviewers and codes must have the same length"``, ``"clusters must hold
        one conversation per label"``, ``"reviewer <name> labels unit <unit> twice"``, and
        the messages of :func:`~review_app.stats.checks.check_int` and
        :func:`~review_app.stats.checks.check_seed`.

    Examples
    --------
    Two careful reviewers and one who says ``ok`` to half the ``bad`` turns:

    >>> rng = np.random.default_rng(0)
    >>> truth = ["bad" if rng.random() < 0.4 else "ok" for _ in range(200)]
    >>> def says(name, code):
    ...     slip = 0.5 if (name == "cy" and code == "bad") else 0.03
    ...     return ("ok" if code == "bad" else "bad") if rng.random() < slip else code
    >>> rows = [(i, name, says(name, t)) for i, t in enumerate(truth)
    ...         for name in ("ana", "bo", "cy")]
    >>> result = reviewer_reliability(units=[r[0] for r in rows],
    ...     reviewers=[r[1] for r in rows], codes=[r[2] for r in rows], n_resamples=50)
    >>> [(r.name, r.below_others, r.responsible_codes) for r in result.reviewers]
    [('ana', False, []), ('bo', False, []), ('cy', True, ['bad'])]
    """
    if not len(units) == len(reviewers) == len(codes):
        raise ValueError("units, reviewers and codes must have the same length")
    if clusters is not None and len(clusters) != len(units):
        raise ValueError("clusters must hold one conversation per label")
    n_resamples = check_int(n_resamples, "n_resamples", 0)
    seed = check_seed(seed)
    anchors = dict(anchors or {})
    unit_index: dict[Hashable, int] = {}
    unit_of = np.fromiter(
        (unit_index.setdefault(u, len(unit_index)) for u in units), dtype=np.int64, count=len(units)
    )
    names = sorted(set(reviewers))
    reviewer_index = {name: i for i, name in enumerate(names)}
    reviewer_of = np.fromiter(
        (reviewer_index[r] for r in reviewers), dtype=np.int64, count=len(reviewers)
    )
    seen = set(zip(unit_of.tolist(), reviewer_of.tolist(), strict=True))
    if len(seen) != len(units):
        counted: set[tuple[int, int]] = set()
        for u, r, key, name in zip(unit_of.tolist(), reviewer_of.tolist(), units, reviewers,
                                   strict=True):  # fmt: skip
            if (u, r) in counted:
                raise ValueError(f"reviewer {name} labels unit {key!r} twice")
            counted.add((u, r))
    used = set(codes) | {anchors[u] for u in unit_index if u in anchors}
    ordered = [c for c in dict.fromkeys(code_order) if c in used]
    ordered += sorted(used - set(ordered))
    code_index = {code: i for i, code in enumerate(ordered)}
    label_of = np.fromiter((code_index[c] for c in codes), dtype=np.int64, count=len(codes))
    n_units, n_reviewers, n_codes = len(unit_index), len(names), len(ordered)
    anchor = np.full(n_units, -1, dtype=np.int64)
    for key, i in unit_index.items():
        if key in anchors:
            anchor[i] = code_index[anchors[key]]
    n_anchored = int((anchor >= 0).sum())
    if clusters is None:
        cluster_of_unit = np.arange(n_units, dtype=np.int64)
    else:
        per_label = cluster_codes(list(clusters))
        cluster_of_unit = np.zeros(n_units, dtype=np.int64)
        cluster_of_unit[unit_of] = per_label
    n_conversations = int(np.unique(cluster_of_unit).size)
    warnings: list[str] = []
    if n_units == 0:
        return Reliability(
            tuple(ordered), {}, [], 0, 0, 0, 0, 0, False, n_resamples, seed,
            ["there are no labels"],
        )  # fmt: skip

    fit = dawid_skene(
        unit_of, reviewer_of, label_of, n_units=n_units, n_reviewers=n_reviewers,
        n_codes=n_codes, anchors=anchor,
    )  # fmt: skip
    if not fit.converged:
        warnings.append(
            f"the estimate did not settle in {fit.iterations} rounds of EM: read it with care"
        )
    labels_per_unit = np.bincount(unit_of, minlength=n_units)
    identified = n_anchored >= MIN_ANCHORS or float(np.median(labels_per_unit)) >= 3
    if not identified:
        warnings.append(
            f"only {n_anchored} units are adjudicated and most units have fewer than 3 "
            "labels: which of two disagreeing reviewers is right rests on each one's record "
            "on other turns, so no reviewer is named below the others; adjudicate at least "
            f"{MIN_ANCHORS} disagreements to anchor the estimate"
        )
    n_labels_of = np.bincount(reviewer_of, minlength=n_reviewers)

    def accuracies(model: DawidSkeneFit, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per reviewer: its accuracy, and the other reviewers' pooled accuracy."""
        right = model.posteriors[unit_of, label_of] * weight[unit_of]
        hits = np.bincount(reviewer_of, weights=right, minlength=n_reviewers)
        count = np.bincount(reviewer_of, weights=weight[unit_of], minlength=n_reviewers)
        with np.errstate(invalid="ignore", divide="ignore"):
            own = hits / count
            others = (hits.sum() - hits) / (count.sum() - count)
        return own, others

    own, others = accuracies(fit, np.ones(n_units))
    resampled_own = np.full((n_resamples, n_reviewers), np.nan)
    resampled_others = np.full((n_resamples, n_reviewers), np.nan)
    if n_resamples:
        for start, counts, cluster_of in cluster_draws(
            n_units, n_resamples=n_resamples, seed=seed, clusters=cluster_of_unit
        ):
            for row in range(counts.shape[0]):
                weight = counts[row][cluster_of].astype(np.float64)
                refit = dawid_skene(
                    unit_of, reviewer_of, label_of, n_units=n_units,
                    n_reviewers=n_reviewers, n_codes=n_codes, anchors=anchor,
                    weights=weight, start=(fit.priors, fit.confusion),
                    tol=RESAMPLE_TOL, max_iter=RESAMPLE_MAX_ITER,
                )  # fmt: skip
                a, b = accuracies(refit, weight)
                resampled_own[start + row] = a
                resampled_others[start + row] = b

    # Expected turns of each true code per reviewer: sum of the posteriors of its units.
    units_by_code = np.zeros((n_reviewers, n_codes))
    np.add.at(units_by_code, reviewer_of, fit.posteriors[unit_of])
    clusters_of_reviewer = [
        int(np.unique(cluster_of_unit[unit_of[reviewer_of == r]]).size) for r in range(n_reviewers)
    ]
    results: list[ReviewerReliability] = []
    for r, name in enumerate(names):
        interval, reason = _interval(resampled_own[:, r], clusters_of_reviewer[r], n_resamples)
        accuracy = Estimate(
            float(own[r]), int(n_labels_of[r]), interval, reason,
            method=CLUSTER_METHOD if interval else None,
        )  # fmt: skip
        others_clusters = int(np.unique(cluster_of_unit[unit_of[reviewer_of != r]]).size)
        if n_reviewers < 2:
            other = Estimate(None, 0, None, "no other reviewer")
        else:
            o_interval, o_reason = _interval(resampled_others[:, r], others_clusters, n_resamples)
            other = Estimate(
                float(others[r]), int(n_labels_of.sum() - n_labels_of[r]), o_interval,
                o_reason, method=CLUSTER_METHOD if o_interval else None,
            )  # fmt: skip
        matrix = fit.confusion[r]
        mix_ups = _mix_ups(matrix, units_by_code[r], ordered)
        gap, _ = percentile_interval(resampled_others[:, r] - resampled_own[:, r])
        below = (
            identified
            and other.ci95 is not None
            and gap is not None
            and n_labels_of[r] >= MIN_VERDICT_LABELS
            and own[r] < other.ci95[0]
            and gap[0] > 0
        )
        responsible: list[str] = []
        sentence = _mix_up_sentence(name, mix_ups)
        if below:
            responsible = _responsible_codes(fit, r, units_by_code, ordered)
            sentence = (
                f"{name}'s accuracy {own[r]:.2f} [{interval[0]:.2f}, {interval[1]:.2f}] is below "
                f"the others' {others[r]:.2f} [{other.ci95[0]:.2f}, {other.ci95[1]:.2f}]"
                if interval is not None and other.ci95 is not None
                else f"{name}'s accuracy {own[r]:.2f} is below the others' {others[r]:.2f}"
            )
            sentence += (
                ": " + _responsible_sentence(fit, r, units_by_code, ordered, responsible)
                if responsible
                else ", spread over many codes."
            )
        elif n_labels_of[r] < MIN_VERDICT_LABELS:
            sentence += (
                f" Only {int(n_labels_of[r])} labels: too few to compare with the others "
                f"(at least {MIN_VERDICT_LABELS})."
            )
        results.append(
            ReviewerReliability(
                name=name,
                n_labels=int(n_labels_of[r]),
                accuracy=accuracy,
                others=other,
                confusion={
                    true: {given: float(matrix[c, g]) for g, given in enumerate(ordered)}
                    for c, true in enumerate(ordered)
                },
                units_by_code={code: float(units_by_code[r, c]) for c, code in enumerate(ordered)},
                mix_ups=mix_ups,
                below_others=bool(below),
                responsible_codes=responsible,
                sentence=sentence,
            )
        )
    return Reliability(
        codes=tuple(ordered),
        priors={code: float(fit.priors[c]) for c, code in enumerate(ordered)},
        reviewers=results,
        n_units=n_units,
        n_labels=len(units),
        n_anchored=n_anchored,
        n_conversations=n_conversations,
        iterations=fit.iterations,
        converged=fit.converged,
        n_resamples=n_resamples,
        seed=seed,
        warnings=warnings,
    )


def _others_recall(fit: DawidSkeneFit, r: int, units_by_code: np.ndarray) -> np.ndarray:
    """The other reviewers' pooled recall per true code: the diagonal of their
    confusion matrices, weighted by their expected turns of that code."""
    mask = np.arange(units_by_code.shape[0]) != r
    diagonal = np.diagonal(fit.confusion[mask], axis1=1, axis2=2)
    weights = units_by_code[mask]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (diagonal * weights).sum(axis=0) / weights.sum(axis=0)


def _responsible_codes(
    fit: DawidSkeneFit, r: int, units_by_code: np.ndarray, codes: Sequence[str]
) -> list[str]:
    recall = np.diagonal(fit.confusion[r])
    others = _others_recall(fit, r, units_by_code)
    share = units_by_code[r] / units_by_code[r].sum()
    gap = np.nan_to_num(others - recall)
    contribution = share * gap
    positive = float(contribution[contribution > 0].sum())
    if positive <= 0:
        return []
    chosen = [
        c
        for c in range(len(codes))
        if contribution[c] >= 0.1 * positive
        and gap[c] >= MIX_UP_SHARE
        and units_by_code[r, c] >= MIN_CODE_UNITS
    ]
    chosen.sort(key=lambda c: -contribution[c])
    return [codes[c] for c in chosen]


def _responsible_sentence(
    fit: DawidSkeneFit,
    r: int,
    units_by_code: np.ndarray,
    codes: Sequence[str],
    responsible: list[str],
) -> str:
    others = _others_recall(fit, r, units_by_code)
    parts = []
    for code in responsible:
        c = codes.index(code)
        row = fit.confusion[r, c].copy()
        row[c] = -1.0
        instead = int(row.argmax())
        parts.append(
            f"on `{code}` turns they give `{codes[instead]}` {_share(row[instead])} of the "
            f"time and the right code {_share(fit.confusion[r, c, c])} (the others "
            f"{_share(others[c])})"
        )
    return "; ".join(parts) + "."
