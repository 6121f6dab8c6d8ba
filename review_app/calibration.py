"""Calibration of an automated LLM judge against human labels.

Policy owners change a judge prompt and need to know two things: can the judge be
trusted, and where does it fail. This module answers with plain numbers computed from
plain Python / numpy inputs. It reads no files, touches no database and never imports
Streamlit; scikit-learn is used only to *fit* a calibration map.

Vocabulary
----------
unit
    What a verdict is about, normally ``(case_id, turn)``; any hashable value works
    (``turn`` may be ``None`` for a conversation-level verdict).
code
    A rubric label code such as ``"scope_break"``.
break mapping
    ``Mapping[code, "break" | "no_break" | None]`` supplied by the caller (see
    :func:`break_mapping_from_verdicts`): a code whose verdict is *fail* is a break, a
    *pass* code is no break, and borderline / abstain codes map to ``None``: they are
    not comparable on the binary task, so such units are left out of the break-class
    metrics and counted.
score
    The judge's probability in ``[0, 1]`` that a turn BREAKS the role.

Undefined results (no shared units, a single class, nothing predicted) are ``None``
with a reason string, never NaN. Every result is a frozen dataclass whose
``to_dict()`` is JSON-safe (``json.dumps(..., allow_nan=False)`` succeeds); units
appear there as lists, e.g. ``["support-refund-pressure", 4]``.

Invalid *arguments* raise ``ValueError`` with the exact messages given in each
function's docstring.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from scipy.special import expit

__all__ = [
    "BREAK",
    "DEFAULT_THRESHOLDS",
    "DISAGREEMENT_KINDS",
    "NO_BREAK",
    "AgreementReport",
    "CalibrationMap",
    "ConfusionMatrix",
    "Estimate",
    "FirstBreakMismatch",
    "FirstBreakReport",
    "ReliabilityBin",
    "ReliabilityReport",
    "ThresholdPoint",
    "ThresholdSweep",
    "VersionComparison",
    "VersionDifference",
    "VersionSummary",
    "break_mapping_from_verdicts",
    "classify_disagreement",
    "compare_prompt_versions",
    "compare_to_reference",
    "few_shot_examples",
    "first_break_comparison",
    "fit_calibration_map",
    "human_ceiling",
    "reliability",
    "threshold_sweep",
]

BREAK = "break"
NO_BREAK = "no_break"

Unit = Hashable
# Mapping keys are invariant: a TypeVar lets callers pass dict[tuple[str, int], str].
UnitT = TypeVar("UnitT", bound=Hashable)
BreakMapping = Mapping[str, str | None]
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
CALIBRATION_MAP_FORMAT = "role-review/calibration-map"
CALIBRATION_MAP_FORMAT_VERSION = 1

_Z_95 = 1.959963984540054  # standard normal quantile 0.975
_TIE_TOLERANCE = 1e-12
_BOOTSTRAP_CHUNK_CELLS = 2_000_000  # bounds the memory of one block of resampled indices


# --------------------------------------------------------------------------- helpers


def _sort_key(value: object) -> tuple[Any, ...]:
    """A total order over mixed unit keys (None < numbers < strings < tuples < rest)."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, tuple):
        return (3, tuple(_sort_key(item) for item in value))
    return (4, repr(value))


def _sorted_units(units: Iterable[UnitT]) -> list[UnitT]:
    return sorted(units, key=_sort_key)


def _json_value(value: object) -> Any:
    """A unit or conversation key as JSON: tuples become lists, exotic objects strings."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, tuple | list):
        return [_json_value(item) for item in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return _json_value(float(value))
    return str(value)


def _finite_or_none(value: float | np.floating[Any] | None) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _ratio(numerator: ArrayLike, denominator: ArrayLike) -> NDArray[np.float64]:
    """Element-wise numerator / denominator, NaN where the denominator is 0."""
    top = np.asarray(numerator, dtype=np.float64)
    bottom = np.asarray(denominator, dtype=np.float64)
    out = np.full(np.broadcast(top, bottom).shape, np.nan)
    np.divide(top, bottom, out=out, where=bottom > 0)
    return out


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _binary_array(values: Sequence[int] | ArrayLike, name: str) -> NDArray[np.int64]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "biuf" or not np.all(np.isin(array, (0, 1))):
        for value in array.tolist():
            if not (isinstance(value, bool | int | float) and value in (0, 1)):
                raise ValueError(
                    f"{name} must contain only 0 (no break) and 1 (break), got {value!r}"
                )
    return array.astype(np.int64)


def _probability_array(values: Sequence[float] | ArrayLike, name: str) -> NDArray[np.float64]:
    raw = np.asarray(values)
    if raw.size and raw.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be finite numbers in [0, 1]")
    array = raw.astype(np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and (not np.all(np.isfinite(array)) or array.min() < 0 or array.max() > 1):
        raise ValueError(f"{name} must be finite numbers in [0, 1]")
    return array


def _paired(
    y_true: Sequence[int] | ArrayLike,
    scores: Sequence[float] | ArrayLike,
    scores_name: str,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    y = _binary_array(y_true, "y_true")
    s = _probability_array(scores, scores_name)
    if y.size != s.size:
        raise ValueError(
            f"y_true and {scores_name} must have the same length, got {y.size} and {s.size}"
        )
    return y, s


# --------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class Estimate:
    """One statistic with its support and uncertainty.

    ``value`` is ``None`` when the statistic is undefined for the data; ``reason`` then
    says why. ``n`` is the number of units (or conversations) the statistic is computed
    on. ``ci95`` is a 95% interval, or ``None`` when it cannot be given; ``reason`` also
    explains a missing interval when ``value`` is defined.
    """

    value: float | None
    n: int
    ci95: tuple[float, float] | None
    reason: str | None

    def __post_init__(self) -> None:
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError("Estimate.value must be a finite number or None")

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": None if self.value is None else float(self.value),
            "n": int(self.n),
            "ci95": None if self.ci95 is None else [float(self.ci95[0]), float(self.ci95[1])],
            "reason": self.reason,
        }


def _percentile_interval(
    resampled: NDArray[np.float64],
) -> tuple[tuple[float, float] | None, str | None]:
    """Efron's percentile interval over the resamples where the statistic is defined."""
    defined = resampled[np.isfinite(resampled)]
    if defined.size == 0 or 2 * defined.size < resampled.size:
        return None, (
            "no confidence interval: the statistic is undefined in more than half of the "
            "bootstrap resamples"
        )
    low, high = np.percentile(defined, [2.5, 97.5])
    return (float(low), float(high)), None


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
    interval, reason = _percentile_interval(resampled)
    return Estimate(float(value), n, interval, reason)


