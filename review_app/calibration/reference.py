"""Agreement of a judge's codes with a reference (gold or a reviewer), unit by unit.

Cohen (1960) for kappa; Wilson (1927) and Efron & Tibshirani (1993) for intervals.
First breaks are in :mod:`.first_break`, the judge beside the reviewers in :mod:`.like_for_like`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, TypedDict

import numpy as np
from numpy.typing import NDArray

from review_app.stats.checks import check_break_mapping, check_codes, check_int, check_seed
from review_app.stats.codes import BreakMapping
from review_app.stats.confusion import binary_confusion, binary_metrics, confusion_from_codes
from review_app.stats.core import (
    BREAK,
    NO_BREAK,
    Estimate,
    EstimateJson,
    bootstrap_confusions,
    bootstrap_method,
    cluster_codes,
    kappa_from_confusion,
    percentile_interval,
    proportion,
    ratio,
)
from review_app.stats.units import UnitT, sorted_units

DisagreementKind = Literal[
    "missed_break", "false_alarm", "wrong_break_kind", "agree", "not_comparable"
]
DISAGREEMENT_KINDS: tuple[str, ...] = (
    "missed_break",
    "false_alarm",
    "wrong_break_kind",
    "agree",
    "not_comparable",
)

MIN_RELIABLE_UNITS = 20
DOMINANT_CLASS_SHARE = 0.9


def _estimate(
    value: float,
    n: int,
    resampled: NDArray[np.float64] | None,
    *,
    undefined_reason: str,
    no_interval_reason: str | None,
) -> Estimate:
    if not math.isfinite(value):
        return Estimate(None, n, None, undefined_reason)
    if resampled is None:
        return Estimate(float(value), n, None, no_interval_reason)
    interval, reason = percentile_interval(resampled)
    return Estimate(float(value), n, interval, reason)


def classify_disagreement(
    reference_code: str | None,
    judged_code: str | None,
    break_mapping: BreakMapping,
) -> DisagreementKind:
    """How a judge's code relates to the reference code of one unit.

    - ``"agree"``: the same code; or two different codes that are both "no_break"
      (they agree on the break question, which is what the explorer filters on);
    - ``"missed_break"``: the reference says break, the judge says no break;
    - ``"false_alarm"``: the reference says no break, the judge says break;
    - ``"wrong_break_kind"``: both say break, with different codes (e.g. scope vs tone);
    - ``"not_comparable"``: a code is missing (``None``) or maps to ``None``
      (borderline, abstain) and the codes differ.

    Raises ``ValueError("code 'x' is not in break_mapping")`` for an unknown code.
    """
    mapping = check_break_mapping(break_mapping)
    for code in (reference_code, judged_code):
        if code is not None and code not in mapping:
            raise ValueError(f"code {code!r} is not in break_mapping")
    if reference_code is None or judged_code is None:
        return "not_comparable"
    if reference_code == judged_code:
        return "agree"
    reference_class = mapping[reference_code]
    judged_class = mapping[judged_code]
    if reference_class is None or judged_class is None:
        return "not_comparable"
    if reference_class == BREAK and judged_class == NO_BREAK:
        return "missed_break"
    if reference_class == NO_BREAK and judged_class == BREAK:
        return "false_alarm"
    if reference_class == BREAK:
        return "wrong_break_kind"
    return "agree"


class ConfusionJson(TypedDict):
    """:meth:`ConfusionMatrix.to_dict`."""

    labels: list[str]
    rows: str
    columns: str
    counts: list[list[int]]
    by_reference: dict[str, dict[str, int]]


class AgreementJson(TypedDict):
    """:meth:`AgreementReport.to_dict` (docs/reference.md, "Judge report JSON")."""

    n_reference: int
    n_judged: int
    n_shared: int
    n_only_reference: int
    n_only_judged: int
    n_ignored: int
    n_compared: int
    n_break_comparable: int
    n_break_excluded: int
    kappa: EstimateJson
    accuracy: EstimateJson
    break_kappa: EstimateJson
    break_accuracy: EstimateJson
    precision: EstimateJson
    recall: EstimateJson
    f1: EstimateJson
    tpr: EstimateJson
    tnr: EstimateJson
    confusion: ConfusionJson
    break_confusion: dict[str, int]
    reference_break_rate: float | None
    judged_break_rate: float | None
    disagreement_counts: dict[str, int]
    warnings: list[str]
    n_resamples: int
    seed: int


@dataclass(frozen=True)
class ConfusionMatrix:
    """Counts of units per (reference code, judged code); rows reference, columns judge.

    ``labels`` are sorted and give the order of both rows and columns, exactly as
    ``sklearn.metrics.confusion_matrix(reference, judged, labels=labels)``.
    """

    labels: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]

    def as_nested_dict(self) -> dict[str, dict[str, int]]:
        """``{reference_code: {judged_code: count}}`` over all label pairs."""
        return {
            row_label: dict(zip(self.labels, row, strict=True))
            for row_label, row in zip(self.labels, self.counts, strict=True)
        }

    def to_dict(self) -> ConfusionJson:
        return {
            "labels": list(self.labels),
            "rows": "reference",
            "columns": "judge",
            "counts": [list(row) for row in self.counts],
            "by_reference": self.as_nested_dict(),
        }


@dataclass(frozen=True)
class AgreementReport:
    """Agreement of a judge with a reference (gold or a human) on shared units.

    Unit counts:

    - ``n_reference`` / ``n_judged``: units each side labelled;
    - ``n_shared``: units both labelled; ``n_only_reference`` / ``n_only_judged`` the rest;
    - ``n_ignored``: shared units left out because a side gave a code in ``ignore_codes``;
    - ``n_compared`` = ``n_shared - n_ignored``: the units of the code-level metrics;
    - ``n_break_comparable``: compared units where both codes map to break / no break
      (the units of the break-class metrics); ``n_break_excluded`` the compared units
      that are not (borderline or abstain on a side).

    Code-level metrics: ``kappa`` (Cohen's kappa on the codes), ``accuracy`` (share of
    identical codes). Break-class metrics, break as the positive class:
    ``break_kappa``, ``break_accuracy``, ``precision`` = TP/(TP+FP),
    ``recall`` = ``tpr`` = TP/(TP+FN), ``f1`` = 2TP/(2TP+FP+FN), ``tnr`` = TN/(TN+FP).
    """

    n_reference: int
    n_judged: int
    n_shared: int
    n_only_reference: int
    n_only_judged: int
    n_ignored: int
    n_compared: int
    n_break_comparable: int
    n_break_excluded: int
    kappa: Estimate
    accuracy: Estimate
    break_kappa: Estimate
    break_accuracy: Estimate
    precision: Estimate
    recall: Estimate
    f1: Estimate
    tpr: Estimate
    tnr: Estimate
    confusion: ConfusionMatrix
    break_confusion: Mapping[str, int]
    reference_break_rate: float | None
    judged_break_rate: float | None
    disagreement_counts: Mapping[str, int]
    warnings: tuple[str, ...]
    n_resamples: int
    seed: int

    def estimates(self) -> dict[str, Estimate]:
        return {
            "kappa": self.kappa,
            "accuracy": self.accuracy,
            "break_kappa": self.break_kappa,
            "break_accuracy": self.break_accuracy,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tpr": self.tpr,
            "tnr": self.tnr,
        }

    def to_dict(self) -> AgreementJson:
        return {
            "n_reference": self.n_reference,
            "n_judged": self.n_judged,
            "n_shared": self.n_shared,
            "n_only_reference": self.n_only_reference,
            "n_only_judged": self.n_only_judged,
            "n_ignored": self.n_ignored,
            "n_compared": self.n_compared,
            "n_break_comparable": self.n_break_comparable,
            "n_break_excluded": self.n_break_excluded,
            "kappa": self.kappa.to_dict(),
            "accuracy": self.accuracy.to_dict(),
            "break_kappa": self.break_kappa.to_dict(),
            "break_accuracy": self.break_accuracy.to_dict(),
            "precision": self.precision.to_dict(),
            "recall": self.recall.to_dict(),
            "f1": self.f1.to_dict(),
            "tpr": self.tpr.to_dict(),
            "tnr": self.tnr.to_dict(),
            "confusion": self.confusion.to_dict(),
            "break_confusion": dict(self.break_confusion),
            "reference_break_rate": self.reference_break_rate,
            "judged_break_rate": self.judged_break_rate,
            "disagreement_counts": dict(self.disagreement_counts),
            "warnings": list(self.warnings),
            "n_resamples": self.n_resamples,
            "seed": self.seed,
        }


def compare_to_reference(
    *,
    reference: Mapping[UnitT, str],
    judged: Mapping[UnitT, str],
    break_mapping: BreakMapping,
    ignore_codes: Collection[str] = (),
    n_resamples: int = 1000,
    seed: int = 0,
    cluster_of: Callable[[UnitT], Hashable] | None = None,
) -> AgreementReport:
    """Agreement of a judge's codes with reference codes on the units both labelled.

    Cohen's kappa on the codes (Cohen 1960), with observed agreement
    p_o = (1/n) sum_k C_kk and chance agreement p_e = (1/n^2) sum_k r_k c_k over the
    confusion matrix C (rows reference, columns judge, margins r and c):
    kappa = (p_o - p_e) / (1 - p_e); it equals ``sklearn.metrics.cohen_kappa_score``.
    Break-class metrics treat break as the positive class on the units where both codes
    map to break / no break (precision, recall and F1 equal scikit-learn's with
    ``pos_label=1`` wherever they are defined; van Rijsbergen 1979 for F1).

    Every estimate has a 95% percentile bootstrap interval (Efron & Tibshirani 1993):
    the compared units are resampled with replacement ``n_resamples`` times with
    ``numpy.random.default_rng(seed)``; a statistic's interval uses the resamples where
    it is defined and is omitted (with a reason) when it is undefined in more than half
    of them, when fewer than 2 units are compared, or when ``n_resamples`` is 0.

    ``ignore_codes`` (e.g. ``{"cannot_judge"}``) drops a shared unit from every metric
    when either side gave one of those codes; such units are counted in ``n_ignored``.

    Warnings are added when fewer than 20 units are comparable on the break task and
    when one class makes up at least 90% of the reference on the break task.

    Raises ``ValueError`` with these messages:

    - ``"break_mapping[<code>] must be 'break', 'no_break' or None, got <value>"``
    - ``"<reference|judged> code <code> for unit <unit> is not in break_mapping"``
    - ``"<reference|judged> code for unit <unit> must be a string, got <value>"``
    - ``"n_resamples must be an integer >= 0, got <value>"``
    - ``"seed must be a non-negative integer, got <value>"``
    """
    mapping = check_break_mapping(break_mapping)
    check_codes(reference, "reference", mapping)
    check_codes(judged, "judged", mapping)
    n_resamples = check_int(n_resamples, "n_resamples", 0)
    seed = check_seed(seed)
    ignored = frozenset(ignore_codes)

    shared = sorted_units(set(reference) & set(judged))
    compared = [u for u in shared if reference[u] not in ignored and judged[u] not in ignored]
    reference_codes = [reference[u] for u in compared]
    judged_codes = [judged[u] for u in compared]
    labels = tuple(sorted(set(reference_codes) | set(judged_codes)))
    position = {code: i for i, code in enumerate(labels)}
    n_labels = len(labels)
    reference_index = np.array([position[c] for c in reference_codes], dtype=np.int64)
    judged_index = np.array([position[c] for c in judged_codes], dtype=np.int64)
    is_break = np.array([mapping[c] == BREAK for c in labels], dtype=np.int64)
    is_no_break = np.array([mapping[c] == NO_BREAK for c in labels], dtype=np.int64)

    n = len(compared)
    confusion = confusion_from_codes(reference_index, judged_index, n_categories=n_labels)
    binary = binary_confusion(confusion, is_no_break, is_break)
    (tn, fp), (fn, tp) = binary.tolist()
    n_binary = tn + fp + fn + tp

    point = {"kappa": kappa_from_confusion(confusion), "accuracy": ratio(np.trace(confusion), n)}
    point.update(binary_metrics(binary))

    resampled: dict[str, NDArray[np.float64]] | None = None
    no_interval_reason: str | None = None
    clusters = (
        None if cluster_of is None else cluster_codes([cluster_of(unit) for unit in compared])
    )
    method = bootstrap_method(clusters)
    if n_resamples == 0:
        no_interval_reason = "no confidence interval: n_resamples is 0"
    elif n < 2:
        no_interval_reason = "no confidence interval from fewer than 2 units"
    else:
        boot = bootstrap_confusions(
            reference_index,
            judged_index,
            n_labels,
            n_resamples=n_resamples,
            seed=seed,
            clusters=clusters,
        )
        resampled = {
            "kappa": kappa_from_confusion(boot),
            "accuracy": ratio(np.trace(boot, axis1=1, axis2=2), n),
        }
        resampled.update(binary_metrics(binary_confusion(boot, is_no_break, is_break)))

    no_units = (
        "no unit has codes from both the reference and the judge"
        if not ignored
        else "no unit has codes from both the reference and the judge outside ignore_codes"
    )
    no_binary = (
        no_units
        if n == 0
        else "no unit is comparable on the break task (borderline or abstain on a side)"
    )
    undefined = {
        "kappa": no_units
        if n == 0
        else "Cohen's kappa is undefined: both sides gave one and the same code to every "
        "unit, so chance agreement is 1",
        "accuracy": no_units,
        "break_kappa": no_binary
        if n_binary == 0
        else "kappa on the break task is undefined: both sides put every unit in the same class",
        "break_accuracy": no_binary,
        "precision": no_binary
        if n_binary == 0
        else "precision is undefined: the judge found no break",
        "recall": no_binary if n_binary == 0 else "recall is undefined: the reference has no break",
        "f1": no_binary if n_binary == 0 else "F1 is undefined: neither side found a break",
        "tpr": no_binary if n_binary == 0 else "TPR is undefined: the reference has no break",
        "tnr": no_binary
        if n_binary == 0
        else "TNR is undefined: the reference has no unit without a break",
    }
    estimates: dict[str, Estimate] = {}
    for name in ("kappa", "break_kappa", "f1"):
        support = n if name == "kappa" else n_binary
        few = support < 2 and resampled is not None
        estimate = _estimate(
            float(point[name].reshape(-1)[0]),
            support,
            None if resampled is None or few else resampled[name],
            undefined_reason=undefined[name],
            no_interval_reason="no confidence interval from fewer than 2 units"
            if few
            else no_interval_reason,
        )
        estimates[name] = replace(estimate, method=method) if estimate.ci95 else estimate
    # Proportions get Wilson intervals (none below 10 units in the denominator).
    correct = int(np.trace(confusion))
    for name, successes, total in (
        ("accuracy", correct, n),
        ("break_accuracy", tp + tn, n_binary),
        ("precision", tp, tp + fp),
        ("recall", tp, tp + fn),
        ("tpr", tp, tp + fn),
        ("tnr", tn, tn + fp),
    ):
        estimates[name] = proportion(successes, total, undefined_reason=undefined[name])

    warnings: list[str] = []
    if n_binary < MIN_RELIABLE_UNITS:
        warnings.append(
            f"only {n_binary} units are comparable on the break task; estimates from fewer "
            f"than {MIN_RELIABLE_UNITS} units are unreliable"
        )
    reference_breaks = fn + tp
    if n_binary:
        majority = max(reference_breaks, n_binary - reference_breaks)
        if majority / n_binary >= DOMINANT_CLASS_SHARE:
            majority_class = (
                "break" if reference_breaks >= n_binary - reference_breaks else "no break"
            )
            warnings.append(
                f"{majority / n_binary:.0%} of the reference units on the break task are "
                f"'{majority_class}': accuracy is uninformative and kappa is unstable when "
                "one class dominates"
            )

    disagreement_counts = dict.fromkeys(DISAGREEMENT_KINDS, 0)
    for reference_code, judged_code in zip(reference_codes, judged_codes, strict=True):
        disagreement_counts[classify_disagreement(reference_code, judged_code, mapping)] += 1

    return AgreementReport(
        n_reference=len(reference),
        n_judged=len(judged),
        n_shared=len(shared),
        n_only_reference=len(reference) - len(shared),
        n_only_judged=len(judged) - len(shared),
        n_ignored=len(shared) - n,
        n_compared=n,
        n_break_comparable=n_binary,
        n_break_excluded=n - n_binary,
        confusion=ConfusionMatrix(labels, tuple(tuple(int(c) for c in row) for row in confusion)),
        break_confusion={"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        reference_break_rate=reference_breaks / n_binary if n_binary else None,
        judged_break_rate=(tp + fp) / n_binary if n_binary else None,
        disagreement_counts=disagreement_counts,
        warnings=tuple(warnings),
        n_resamples=n_resamples,
        seed=seed,
        **estimates,
    )
