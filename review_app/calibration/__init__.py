"""Calibration of an automated LLM judge against human labels.

Split by concern: :mod:`.reference` (agreement with a reference), :mod:`.first_break`
(first break per conversation), :mod:`.like_for_like` (the judge beside the reviewers),
:mod:`.versions` (prompt versions), :mod:`.scores` (threshold sweep and reliability),
:mod:`.score_map` (calibration maps), :mod:`.few_shot` (few-shot selection); the shared
estimate type, kappa and intervals are in :mod:`review_app.stats.core`, the input checks
in :mod:`review_app.stats.checks`, unit order in :mod:`review_app.stats.units` and the
break-class metrics in :mod:`review_app.stats.confusion`.

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

from review_app.calibration.few_shot import (
    few_shot_examples,
)
from review_app.calibration.first_break import (
    FirstBreakMismatch,
    FirstBreakReport,
    first_break_comparison,
    first_break_turns,
)
from review_app.calibration.like_for_like import kappa_estimate, like_for_like
from review_app.calibration.reference import (
    DISAGREEMENT_KINDS,
    AgreementReport,
    ConfusionMatrix,
    classify_disagreement,
    compare_to_reference,
)
from review_app.calibration.score_map import CalibrationMap, fit_calibration_map
from review_app.calibration.scores import (
    DEFAULT_THRESHOLDS,
    ReliabilityBin,
    ReliabilityReport,
    ThresholdPoint,
    ThresholdSweep,
    reliability,
    threshold_sweep,
)
from review_app.calibration.versions import (
    VersionComparison,
    VersionDifference,
    VersionSummary,
    compare_prompt_versions,
)
from review_app.stats.core import BREAK, NO_BREAK, Estimate, break_mapping_from_verdicts

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
    "first_break_turns",
    "fit_calibration_map",
    "kappa_estimate",
    "like_for_like",
    "reliability",
    "threshold_sweep",
]
