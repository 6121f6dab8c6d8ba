"""Every agreement figure of a turn-level rating table as one JSON-ready dict."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypedDict

from review_app.agreement.bootstrap import intervals_of_alpha_and_pairs
from review_app.agreement.coefficients import (
    Coefficient,
    cohen_kappa_pairs,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    per_label_alpha,
    percent_agreement,
)
from review_app.agreement.conversations import FirstBreakAgreementJson, FirstBreaks
from review_app.stats.core import CLUSTER_METHOD, UnitsEstimateJson
from review_app.stats.table import RatingTable


class PairKappaJson(TypedDict):
    """Cohen's kappa of two raters: the agreement form of an estimate and its ``method``."""

    value: float | None
    n_units: int
    reason: str | None
    ci95: list[float] | None
    warning: str | None
    method: str | None


class ConversationAgreementJson(TypedDict):
    conversations: int
    """How many conversations have a break / no-break rating."""
    readers: dict[str, int]
    """How many conversations were read by how many raters (2 or more): ``{"3": 17}``."""
    first_break_agreement: FirstBreakAgreementJson
    any_break_alpha: UnitsEstimateJson


class BootstrapJson(TypedDict):
    n_resamples: int
    seed: int
    confidence: float
    method: str


class AgreementSummary(TypedDict):
    """:func:`agreement_summary` (docs/reference.md, "Agreement JSON")."""

    level: str
    units: int
    raters: int
    ratings: int
    rater_names: list[str]
    alpha_ci95: list[float] | None
    bootstrap: BootstrapJson
    cohen_kappa: dict[str, PairKappaJson]
    """By ``"<rater_a>|<rater_b>"``."""
    per_label: dict[str, UnitsEstimateJson]
    conversation: ConversationAgreementJson
    warnings: list[str]
    percent_agreement: UnitsEstimateJson
    krippendorff_alpha: UnitsEstimateJson
    fleiss_kappa: UnitsEstimateJson
    gwet_ac1: UnitsEstimateJson
    alpha_break: UnitsEstimateJson
    alpha_verdict: UnitsEstimateJson


def verdict_mapping_from_verdicts(verdicts: Mapping[Any, str]) -> dict[Any, str | None]:
    """Code -> ``"pass"`` / ``"fail"`` / ``"borderline"`` / ``None`` (abstain is not counted)."""
    kept = {"pass", "fail", "borderline"}
    return {code: (verdict if verdict in kept else None) for code, verdict in verdicts.items()}


