"""The statistics core: one estimate type, kappa, Wilson, the bootstraps, the rating table.

The alternative annotator test (:mod:`review_app.stats.alt_test`) and
prediction-powered estimates (:mod:`review_app.stats.ppi`) are built on it. Pure
computation: nothing here imports storage or Streamlit.
"""

from review_app.stats.core import (
    BREAK,
    MIN_MINORITY_UNITS,
    MIN_PROPORTION_UNITS,
    NO_BREAK,
    TOO_FEW_BREAKS,
    Estimate,
    break_mapping_from_verdicts,
    canonical_order,
    kappa_from_confusion,
    proportion,
    resample_weights,
    wilson_interval,
)
from review_app.stats.table import RatingTable

__all__ = [
    "BREAK",
    "MIN_MINORITY_UNITS",
    "MIN_PROPORTION_UNITS",
    "NO_BREAK",
    "TOO_FEW_BREAKS",
    "Estimate",
    "RatingTable",
    "break_mapping_from_verdicts",
    "canonical_order",
    "kappa_from_confusion",
    "proportion",
    "resample_weights",
    "wilson_interval",
]
