"""The break rate by stratum and a draw by stratum as text for the terminal (``--json``
prints the reports themselves)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from review_app.cli.output import format_table

if TYPE_CHECKING:
    from review_app.services.judging.estimate import BreakRateEstimate
    from review_app.services.judging.strata import StratifiedBlock, StratumRow


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _range(ci95: list[float] | None, *, percent: bool) -> str:
    if not ci95:
        return "—"
    if percent:
        return f"[{_percent(ci95[0])}, {_percent(ci95[1])}]"
    return f"[{ci95[0]:.2f}, {ci95[1]:.2f}]"


def _agreement(row: StratumRow) -> str:
    kappa = row["judge_kappa"]
    if kappa["value"] is not None:
        return f"kappa {kappa['value']:.2f} {_range(kappa['ci95'], percent=False)}"
    accuracy = row["judge_accuracy"]
    if accuracy["value"] is None:
        return "—"
    return f"agrees {_percent(accuracy['value'])} {_range(accuracy['ci95'], percent=True)}"


def render_stratified(block: StratifiedBlock) -> str:
    """The strata's table, the stratified rate and the sentences."""
    headline = f"by {block['by']}: break rate {_percent(block['value'])}"
    if block["ci95"]:
        headline += f" {_range(block['ci95'], percent=True)}"
    rows = [
        (
            row["stratum"],
            f"{row['weight']:.2f}",
            str(row["n_units"]),
            str(row["n_gold"]),
            "—" if row["lambda"] is None else f"{row['lambda']:.2f}",
            _percent(row["value"]),
            _range(row["ci95"], percent=True),
            _agreement(row),
        )
        for row in block["strata"]
    ]
    headers = (
        "stratum",
        "weight",
        "turns",
        "gold",
        "lambda",
        "rate",
        "95% interval",
        "judge vs gold",
    )
    lines = [
        headline + f" (stratified PPI++, gold: {block['gold_source']})",
        format_table(
            headers,
            rows,
        ),
        *block["sentences"],
    ]
    lines.extend(f"  {warning}" for warning in block["warnings"])
    return "\n".join(lines)


def with_strata(render: Callable[[BreakRateEstimate], str]) -> Callable[[BreakRateEstimate], str]:
    """``render``, followed by the strata when the estimate has them."""

    def both(estimate: BreakRateEstimate) -> str:
        text = render(estimate)
        block = estimate.get("stratified")
        return text if block is None else text + "\n\n" + render_stratified(block)

    return both