def _bootstrap_confusions(
    reference_index: NDArray[np.int64],
    judged_index: NDArray[np.int64],
    n_labels: int,
    *,
    n_resamples: int,
    seed: int,
) -> NDArray[np.int64]:
    """Confusion matrices of ``n_resamples`` bootstrap resamples of the units.

    Each resample draws ``n`` units with replacement (Efron & Tibshirani 1993, ch. 6);
    the result has shape ``(n_resamples, n_labels, n_labels)``.
    """
    n = reference_index.size
    rng = np.random.default_rng(seed)
    cells = reference_index * n_labels + judged_index
    cells_per_matrix = n_labels * n_labels
    result = np.empty((n_resamples, n_labels, n_labels), dtype=np.int64)
    block = max(1, _BOOTSTRAP_CHUNK_CELLS // max(n, 1))
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        size = stop - start
        draws = rng.integers(0, n, size=(size, n))
        offset_cells = cells[draws] + np.arange(size)[:, None] * cells_per_matrix
        counts = np.bincount(offset_cells.ravel(), minlength=size * cells_per_matrix)
        result[start:stop] = counts.reshape(size, n_labels, n_labels)
    return result


def _kappa_from_confusion(confusion: NDArray[np.int64]) -> NDArray[np.float64]:
    """Cohen's kappa of each confusion matrix in a stack of shape ``(..., K, K)``.

    kappa = (p_o - p_e) / (1 - p_e), with p_o = sum_k C_kk / n and
    p_e = sum_k (row_k * col_k) / n^2 (Cohen 1960). Multiplying by n^2 gives the exact
    integer form (n * trace - chance) / (n^2 - chance); kappa is undefined (NaN here)
    when chance == n^2, i.e. both raters used one and the same category for every unit.
    """
    n = confusion.sum(axis=(-2, -1))
    trace = np.trace(confusion, axis1=-2, axis2=-1)
    chance = (confusion.sum(axis=-1) * confusion.sum(axis=-2)).sum(axis=-1)
    return _ratio(n * trace - chance, n * n - chance)


def _binary_confusion(
    confusion: NDArray[np.int64], is_no_break: NDArray[np.int64], is_break: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Collapse code confusion matrices to ``[[tn, fp], [fn, tp]]`` (rows reference)."""
    collapse = np.stack([is_no_break, is_break], axis=1)  # (K, 2)
    return np.einsum("ki,...kl,lj->...ij", collapse, confusion, collapse)


def _binary_metrics(binary: NDArray[np.int64]) -> dict[str, NDArray[np.float64]]:
    """Break-class metrics of a stack of 2x2 matrices ``[[tn, fp], [fn, tp]]``."""
    tn, fp = binary[..., 0, 0], binary[..., 0, 1]
    fn, tp = binary[..., 1, 0], binary[..., 1, 1]
    recall = _ratio(tp, tp + fn)
    return {
        "break_kappa": _kappa_from_confusion(binary),
        "break_accuracy": _ratio(tp + tn, tp + tn + fp + fn),
        "precision": _ratio(tp, tp + fp),
        "recall": recall,
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "tpr": recall,
        "tnr": _ratio(tn, tn + fp),
    }


# --------------------------------------------------------------------------- break mapping


def break_mapping_from_verdicts(verdict_by_code: Mapping[str, str]) -> dict[str, str | None]:
    """The break mapping of a rubric: fail -> "break", pass -> "no_break", others -> None.

    ``verdict_by_code`` maps each rubric code to its verdict (pass, fail, borderline or
    abstain). Raises ``ValueError("verdict of code 'x' must be pass, fail, borderline or
    abstain, got 'y'")`` for any other verdict.
    """
    mapping: dict[str, str | None] = {}
    for code, verdict in verdict_by_code.items():
        if verdict == "fail":
            mapping[code] = BREAK
        elif verdict == "pass":
            mapping[code] = NO_BREAK
        elif verdict in ("borderline", "abstain"):
            mapping[code] = None
        else:
            raise ValueError(
                f"verdict of code {code!r} must be pass, fail, borderline or abstain, "
                f"got {verdict!r}"
            )
    return mapping


def _check_break_mapping(break_mapping: BreakMapping) -> dict[str, str | None]:
    if not isinstance(break_mapping, Mapping):
        raise ValueError(
            f"break_mapping must be a mapping of code to 'break', 'no_break' or None, "
            f"got {type(break_mapping).__name__}"
        )
    for code, value in break_mapping.items():
        if value not in (BREAK, NO_BREAK, None):
            raise ValueError(
                f"break_mapping[{code!r}] must be 'break', 'no_break' or None, got {value!r}"
            )
    return dict(break_mapping)


def _check_codes(codes: Mapping[Any, str], name: str, mapping: Mapping[str, str | None]) -> None:
    if not isinstance(codes, Mapping):
        raise ValueError(f"{name} must be a mapping of unit to code, got {type(codes).__name__}")
    for unit in _sorted_units(codes):
        code = codes[unit]
        if not isinstance(code, str):
            raise ValueError(f"{name} code for unit {unit!r} must be a string, got {code!r}")
        if code not in mapping:
            raise ValueError(f"{name} code {code!r} for unit {unit!r} is not in break_mapping")


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
    mapping = _check_break_mapping(break_mapping)
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


# --------------------------------------------------------------------------- agreement


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

    def to_dict(self) -> dict[str, Any]:
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

    def to_dict(self) -> dict[str, Any]:
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
            **{name: estimate.to_dict() for name, estimate in self.estimates().items()},
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
    mapping = _check_break_mapping(break_mapping)
    _check_codes(reference, "reference", mapping)
    _check_codes(judged, "judged", mapping)
    n_resamples = _check_int(n_resamples, "n_resamples", 0)
    seed = _check_seed(seed)
    ignored = frozenset(ignore_codes)

    shared = _sorted_units(set(reference) & set(judged))
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
    confusion = np.bincount(
        reference_index * n_labels + judged_index, minlength=n_labels * n_labels
    ).reshape(n_labels, n_labels)
    binary = _binary_confusion(confusion, is_no_break, is_break)
    (tn, fp), (fn, tp) = binary.tolist()
    n_binary = tn + fp + fn + tp

    point = {"kappa": _kappa_from_confusion(confusion), "accuracy": _ratio(np.trace(confusion), n)}
    point.update(_binary_metrics(binary))

    resampled: dict[str, NDArray[np.float64]] | None = None
    no_interval_reason: str | None = None
    if n_resamples == 0:
        no_interval_reason = "no confidence interval: n_resamples is 0"
    elif n < 2:
        no_interval_reason = "no confidence interval from fewer than 2 units"
    else:
        boot = _bootstrap_confusions(
            reference_index, judged_index, n_labels, n_resamples=n_resamples, seed=seed
        )
        resampled = {
            "kappa": _kappa_from_confusion(boot),
            "accuracy": _ratio(np.trace(boot, axis1=1, axis2=2), n),
        }
        resampled.update(_binary_metrics(_binary_confusion(boot, is_no_break, is_break)))

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
    for name, values in point.items():
        support = n if name in ("kappa", "accuracy") else n_binary
        few = support < 2 and resampled is not None
        estimates[name] = _estimate(
            float(values.reshape(-1)[0]),
            support,
            None if resampled is None or few else resampled[name],
            undefined_reason=undefined[name],
            no_interval_reason="no confidence interval from fewer than 2 units"
            if few
            else no_interval_reason,
        )

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


# --------------------------------------------------------------------------- first break


@dataclass(frozen=True)
class FirstBreakMismatch:
    conversation: Hashable
    reference_turn: int | None
    judged_turn: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation": _json_value(self.conversation),
            "reference_turn": self.reference_turn,
            "judged_turn": self.judged_turn,
        }


@dataclass(frozen=True)
class FirstBreakReport:
    """How well the judge locates the first break of each conversation.

    Offsets are differences of ``turn`` values (judged minus reference), so a negative
    offset means the judge flagged an earlier turn. Counts over the shared
    conversations: ``n_exact`` (same turn, or both no break), ``n_both_break``,
    ``n_both_no_break``, ``n_missed`` (reference break, judge none), ``n_false_alarm``
    (judge break, reference none), ``n_judged_earlier`` / ``n_judged_later``.
    """

    n_conversations: int
    n_only_reference: int
    n_only_judged: int
    exact_match: Estimate
    mean_offset: Estimate
    mean_absolute_offset: Estimate
    n_exact: int
    n_both_break: int
    n_both_no_break: int
    n_missed: int
    n_false_alarm: int
    n_judged_earlier: int
    n_judged_later: int
    mismatches: tuple[FirstBreakMismatch, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_conversations": self.n_conversations,
            "n_only_reference": self.n_only_reference,
            "n_only_judged": self.n_only_judged,
            "exact_match": self.exact_match.to_dict(),
            "mean_offset": self.mean_offset.to_dict(),
            "mean_absolute_offset": self.mean_absolute_offset.to_dict(),
            "n_exact": self.n_exact,
            "n_both_break": self.n_both_break,
            "n_both_no_break": self.n_both_no_break,
            "n_missed": self.n_missed,
            "n_false_alarm": self.n_false_alarm,
            "n_judged_earlier": self.n_judged_earlier,
            "n_judged_later": self.n_judged_later,
            "mismatches": [m.to_dict() for m in self.mismatches],
        }


def _wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """Wilson (1927) score interval for a binomial proportion at 95%.

    centre = (p + z^2/2n) / (1 + z^2/n),
    half-width = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2).
    """
    p = successes / n
    z2 = _Z_95 * _Z_95
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = _Z_95 / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean_estimate(values: Sequence[int], what: str) -> Estimate:
    """Mean with a Student-t 95% interval: mean +- t_{0.975, n-1} * s / sqrt(n)."""
    n = len(values)
    if n == 0:
        return Estimate(None, 0, None, f"no conversation where both found a break: no {what}")
    array = np.asarray(values, dtype=np.float64)
    mean = float(array.mean())
    if n == 1:
        return Estimate(mean, 1, None, "no confidence interval from a single conversation")
    half = float(stats.t.ppf(0.975, n - 1) * array.std(ddof=1) / math.sqrt(n))
    return Estimate(mean, n, (mean - half, mean + half), None)


def _check_first_breaks(first_breaks: Mapping[Any, int | None], name: str) -> None:
    if not isinstance(first_breaks, Mapping):
        raise ValueError(
            f"{name} must be a mapping of conversation to first break turn, "
            f"got {type(first_breaks).__name__}"
        )
    for conversation, turn in first_breaks.items():
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int | np.integer)):
            raise ValueError(
                f"{name}[{conversation!r}] must be an integer turn or None, got {turn!r}"
            )


def first_break_comparison(
    *,
    reference: Mapping[UnitT, int | None],
    judged: Mapping[UnitT, int | None],
) -> FirstBreakReport:
    """Compare the first break turn per conversation (``None`` = no break).

    On the conversations present in both mappings: exact-match rate (``None == None``
    counts as a match) with a Wilson (1927) 95% interval; mean signed offset
    judged - reference and mean absolute offset over the conversations where both found
    a break, with Student-t 95% intervals.

    Raises ``ValueError("<reference|judged>[<conversation>] must be an integer turn or
    None, got <value>")`` for any other turn value.
    """
    _check_first_breaks(reference, "reference")
    _check_first_breaks(judged, "judged")
    shared = _sorted_units(set(reference) & set(judged))
    offsets: list[int] = []
    n_exact = n_both_no_break = n_missed = n_false_alarm = 0
    mismatches: list[FirstBreakMismatch] = []
    for conversation in shared:
        reference_turn, judged_turn = reference[conversation], judged[conversation]
        if reference_turn == judged_turn:
            n_exact += 1
        else:
            mismatches.append(FirstBreakMismatch(conversation, reference_turn, judged_turn))
        if reference_turn is None and judged_turn is None:
            n_both_no_break += 1
        elif judged_turn is None:
            n_missed += 1
        elif reference_turn is None:
            n_false_alarm += 1
        else:
            offsets.append(int(judged_turn) - int(reference_turn))
    n = len(shared)
    if n:
        exact_match = Estimate(n_exact / n, n, _wilson_interval(n_exact, n), None)
    else:
        exact_match = Estimate(None, 0, None, "no conversation has a first break from both sides")
    return FirstBreakReport(
        n_conversations=n,
        n_only_reference=len(reference) - n,
        n_only_judged=len(judged) - n,
        exact_match=exact_match,
        mean_offset=_mean_estimate(offsets, "offset"),
        mean_absolute_offset=_mean_estimate([abs(o) for o in offsets], "offset"),
        n_exact=n_exact,
        n_both_break=len(offsets),
        n_both_no_break=n_both_no_break,
        n_missed=n_missed,
        n_false_alarm=n_false_alarm,
        n_judged_earlier=sum(o < 0 for o in offsets),
        n_judged_later=sum(o > 0 for o in offsets),
        mismatches=tuple(mismatches),
    )


# --------------------------------------------------------------------------- thresholds


DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))


@dataclass(frozen=True)
class ThresholdPoint:
    """Metrics when a unit is predicted to break exactly when ``score >= threshold``.

    ``reasons`` names each metric that is ``None`` and why.
    """

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    kappa: float | None
    f1: float | None
    precision: float | None
    recall: float | None
    accuracy: float | None
    is_best: bool
    reasons: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "kappa": self.kappa,
            "f1": self.f1,
            "precision": self.precision,
            "recall": self.recall,
            "accuracy": self.accuracy,
            "is_best": self.is_best,
            "reasons": dict(self.reasons),
        }


@dataclass(frozen=True)
class ThresholdSweep:
    """Metrics per threshold (ascending) and the threshold with the highest kappa.

    ``best_threshold`` is ``None`` when kappa is undefined at every threshold;
    ``best_reason`` then says why.
    """

    points: tuple[ThresholdPoint, ...]
    best_threshold: float | None
    best_reason: str | None
    n: int
    n_break: int

    @property
    def best(self) -> ThresholdPoint | None:
        return next((p for p in self.points if p.is_best), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [p.to_dict() for p in self.points],
            "best_threshold": self.best_threshold,
            "best_reason": self.best_reason,
            "n": self.n,
            "n_break": self.n_break,
        }


def threshold_sweep(
    *,
    y_true: Sequence[int] | ArrayLike,
    scores: Sequence[float] | ArrayLike,
    thresholds: Sequence[float] | ArrayLike | None = None,
) -> ThresholdSweep:
    """Kappa, F1, precision, recall and accuracy of ``score >= t`` for each threshold t.

    ``y_true`` holds the reference classes (1 = break, 0 = no break) and ``scores`` the
    judge's break probabilities. Thresholds default to 0.00, 0.05, ..., 1.00; pass
    ``numpy.unique(scores)`` for an exhaustive search. They are sorted and de-duplicated.
    Kappa is Cohen's (1960) on the 2x2 table; precision TP/(TP+FP), recall TP/(TP+FN),
    F1 2TP/(2TP+FP+FN), accuracy (TP+TN)/n. Recall is non-increasing in the threshold.

    ``best`` maximises kappa. Ties (within 1e-12) go to the threshold closest to 0.5,
    the decision threshold a calibrated probability implies under equal costs, so the
    choice departs as little as possible from reading the score as a probability; a
    remaining tie (e.g. 0.4 and 0.6) goes to the lower threshold, which finds more
    breaks.

    Raises ``ValueError`` with these messages:

    - ``"y_true must contain only 0 (no break) and 1 (break), got <value>"``
    - ``"scores must be finite numbers in [0, 1]"``
    - ``"y_true and scores must have the same length, got <a> and <b>"``
    - ``"thresholds must be finite numbers in [0, 1]"``
    - ``"thresholds must not be empty"``
    """
    y, s = _paired(y_true, scores, "scores")
    grid = np.asarray(DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    if grid.size == 0:
        raise ValueError("thresholds must not be empty")
    grid = np.unique(_probability_array(grid, "thresholds"))

    n = int(y.size)
    n_break = int(y.sum())
    sorted_all = np.sort(s)
    sorted_break = np.sort(s[y == 1])
    predicted = n - np.searchsorted(sorted_all, grid, side="left")
    tp = n_break - np.searchsorted(sorted_break, grid, side="left")
    fp = predicted - tp
    fn = n_break - tp
    tn = (n - n_break) - fp
    binary = np.stack([np.stack([tn, fp], -1), np.stack([fn, tp], -1)], -2)
    kappa = _kappa_from_confusion(binary)
    metrics = _binary_metrics(binary)

    best_index: int | None = None
    best_reason: str | None
    if np.all(np.isnan(kappa)):
        best_reason = (
            "no units"
            if n == 0
            else "kappa is undefined at every threshold: the reference has a single class "
            "and every threshold predicts that class for all units"
        )
    else:
        top = np.nanmax(kappa)
        tied = np.flatnonzero(np.abs(kappa - top) <= _TIE_TOLERANCE)
        best_index = int(min(tied, key=lambda i: (round(abs(float(grid[i]) - 0.5), 12), grid[i])))
        best_reason = (
            "highest kappa"
            if tied.size == 1
            else f"highest kappa, tied at {tied.size} thresholds; the one closest to 0.5 chosen"
        )

    points = []
    for i, threshold in enumerate(grid.tolist()):
        reasons: dict[str, str] = {}
        if n == 0:
            reasons = dict.fromkeys(("kappa", "f1", "precision", "recall", "accuracy"), "no units")
        else:
            if math.isnan(kappa[i]):
                reasons["kappa"] = "kappa is undefined: reference and prediction are one same class"
            if math.isnan(metrics["precision"][i]):
                reasons["precision"] = "precision is undefined: no score reaches the threshold"
            if math.isnan(metrics["recall"][i]):
                reasons["recall"] = "recall is undefined: the reference has no break"
            if math.isnan(metrics["f1"][i]):
                reasons["f1"] = "F1 is undefined: no break in the reference or the prediction"
        points.append(
            ThresholdPoint(
                threshold=float(threshold),
                tp=int(tp[i]),
                fp=int(fp[i]),
                fn=int(fn[i]),
                tn=int(tn[i]),
                kappa=_finite_or_none(kappa[i]),
                f1=_finite_or_none(metrics["f1"][i]),
                precision=_finite_or_none(metrics["precision"][i]),
                recall=_finite_or_none(metrics["recall"][i]),
                accuracy=_finite_or_none(metrics["break_accuracy"][i]),
                is_best=i == best_index,
                reasons=reasons,
            )
        )
    return ThresholdSweep(
        points=tuple(points),
        best_threshold=None if best_index is None else float(grid[best_index]),
        best_reason=best_reason,
        n=n,
        n_break=n_break,
    )


# --------------------------------------------------------------------------- reliability


@dataclass(frozen=True)
class ReliabilityBin:
    lower: float
    upper: float
    count: int
    mean_predicted: float
    observed_frequency: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "lower": self.lower,
            "upper": self.upper,
            "count": self.count,
            "mean_predicted": self.mean_predicted,
            "observed_frequency": self.observed_frequency,
        }


@dataclass(frozen=True)
class ReliabilityReport:
    """Reliability diagram data and calibration scores of break probabilities.

    ``bins`` lists the non-empty equal-width bins. ``brier_score``,
    ``expected_calibration_error`` and ``max_calibration_error`` are ``None`` (with
    ``reason``) only when there are no units.
    """

    bins: tuple[ReliabilityBin, ...]
    n: int
    n_bins: int
    brier_score: float | None
    expected_calibration_error: float | None
    max_calibration_error: float | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bins": [b.to_dict() for b in self.bins],
            "n": self.n,
            "n_bins": self.n_bins,
            "brier_score": self.brier_score,
            "expected_calibration_error": self.expected_calibration_error,
            "max_calibration_error": self.max_calibration_error,
            "reason": self.reason,
        }


def _calibration_errors(
    y: NDArray[np.int64], p: NDArray[np.float64], n_bins: int
) -> tuple[list[ReliabilityBin], float, float]:
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # Right-closed bins with 0 in the first one, as sklearn.calibration.calibration_curve.
    bin_ids = np.searchsorted(edges[1:-1], p, side="left")
    counts = np.bincount(bin_ids, minlength=n_bins)
    predicted_sums = np.bincount(bin_ids, weights=p, minlength=n_bins)
    observed_sums = np.bincount(bin_ids, weights=y, minlength=n_bins)
    bins: list[ReliabilityBin] = []
    ece = 0.0
    mce = 0.0
    for i in np.flatnonzero(counts):
        mean_predicted = predicted_sums[i] / counts[i]
        observed = observed_sums[i] / counts[i]
        gap = abs(observed - mean_predicted)
        ece += counts[i] / y.size * gap
        mce = max(mce, gap)
        bins.append(
            ReliabilityBin(
                lower=int(i) / n_bins,
                upper=(int(i) + 1) / n_bins,
                count=int(counts[i]),
                mean_predicted=float(mean_predicted),
                observed_frequency=float(observed),
            )
        )
    return bins, float(ece), float(mce)


def reliability(
    *,
    y_true: Sequence[int] | ArrayLike,
    probabilities: Sequence[float] | ArrayLike,
    n_bins: int = 10,
) -> ReliabilityReport:
    """Reliability diagram, Brier score and calibration errors of break probabilities.

    Bins are ``n_bins`` equal-width intervals of [0, 1], right-closed with 0 in the first
    (the binning of ``sklearn.calibration.calibration_curve(strategy="uniform")``); empty
    bins are omitted. With N units, bin b holding n_b of them:

    - Brier score (Brier 1950) = (1/N) sum_i (p_i - y_i)^2, equal to
      ``sklearn.metrics.brier_score_loss``;
    - expected calibration error (Naeini et al. 2015; Guo et al. 2017)
      ECE = sum_b (n_b / N) |mean(y in b) - mean(p in b)|;
    - maximum calibration error MCE = max_b |mean(y in b) - mean(p in b)|.

    Raises ``ValueError`` with these messages:

    - ``"y_true must contain only 0 (no break) and 1 (break), got <value>"``
    - ``"probabilities must be finite numbers in [0, 1]"``
    - ``"y_true and probabilities must have the same length, got <a> and <b>"``
    - ``"n_bins must be an integer >= 1, got <value>"``
    """
    y, p = _paired(y_true, probabilities, "probabilities")
    n_bins = _check_int(n_bins, "n_bins", 1)
    if y.size == 0:
        return ReliabilityReport((), 0, n_bins, None, None, None, "no units")
    bins, ece, mce = _calibration_errors(y, p, n_bins)
    brier = float(np.mean((p - y) ** 2))
    return ReliabilityReport(tuple(bins), int(y.size), n_bins, brier, ece, mce, None)


# --------------------------------------------------------------------------- calibration map


def _isotonic_transform(
    x_thresholds: Sequence[float], y_thresholds: Sequence[float], scores: NDArray[np.float64]
) -> NDArray[np.float64]:
    # Linear interpolation between the fitted steps, clipped to the end values outside
    # them: exactly IsotonicRegression(out_of_bounds="clip").predict.
    return np.interp(scores, np.asarray(x_thresholds), np.asarray(y_thresholds))


def _platt_transform(
    coef: float, intercept: float, scores: NDArray[np.float64]
) -> NDArray[np.float64]:
    return np.asarray(expit(coef * scores + intercept), dtype=np.float64)


def _fit_isotonic(
    y: NDArray[np.int64], s: NDArray[np.float64]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    from sklearn.isotonic import IsotonicRegression

    model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0, increasing=True)
    model.fit(s, y.astype(np.float64))
    return (
        tuple(float(x) for x in model.X_thresholds_),
        tuple(float(v) for v in model.y_thresholds_),
    )


def _fit_platt(y: NDArray[np.int64], s: NDArray[np.float64]) -> tuple[float, float]:
    from sklearn.linear_model import LogisticRegression

    n_break = int(y.sum())
    n_no_break = int(y.size - n_break)
    # Platt's (1999) smoothed targets keep the fit finite when the classes separate;
    # soft targets become two weighted copies of each unit.
    target = np.where(y == 1, (n_break + 1) / (n_break + 2), 1 / (n_no_break + 2))
    features = np.concatenate([s, s])[:, None]
    classes = np.concatenate([np.ones(y.size), np.zeros(y.size)])
    weights = np.concatenate([target, 1 - target])
    model = LogisticRegression(C=np.inf, solver="lbfgs", max_iter=1000, tol=1e-10)
    model.fit(features, classes, sample_weight=weights)
    return float(model.coef_[0, 0]), float(model.intercept_[0])


@dataclass(frozen=True)
class CalibrationMap:
    """A fitted map from raw judge scores to calibrated break probabilities.

    Holds plain numbers only, so ``to_dict()`` can be stored with a judge run in a JSON
    column and :meth:`from_dict` rebuilds it; :meth:`transform` needs no scikit-learn.

    - ``method="isotonic"``: ``x_thresholds`` / ``y_thresholds`` are the fitted
      ``X_thresholds_`` / ``y_thresholds_``; p = np.interp(score, x, y).
    - ``method="platt"``: p = 1 / (1 + exp(-(coef * score + intercept))).

    ``heldout_*`` describe the cross-validated fit (``None`` when the map was built
    without it): Brier score and ECE (10 bins) of the raw scores ("before") and of the
    out-of-fold calibrated probabilities ("after") on the same units.
    """

    method: Literal["isotonic", "platt"]
    x_thresholds: tuple[float, ...] = ()
    y_thresholds: tuple[float, ...] = ()
    coef: float | None = None
    intercept: float | None = None
    n_samples: int | None = None
    n_break: int | None = None
    cv: int | None = None
    seed: int | None = None
    heldout_brier_before: float | None = None
    heldout_brier_after: float | None = None
    heldout_ece_before: float | None = None
    heldout_ece_after: float | None = None

    def __post_init__(self) -> None:
        if self.method == "isotonic":
            if not self.x_thresholds or len(self.x_thresholds) != len(self.y_thresholds):
                raise ValueError(
                    "an isotonic calibration map needs x_thresholds and y_thresholds of the "
                    "same non-zero length"
                )
        elif self.method == "platt":
            if self.coef is None or self.intercept is None:
                raise ValueError("a platt calibration map needs coef and intercept")
        else:
            raise ValueError(
                f"calibration map method must be 'isotonic' or 'platt', got {self.method!r}"
            )

    def transform(self, scores: Sequence[float] | ArrayLike) -> NDArray[np.float64]:
        """Calibrated break probabilities of raw scores (a 1-D array).

        Raises ``ValueError("scores must be finite numbers in [0, 1]")``.
        """
        s = _probability_array(np.atleast_1d(np.asarray(scores)), "scores")
        if self.method == "isotonic":
            return _isotonic_transform(self.x_thresholds, self.y_thresholds, s)
        return _platt_transform(float(self.coef or 0.0), float(self.intercept or 0.0), s)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": CALIBRATION_MAP_FORMAT,
            "format_version": CALIBRATION_MAP_FORMAT_VERSION,
            "method": self.method,
        }
        if self.method == "isotonic":
            data["x_thresholds"] = list(self.x_thresholds)
            data["y_thresholds"] = list(self.y_thresholds)
        else:
            data["coef"] = self.coef
            data["intercept"] = self.intercept
        for name in (
            "n_samples",
            "n_break",
            "cv",
            "seed",
            "heldout_brier_before",
            "heldout_brier_after",
            "heldout_ece_before",
            "heldout_ece_after",
        ):
            data[name] = getattr(self, name)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibrationMap:
        """Rebuild a map from :meth:`to_dict` output (e.g. read back from JSON).

        Raises ``ValueError`` with these messages:

        - ``"calibration map must be a mapping, got <type>"``
        - ``"calibration map format_version <v> is not supported (expected 1)"``
        - ``"calibration map method must be 'isotonic' or 'platt', got <value>"``
        - ``"calibration map x_thresholds and y_thresholds must be non-empty lists of the
          same length"``
        - ``"calibration map x_thresholds must be non-decreasing finite numbers"``
        - ``"calibration map y_thresholds must be non-decreasing numbers in [0, 1]"``
        - ``"calibration map coef and intercept must be finite numbers"``
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"calibration map must be a mapping, got {type(data).__name__}")
        version = data.get("format_version", CALIBRATION_MAP_FORMAT_VERSION)
        if version != CALIBRATION_MAP_FORMAT_VERSION:
            raise ValueError(
                f"calibration map format_version {version!r} is not supported "
                f"(expected {CALIBRATION_MAP_FORMAT_VERSION})"
            )
        method = data.get("method")
        metadata: dict[str, Any] = {
            "n_samples": _optional_int(data.get("n_samples")),
            "n_break": _optional_int(data.get("n_break")),
            "cv": _optional_int(data.get("cv")),
            "seed": _optional_int(data.get("seed")),
            "heldout_brier_before": _optional_float(data.get("heldout_brier_before")),
            "heldout_brier_after": _optional_float(data.get("heldout_brier_after")),
            "heldout_ece_before": _optional_float(data.get("heldout_ece_before")),
            "heldout_ece_after": _optional_float(data.get("heldout_ece_after")),
        }
        if method == "isotonic":
            xs, ys = data.get("x_thresholds"), data.get("y_thresholds")
            if (
                not isinstance(xs, list | tuple)
                or not isinstance(ys, list | tuple)
                or not xs
                or len(xs) != len(ys)
            ):
                raise ValueError(
                    "calibration map x_thresholds and y_thresholds must be non-empty lists of "
                    "the same length"
                )
            x = _finite_floats(xs)
            if x is None or any(b < a for a, b in itertools.pairwise(x)):
                raise ValueError(
                    "calibration map x_thresholds must be non-decreasing finite numbers"
                )
            y = _finite_floats(ys)
            if (
                y is None
                or any(v < 0 or v > 1 for v in y)
                or any(b < a for a, b in itertools.pairwise(y))
            ):
                raise ValueError(
                    "calibration map y_thresholds must be non-decreasing numbers in [0, 1]"
                )
            return cls(method="isotonic", x_thresholds=x, y_thresholds=y, **metadata)
        if method == "platt":
            values = _finite_floats([data.get("coef"), data.get("intercept")])
            if values is None:
                raise ValueError("calibration map coef and intercept must be finite numbers")
            return cls(method="platt", coef=values[0], intercept=values[1], **metadata)
        raise ValueError(f"calibration map method must be 'isotonic' or 'platt', got {method!r}")


def _finite_floats(values: Sequence[Any]) -> tuple[float, ...] | None:
    result = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        result.append(float(value))
    return tuple(result)


def _optional_int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _optional_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def fit_calibration_map(
    *,
    y_true: Sequence[int] | ArrayLike,
    scores: Sequence[float] | ArrayLike,
    method: Literal["isotonic", "platt"] = "isotonic",
    cv: int = 5,
    seed: int = 0,
) -> CalibrationMap:
    """Fit a map from judge scores to calibrated break probabilities.

    First, ``StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)`` produces
    out-of-fold calibrated probabilities: each fold is transformed by a map fitted on
    the other folds, so ``heldout_brier_after`` / ``heldout_ece_after`` are honest
    held-out figures to set against ``heldout_brier_before`` / ``heldout_ece_before``
    of the raw scores. Then the returned map is fitted on all units.

    - ``"isotonic"``: isotonic regression of y on the score (Zadrozny & Elkan 2002),
      ``IsotonicRegression(out_of_bounds="clip")``; monotone, non-parametric, needs
      more data (Niculescu-Mizil & Caruana 2005).
    - ``"platt"``: p = sigmoid(a * score + b) fitted by unpenalised logistic regression
      on the score with Platt's (1999) smoothed targets (N+ + 1)/(N+ + 2) for breaks and
      1/(N- + 2) for non-breaks, which keep a and b finite on separable data.

    Raises ``ValueError`` with these messages:

    - ``"method must be 'isotonic' or 'platt', got <value>"``
    - ``"cv must be an integer >= 2, got <value>"``
    - ``"seed must be a non-negative integer, got <value>"``
    - ``"y_true must contain only 0 (no break) and 1 (break), got <value>"``
    - ``"scores must be finite numbers in [0, 1]"``
    - ``"y_true and scores must have the same length, got <a> and <b>"``
    - ``"fit_calibration_map needs both classes in y_true, got <k> break and <m>
      no-break units"`` (also for no units at all)
    - ``"fit_calibration_map needs at least <cv> units of each class for cv=<cv>, got <k>
      break and <m> no-break units"``
    """
    if method not in ("isotonic", "platt"):
        raise ValueError(f"method must be 'isotonic' or 'platt', got {method!r}")
    cv = _check_int(cv, "cv", 2)
    seed = _check_seed(seed)
    y, s = _paired(y_true, scores, "scores")
    n_break = int(y.sum())
    n_no_break = int(y.size - n_break)
    counts = f"got {n_break} break and {n_no_break} no-break units"
    if n_break == 0 or n_no_break == 0:
        raise ValueError(f"fit_calibration_map needs both classes in y_true, {counts}")
    if min(n_break, n_no_break) < cv:
        raise ValueError(
            f"fit_calibration_map needs at least {cv} units of each class for cv={cv}, {counts}"
        )

    from sklearn.model_selection import StratifiedKFold

    def fit(y_fit: NDArray[np.int64], s_fit: NDArray[np.float64]) -> CalibrationMap:
        if method == "isotonic":
            x_thresholds, y_thresholds = _fit_isotonic(y_fit, s_fit)
            return CalibrationMap(
                method="isotonic", x_thresholds=x_thresholds, y_thresholds=y_thresholds
            )
        coef, intercept = _fit_platt(y_fit, s_fit)
        return CalibrationMap(method="platt", coef=coef, intercept=intercept)

    out_of_fold = np.empty_like(s)
    folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)
    for train, test in folds.split(s.reshape(-1, 1), y):
        out_of_fold[test] = fit(y[train], s[train]).transform(s[test])

    _, ece_before, _ = _calibration_errors(y, s, 10)
    _, ece_after, _ = _calibration_errors(y, out_of_fold, 10)
    final = fit(y, s)
    return CalibrationMap(
        method=final.method,
        x_thresholds=final.x_thresholds,
        y_thresholds=final.y_thresholds,
        coef=final.coef,
        intercept=final.intercept,
        n_samples=int(y.size),
        n_break=n_break,
        cv=cv,
        seed=seed,
        heldout_brier_before=float(np.mean((s - y) ** 2)),
        heldout_brier_after=float(np.mean((out_of_fold - y) ** 2)),
        heldout_ece_before=ece_before,
        heldout_ece_after=ece_after,
    )


# --------------------------------------------------------------------------- human ceiling


def human_ceiling(
    *,
    judge_kappa: float | None,
    human_ci95: tuple[float, float] | Sequence[float] | None,
) -> dict[str, Any]:
    """Is the judge's agreement with gold at the level humans reach with each other?

    The judge is ``"at_human_level"`` when its kappa against gold lies within the 95%
    interval of the human (inter-rater) kappa or above it, and ``"below_human_level"``
    when it lies below the interval's lower end. Without an interval, or without a judge
    kappa, the status is ``"undetermined"``. Comparing a point estimate with the human
    interval is deliberately lenient towards the judge only as far as the humans' own
    uncertainty reaches.

    Returns ``{"status", "position" ("within" | "above" | "below" | None),
    "judge_kappa", "human_ci95", "reason"}``.

    Raises ``ValueError`` with these messages:

    - ``"judge_kappa must be a number in [-1, 1] or None, got <value>"``
    - ``"human_ci95 must be a pair (low, high) of numbers in [-1, 1] with low <= high,
      got <value>"``
    """
    if judge_kappa is not None and (
        isinstance(judge_kappa, bool)
        or not isinstance(judge_kappa, int | float)
        or not -1 <= judge_kappa <= 1
    ):
        raise ValueError(f"judge_kappa must be a number in [-1, 1] or None, got {judge_kappa!r}")
    interval: tuple[float, float] | None = None
    if human_ci95 is not None:
        pair = (
            _finite_floats(list(human_ci95))
            if isinstance(human_ci95, Sequence | np.ndarray) and not isinstance(human_ci95, str)
            else None
        )
        if pair is None or len(pair) != 2 or not -1 <= pair[0] <= pair[1] <= 1:
            raise ValueError(
                "human_ci95 must be a pair (low, high) of numbers in [-1, 1] with low <= high, "
                f"got {human_ci95!r}"
            )
        interval = (pair[0], pair[1])
    result: dict[str, Any] = {
        "status": "undetermined",
        "position": None,
        "judge_kappa": None if judge_kappa is None else float(judge_kappa),
        "human_ci95": None if interval is None else list(interval),
        "reason": "",
    }
    if judge_kappa is None:
        result["reason"] = "the judge's kappa against gold is undefined"
        return result
    if interval is None:
        result["reason"] = (
            "no interval for the human agreement (too few units labelled by several "
            "reviewers), so the human level is unknown"
        )
        return result
    low, high = interval
    shown = f"judge kappa {judge_kappa:.3f}, human interval [{low:.3f}, {high:.3f}]"
    if judge_kappa < low:
        result.update(
            status="below_human_level",
            position="below",
            reason=f"{shown}: the judge agrees with gold less than reviewers agree with each other",
        )
    elif judge_kappa > high:
        result.update(
            status="at_human_level",
            position="above",
            reason=f"{shown}: the judge agrees with gold more than reviewers agree with each other",
        )
    else:
        result.update(
            status="at_human_level",
            position="within",
            reason=f"{shown}: the judge agrees with gold as well as reviewers agree with "
            "each other",
        )
    return result


# --------------------------------------------------------------------------- prompt versions


@dataclass(frozen=True)
class VersionSummary:
    """One prompt version on the shared units: its codes and, given a reference,
    its agreement with it."""

    version: str
    n_units: int
    n_shared: int
    code_counts: Mapping[str, int]
    break_rate: float | None
    agreement: AgreementReport | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "n_units": self.n_units,
            "n_shared": self.n_shared,
            "code_counts": dict(self.code_counts),
            "break_rate": self.break_rate,
            "agreement": None if self.agreement is None else self.agreement.to_dict(),
        }


