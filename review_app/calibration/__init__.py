"""Calibration of an automated LLM judge against human labels.

Modules:

- ``reference``: agreement of the judge with a reference (gold or one reviewer);
- ``first_break``: the first break per conversation, judge against reference;
- ``like_for_like``: the judge beside the reviewers, on the same units;
- ``versions``: prompt versions compared on the same reference;
- ``scores``: the threshold sweep and the reliability of the judge's probabilities;
- ``score_map``: calibration maps, fitted and applied;
- ``few_shot``: few-shot examples chosen from adjudicated units.

The shared estimate type, kappa and intervals are in :mod:`review_app.stats.core`, the
input checks in :mod:`review_app.stats.checks`, unit order in :mod:`review_app.stats.units`
and the break-class metrics in :mod:`review_app.stats.confusion`.

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
    :func:`~review_app.stats.codes.break_mapping_from_verdicts`): a code whose verdict is
    *fail* is a break, a *pass* code is no break, and borderline / abstain codes map to
    ``None``: they are not comparable on the binary task, so such units are left out of the
    break-class metrics and counted.
score
    The judge's probability in ``[0, 1]`` that a turn BREAKS the role.

Undefined results (no shared units, a single class, nothing predicted) are ``None``
with a reason string, never NaN. Every result is a frozen dataclass whose
``to_dict()`` is JSON-safe (``json.dumps(..., allow_nan=False)`` succeeds); units
appear there as lists, e.g. ``["support-refund-pressure", 4]``.

Invalid *arguments* raise ``ValueError`` with the exact messages given in each
function's docstring.
"""
