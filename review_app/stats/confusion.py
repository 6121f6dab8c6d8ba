"""Confusion matrices of codes, collapsed to break / no break, and the break-class metrics."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from review_app.stats.core import kappa_from_confusion, ratio

__all__ = ["binary_confusion", "binary_metrics", "confusion_from_codes"]


def confusion_from_codes(
    first: ArrayLike, second: ArrayLike, *, n_categories: int
) -> NDArray[np.int64]:
    """The confusion matrix of two integer-coded ratings of the same units.

    ``C[i, j]`` counts the units that ``first`` codes ``i`` and ``second`` codes ``j``
    (rows ``first``, the reference by convention), counted in one ``numpy.bincount``
    over the cells ``first * n_categories + second``.
    """
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    k = n_categories
    return np.bincount(a * k + b, minlength=k * k).reshape(k, k)


def binary_confusion(
    confusion: NDArray[Any], is_no_break: NDArray[np.int64], is_break: NDArray[np.int64]
) -> NDArray[Any]:
    """Collapse code confusion matrices to ``[[tn, fp], [fn, tp]]`` (rows reference)."""
    collapse = np.stack([is_no_break, is_break], axis=1)  # (K, 2)
    return np.einsum("ki,...kl,lj->...ij", collapse, confusion, collapse)


def binary_metrics(binary: NDArray[np.int64]) -> dict[str, NDArray[np.float64]]:
    """Break-class metrics of a stack of 2x2 matrices ``[[tn, fp], [fn, tp]]``."""
    tn, fp = binary[..., 0, 0], binary[..., 0, 1]
    fn, tp = binary[..., 1, 0], binary[..., 1, 1]
    recall = ratio(tp, tp + fn)
    return {
        "break_kappa": kappa_from_confusion(binary),
        "break_accuracy": ratio(tp + tn, tp + tn + fp + fn),
        "precision": ratio(tp, tp + fp),
        "recall": recall,
        "f1": ratio(2 * tp, 2 * tp + fp + fn),
        "tpr": recall,
        "tnr": ratio(tn, tn + fp),
    }