def agreement_summary(
    table: RatingTable,
    *,
    break_mapping: Mapping[Any, Hashable | None],
    verdict_mapping: Mapping[Any, Hashable | None],
    conversation_of: Callable[[Any], Hashable],
    turn_of: Callable[[Any], int],
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    break_value: Hashable = "break",
) -> AgreementSummary:
    """Every agreement figure for a turn-level rating table, as one JSON-ready dict.

    ``break_mapping`` collapses codes to break / no break (``break_value`` names
    the break category; ``None`` drops a code) and ``verdict_mapping`` to the
    verdicts; :func:`~review_app.stats.codes.break_mapping_from_verdicts` and
    :func:`verdict_mapping_from_verdicts` build both from a rubric.
    ``conversation_of`` and ``turn_of`` take a unit apart for the
    conversation-level figures, which are computed on the break collapse.
    ``n_resamples=0`` skips the bootstrap; ``confidence`` is the level of every
    interval (alpha's and each pair's kappa's), both percentile bootstraps over
    conversations.

    Keys: ``level`` (``"turn"``), ``units``, ``raters``, ``ratings`` (counts),
    ``rater_names``, ``percent_agreement``, ``krippendorff_alpha`` (with its
    ``ci95``), ``alpha_ci95`` (``[low, high]`` or ``null``), ``bootstrap``,
    ``fleiss_kappa`` (units rated by every rater only), ``gwet_ac1``,
    ``cohen_kappa`` (``"a|b"`` -> coefficient, with its ``ci95`` and ``method``),
    ``per_label`` (code -> coefficient), ``alpha_break``, ``alpha_verdict``, ``conversation``
    (``conversations``: how many have a break / no-break rating;
    ``first_break_agreement``, ``any_break_alpha``) and
    ``warnings`` (``"<figure>: <warning>"`` lines). Coefficients are
    :meth:`Coefficient.to_dict` objects. Nothing in it is NaN.
    """
    if n_resamples < 0:
        raise ValueError(f"n_resamples must be zero or a positive integer, got {n_resamples!r}")
    if break_value not in set(break_mapping.values()):
        raise ValueError(f"break_mapping maps no code to the break value {break_value!r}")

    if n_resamples:
        alpha, pairwise = intervals_of_alpha_and_pairs(
            table,
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
            cluster_of=conversation_of,
        )
    else:
        alpha, pairwise = krippendorff_alpha(table), cohen_kappa_pairs(table)
    break_table = table.collapse(break_mapping)
    verdict_table = table.collapse(verdict_mapping)
    breaks = FirstBreaks.from_table(
        break_table,
        conversation_of=conversation_of,
        turn_of=turn_of,
        break_values={break_value},
    )
    figures: dict[str, Coefficient] = {
        "percent_agreement": percent_agreement(table),
        "krippendorff_alpha": alpha,
        "fleiss_kappa": fleiss_kappa(table),
        "gwet_ac1": gwet_ac1(table),
        "alpha_break": krippendorff_alpha(break_table),
        "alpha_verdict": krippendorff_alpha(verdict_table),
    }
    first_break = breaks.agreement()
    any_break = breaks.any_break_alpha()

    warnings: list[str] = []
    for name, figure in figures.items():
        if figure.warning:
            warnings.append(f"{name}: {figure.warning}")
    for pair, coefficient in pairwise.items():
        if coefficient.warning:
            warnings.append(f"cohen_kappa {pair}: {coefficient.warning}")
    for name, warning in (
        ("first_break_agreement", first_break.warning),
        ("any_break_alpha", any_break.warning),
    ):
        if warning:
            warnings.append(f"conversation {name}: {warning}")
    if alpha.value is not None and alpha.ci95 is None and n_resamples:
        warnings.append(f"alpha_ci95: {alpha.reason}")

    return {
        "level": "turn",
        "units": table.n_units,
        "raters": table.n_raters,
        "ratings": table.n_ratings,
        "rater_names": [str(rater) for rater in table.raters],
        "alpha_ci95": None if alpha.ci95 is None else [alpha.ci95[0], alpha.ci95[1]],
        "bootstrap": {
            "n_resamples": n_resamples,
            "seed": seed,
            "confidence": confidence,
            "method": CLUSTER_METHOD,
        },
        "cohen_kappa": {
            pair: {**coefficient.to_dict(count_key="n_units"), "method": coefficient.method}
            for pair, coefficient in pairwise.items()
        },
        "per_label": {
            str(value): coefficient.to_dict(count_key="n_units")
            for value, coefficient in per_label_alpha(table).items()
        },
        "conversation": {
            "conversations": len(breaks.conversations),
            "readers": breaks.readers(),
            "first_break_agreement": first_break.to_dict(),
            "any_break_alpha": any_break.to_dict(count_key="n_units"),
        },
        "warnings": warnings,
        "percent_agreement": figures["percent_agreement"].to_dict(count_key="n_units"),
        "krippendorff_alpha": figures["krippendorff_alpha"].to_dict(count_key="n_units"),
        "fleiss_kappa": figures["fleiss_kappa"].to_dict(count_key="n_units"),
        "gwet_ac1": figures["gwet_ac1"].to_dict(count_key="n_units"),
        "alpha_break": figures["alpha_break"].to_dict(count_key="n_units"),
        "alpha_verdict": figures["alpha_verdict"].to_dict(count_key="n_units"),
    }