@dataclass(frozen=True)
class VersionDifference:
    """A shared unit where prompt versions gave different codes."""

    unit: Unit
    codes: Mapping[str, str]
    reference: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": _json_value(self.unit),
            "codes": dict(self.codes),
            "reference": self.reference,
        }


@dataclass(frozen=True)
class VersionComparison:
    """Prompt versions compared on the units every version judged.

    ``pairwise_kappa`` is keyed ``"<version_a>|<version_b>"`` with names sorted.
    """

    versions: tuple[str, ...]
    n_shared: int
    per_version: Mapping[str, VersionSummary]
    pairwise_kappa: Mapping[str, Estimate]
    differences: tuple[VersionDifference, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "versions": list(self.versions),
            "n_shared": self.n_shared,
            "per_version": {name: s.to_dict() for name, s in self.per_version.items()},
            "pairwise_kappa": {pair: e.to_dict() for pair, e in self.pairwise_kappa.items()},
            "differences": [d.to_dict() for d in self.differences],
        }


def compare_prompt_versions(
    *,
    verdicts: Mapping[str, Mapping[UnitT, str]],
    reference: Mapping[UnitT, str] | None,
    break_mapping: BreakMapping | None = None,
    ignore_codes: Collection[str] = (),
    n_resamples: int = 1000,
    seed: int = 0,
) -> VersionComparison:
    """Compare judge prompt versions on the units that every version judged.

    For each version (sorted by name): its code counts and break rate on the shared
    units and, when ``reference`` is given, :func:`compare_to_reference` restricted to
    the shared units (so all versions are measured on the same units). Pairwise Cohen's
    kappa between versions on the shared units with bootstrap intervals. ``differences``
    lists, in unit order, every shared unit where the versions' codes differ, with each
    version's code and the reference code (``None`` if the reference lacks the unit).

    Raises ``ValueError`` with these messages, besides those of
    :func:`compare_to_reference`:

    - ``"verdicts must name at least one prompt version"``
    - ``"break_mapping is required when a reference is given"``
    """
    if not verdicts:
        raise ValueError("verdicts must name at least one prompt version")
    if reference is not None and break_mapping is None:
        raise ValueError("break_mapping is required when a reference is given")
    mapping = None if break_mapping is None else _check_break_mapping(break_mapping)
    n_resamples = _check_int(n_resamples, "n_resamples", 0)
    seed = _check_seed(seed)
    versions = tuple(sorted(verdicts))
    if mapping is not None:
        for version in versions:
            _check_codes(verdicts[version], f"verdicts[{version!r}]", mapping)

    shared_set = set(verdicts[versions[0]])
    for version in versions[1:]:
        shared_set &= set(verdicts[version])
    shared = _sorted_units(shared_set)

    per_version: dict[str, VersionSummary] = {}
    for version in versions:
        codes = {unit: verdicts[version][unit] for unit in shared}
        break_rate: float | None = None
        if mapping is not None:
            classes = [mapping[c] for c in codes.values() if mapping[c] is not None]
            break_rate = classes.count(BREAK) / len(classes) if classes else None
        agreement = None
        if reference is not None and mapping is not None:
            agreement = compare_to_reference(
                reference=reference,
                judged=codes,
                break_mapping=mapping,
                ignore_codes=ignore_codes,
                n_resamples=n_resamples,
                seed=seed,
            )
        per_version[version] = VersionSummary(
            version=version,
            n_units=len(verdicts[version]),
            n_shared=len(shared),
            code_counts=dict(sorted(Counter(codes.values()).items())),
            break_rate=break_rate,
            agreement=agreement,
        )

    pairwise: dict[str, Estimate] = {}
    for i, first in enumerate(versions):
        for second in versions[i + 1 :]:
            pairwise[f"{first}|{second}"] = _code_kappa(
                [verdicts[first][u] for u in shared],
                [verdicts[second][u] for u in shared],
                n_resamples=n_resamples,
                seed=seed,
            )

    differences = tuple(
        VersionDifference(
            unit=unit,
            codes={version: verdicts[version][unit] for version in versions},
            reference=None if reference is None else reference.get(unit),
        )
        for unit in shared
        if len({verdicts[version][unit] for version in versions}) > 1
    )
    return VersionComparison(
        versions=versions,
        n_shared=len(shared),
        per_version=per_version,
        pairwise_kappa=pairwise,
        differences=differences,
    )


