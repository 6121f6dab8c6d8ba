"""Checks of the options the statistics take, each with its one exact ``ValueError`` message."""

from __future__ import annotations

import numpy as np


def check_int(value: object, name: str, minimum: int) -> int:
    """``value`` as an ``int``; ``"<name> must be an integer >= <minimum>, got <value>"``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive_int(value: object, name: str) -> int:
    """``value`` as an ``int``; ``"<name> must be a positive integer, got <value>"``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_confidence(confidence: float) -> None:
    """``"confidence must be strictly between 0 and 1, got <value>"`` unless it is."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
