"""Calibration maps: fitting raw judge scores to break probabilities, and storing the map.

Platt (1999) and isotonic (Zadrozny & Elkan 2002) maps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from review_app.calibration.scores import calibration_errors
from review_app.stats.checks import (
    check_int,
    check_labels_and_scores,
    check_probabilities,
    check_seed,
)

CALIBRATION_MAP_FORMAT = "role-review/calibration-map"
CALIBRATION_MAP_FORMAT_VERSION = 1


def _finite_floats(values: Sequence[Any]) -> tuple[float, ...] | None:
    result = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        result.append(float(value))
    return tuple(result)


def _isotonic_transform(
    x_thresholds: Sequence[float], y_thresholds: Sequence[float], scores: NDArray[np.float64]
) -> NDArray[np.float64]:
    # Linear interpolation between the fitted steps, clipped to the end values outside
    # them: exactly IsotonicRegression(out_of_bounds="clip").predict.
    return np.interp(scores, np.asarray(x_thresholds), np.asarray(y_thresholds))


def _platt_transform(
    coef: float, intercept: float, scores: NDArray[np.float64]
) -> NDArray[np.float64]:
    from scipy.special import expit  # scipy only where a map is applied

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


class CalibrationMapJson(TypedDict):
    """:meth:`CalibrationMap.to_dict`: ``x_thresholds`` and ``y_thresholds`` for an
    isotonic map, ``coef`` and ``intercept`` for a Platt one."""

    format: str
    format_version: int
    method: Literal["isotonic", "platt"]
    x_thresholds: NotRequired[list[float]]
    y_thresholds: NotRequired[list[float]]
    coef: NotRequired[float | None]
    intercept: NotRequired[float | None]
    n_samples: int | None
    n_break: int | None
    cv: int | None
    seed: int | None
    heldout_brier_before: float | None
    heldout_brier_after: float | None
    heldout_ece_before: float | None
    heldout_ece_after: float | None


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
        s = check_probabilities(np.atleast_1d(np.asarray(scores)), "scores")
        if self.method == "isotonic":
            return _isotonic_transform(self.x_thresholds, self.y_thresholds, s)
        return _platt_transform(float(self.coef or 0.0), float(self.intercept or 0.0), s)

    def to_dict(self) -> CalibrationMapJson:
        data: CalibrationMapJson = {
            "format": CALIBRATION_MAP_FORMAT,
            "format_version": CALIBRATION_MAP_FORMAT_VERSION,
            "method": self.method,
        }  # type: ignore[typeddict-item]  # the figures below follow the method's keys
        if self.method == "isotonic":
            data["x_thresholds"] = list(self.x_thresholds)
            data["y_thresholds"] = list(self.y_thresholds)
        else:
            data["coef"] = self.coef
            data["intercept"] = self.intercept
        data["n_samples"] = self.n_samples
        data["n_break"] = self.n_break
        data["cv"] = self.cv
        data["seed"] = self.seed
        data["heldout_brier_before"] = self.heldout_brier_before
        data["heldout_brier_after"] = self.heldout_brier_after
        data["heldout_ece_before"] = self.heldout_ece_before
        data["heldout_ece_after"] = self.heldout_ece_after
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
    cv = check_int(cv, "cv", 2)
    seed = check_seed(seed)
    y, s = check_labels_and_scores(y_true, scores, "scores")
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

    _, ece_before, _ = calibration_errors(y, s, 10)
    _, ece_after, _ = calibration_errors(y, out_of_fold, 10)
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