def _code_kappa(first: list[str], second: list[str], *, n_resamples: int, seed: int) -> Estimate:
    labels = sorted(set(first) | set(second))
    position = {code: i for i, code in enumerate(labels)}
    k = len(labels)
    first_index = np.array([position[c] for c in first], dtype=np.int64)
    second_index = np.array([position[c] for c in second], dtype=np.int64)
    confusion = np.bincount(first_index * k + second_index, minlength=k * k).reshape(k, k)
    n = len(first)
    resampled = None
    no_interval = "no confidence interval: n_resamples is 0" if n_resamples == 0 else None
    if n >= 2 and n_resamples:
        resampled = _kappa_from_confusion(
            _bootstrap_confusions(first_index, second_index, k, n_resamples=n_resamples, seed=seed)
        )
    elif n_resamples:
        no_interval = "no confidence interval from fewer than 2 units"
    return _estimate(
        float(_kappa_from_confusion(confusion)),
        n,
        resampled,
        undefined_reason="no unit was judged by every version"
        if n == 0
        else "Cohen's kappa is undefined: both versions gave one and the same code to every unit",
        no_interval_reason=no_interval,
    )


# --------------------------------------------------------------------------- few-shot examples


_EXAMPLE_KINDS = ("pass", "fail", "borderline")


