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

    ``C[i, j]`` counts the units that ``first`` codes ``i`` and ``second`` codes ``j``,
    counted in one ``numpy.bincount`` over the cells ``first * n_categories + second``.
    It equals ``sklearn.metrics.confusion_matrix(first, second,
    labels=range(n_categories))``.

    Parameters
    ----------
    first, second : array_like of int, shape (n,)
        The code ``0..n_categories-1`` of each unit on either side; rows are ``first``
        (the reference, by convention), columns ``second``.
    n_categories : int
        The number of codes K.

    Returns
    -------
    numpy.ndarray of int64, shape (K, K)
        The counts; they sum to ``n``.

    See Also
    --------
    review_app.stats.core.kappa_from_confusion : Cohen's kappa of such a matrix.
    review_app.stats.core.bootstrap_confusions : the same matrix in bootstrap resamples.

    Examples
    --------
    The grant proposals of :func:`~review_app.stats.core.kappa_from_confusion`, one code
    pair per proposal (0 yes, 1 no):

    >>> reader_a = [0] * 20 + [0] * 5 + [1] * 10 + [1] * 15
    >>> reader_b = [0] * 20 + [1] * 5 + [0] * 10 + [1] * 15
    >>> confusion_from_codes(reader_a, reader_b, n_categories=2).tolist()
    [[20, 5], [10, 15]]
    """
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    k = n_categories
    return np.bincount(a * k + b, minlength=k * k).reshape(k, k)


def binary_confusion(
    confusion: NDArray[Any], is_no_break: NDArray[np.int64], is_break: NDArray[np.int64]
) -> NDArray[Any]:
    """Collapse code confusion matrices to ``[[tn, fp], [fn, tp]]`` (rows reference).

    Parameters
    ----------
    confusion : numpy.ndarray, shape (..., K, K)
        Code confusion matrices, rows reference (one matrix or a bootstrap stack).
    is_no_break, is_break : numpy.ndarray of int64, shape (K,)
        1 for the codes that map to no break (to break), else 0; a code in neither
        (borderline, abstain) is left out.

    Returns
    -------
    numpy.ndarray, shape (..., 2, 2)
        ``[[tn, fp], [fn, tp]]`` with break the positive class.

    Examples
    --------
    Codes ``ok``, ``scope_break``, ``tone_break`` and ``borderline``:

    >>> confusion = np.array([[5, 1, 0, 1], [1, 3, 1, 0], [0, 0, 2, 0], [1, 0, 0, 1]])
    >>> binary_confusion(confusion, np.array([1, 0, 0, 0]), np.array([0, 1, 1, 0])).tolist()
    [[5, 1], [1, 6]]
    """
    collapse = np.stack([is_no_break, is_break], axis=1)  # (K, 2)
    return np.einsum("ki,...kl,lj->...ij", collapse, confusion, collapse)


def binary_metrics(binary: NDArray[np.int64]) -> dict[str, NDArray[np.float64]]:
    """Break-class metrics of a stack of 2x2 matrices ``[[tn, fp], [fn, tp]]``.

    Break is the positive class: precision TP / (TP + FP), recall = TPR TP / (TP + FN),
    F1 2TP / (2TP + FP + FN) [1]_, TNR TN / (TN + FP), accuracy and Cohen's kappa of
    the 2x2 table.

    Parameters
    ----------
    binary : numpy.ndarray, shape (..., 2, 2)
        From :func:`binary_confusion` (or any ``[[tn, fp], [fn, tp]]`` stack).

    Returns
    -------
    dict of str to numpy.ndarray of float64, shape (...)
        ``break_kappa``, ``break_accuracy``, ``precision``, ``recall``, ``f1``, ``tpr``
        and ``tnr``; NaN where a denominator is 0. Precision, recall and F1 equal
        scikit-learn's with ``pos_label=1`` wherever they are defined.

    References
    ----------
    .. [1] van Rijsbergen, C. J. (1979). Information Retrieval (2nd ed.), chapter 7.
       Butterworths.

    Examples
    --------
    >>> metrics = binary_metrics(np.array([[5, 1], [1, 6]]))
    >>> {name: round(float(value), 3) for name, value in metrics.items()}
    ... # doctest: +NORMALIZE_WHITESPACE
    {'break_kappa': 0.69, 'break_accuracy': 0.846, 'precision': 0.857, 'recall': 0.857,
     'f1': 0.857, 'tpr': 0.857, 'tnr': 0.833}
    """
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