def few_shot_examples(
    candidates: Sequence[Mapping[str, Any]],
    *,
    verdict_by_code: Mapping[str, str],
    per_label: int = 1,
    kinds: Collection[str] = _EXAMPLE_KINDS,
    exclude_units: Collection[Hashable] = (),
    seed: int = 0,
) -> list[dict[str, Any]]:
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
    per_label = _check_int(per_label, "per_label", 1)
    seed = _check_seed(seed)
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
    chosen: list[dict[str, Any]] = []
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


def mean_pairwise_kappa(
    labels_by_rater: Mapping[Any, Mapping[Any, str]],
    *,
    units: Collection[Hashable] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Estimate:
    """Human-human agreement: the mean of Cohen's kappa over every pair of raters.

    For each pair of raters, kappa on the units both labelled (restricted to ``units``
    when given); pairs sharing fewer than two units are left out. The mean over pairs
    gets a percentile interval from resampling the units (the same resample for every
    pair, Efron & Tibshirani 1993, ch. 6). This is the human ceiling a judge's kappa
    against gold is set beside (see :func:`human_ceiling`).

    ``n`` counts the distinct units that enter at least one pair. Undefined (``None``
    with a reason) when no pair shares two units, or every pair's kappa is undefined.
    """
    _check_int(n_resamples, "n_resamples", 0)
    seed = _check_seed(seed)
    wanted = None if units is None else set(units)
    all_units = sorted(
        {u for labels in labels_by_rater.values() for u in labels if wanted is None or u in wanted},
        key=_sort_key,
    )
    position = {unit: i for i, unit in enumerate(all_units)}
    codes = sorted({c for labels in labels_by_rater.values() for c in labels.values()})
    code_index = {code: i for i, code in enumerate(codes)}
    raters = sorted(labels_by_rater, key=_sort_key)
    pairs: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]] = []
    used: set[int] = set()
    for i, first in enumerate(raters):
        for second in raters[i + 1 :]:
            a, b = labels_by_rater[first], labels_by_rater[second]
            shared = [u for u in a.keys() & b.keys() if u in position]
            if len(shared) < 2:
                continue
            idx = np.array([position[u] for u in shared], dtype=np.int64)
            pairs.append(
                (
                    idx,
                    np.array([code_index[a[u]] for u in shared], dtype=np.int64),
                    np.array([code_index[b[u]] for u in shared], dtype=np.int64),
                )
            )
            used.update(idx.tolist())
    if not pairs:
        return Estimate(None, 0, None, "no two raters share two or more units")
    k = len(codes)

    def mean_kappa(weights: NDArray[np.int64]) -> NDArray[np.float64]:
        # weights: (R, U) how often each unit is drawn in each of R resamples
        values = []
        for idx, left, right in pairs:
            cells = left * k + right
            w = weights[:, idx]
            confusion = np.zeros((weights.shape[0], k * k), dtype=np.int64)
            for cell in np.unique(cells):
                confusion[:, cell] = w[:, cells == cell].sum(axis=1)
            values.append(_kappa_from_confusion(confusion.reshape(-1, k, k)))
        stacked = np.vstack(values)
        with np.errstate(invalid="ignore"):
            finite = np.where(np.isfinite(stacked), stacked, np.nan)
            counts = np.isfinite(stacked).sum(axis=0)
            totals = np.nansum(finite, axis=0)
        return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)

    point = float(mean_kappa(np.ones((1, len(all_units)), dtype=np.int64))[0])
    if not math.isfinite(point):
        return Estimate(None, len(used), None, "every pair's kappa is undefined (one category)")
    if n_resamples == 0:
        return Estimate(point, len(used), None, "no bootstrap was asked for")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(all_units), size=(n_resamples, len(all_units)))
    weights = np.zeros((n_resamples, len(all_units)), dtype=np.int64)
    np.add.at(weights, (np.arange(n_resamples)[:, None], draws), 1)
    interval, reason = _percentile_interval(mean_kappa(weights))
    return Estimate(point, len(used), interval, reason)
