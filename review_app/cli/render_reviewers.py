"""Reviewer reliability and agreement over time as text for the terminal (``--json``
prints the reports themselves)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from review_app.cli.output import format_table

if TYPE_CHECKING:
    from review_app.agreement.over_time import VersionAlphaJson
    from review_app.services.review.reliability import OverTimeReport, ReliabilityReport


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _interval(ci95: list[float] | None) -> str:
    return "—" if not ci95 else f"[{ci95[0]:.2f}, {ci95[1]:.2f}]"


def render_reliability(report: ReliabilityReport) -> str:
    """Accuracy per reviewer, the sentence on the codes they mix up, and who is below
    the others."""
    lines = [
        f"reviewer reliability under {report['rubric']}: Dawid-Skene over {report['labels']} "
        f"labels on {report['units']} turns ({report['anchored_units']} adjudicated), "
        f"{report['resamples']} conversation-bootstrap resamples",
        "",
        format_table(
            ("reviewer", "labels", "accuracy", "95% interval", "below others"),
            [
                (
                    r["name"],
                    str(r["n_labels"]),
                    _number(r["accuracy"]),
                    _interval(r["ci95"]),
                    "yes" if r["below_others"] else "",
                )
                for r in report["reviewers"]
            ],
        ),
        "",
        report["sentence"],
    ]
    lines.extend(f"  {r['sentence']}" for r in report["reviewers"] if not r["below_others"])
    lines.extend(f"  {warning}" for warning in report["warnings"])
    return "\n".join(lines)


def _alpha_cell(versions: list[VersionAlphaJson]) -> str:
    return (
        ", ".join(f"{v['rubric']} {_number(v['value'])} ({v['n_units']})" for v in versions) or "—"
    )


def render_over_time(report: OverTimeReport) -> str:
    """Alpha and each reviewer's agreement with gold per period, then the session line."""
    names = sorted({r["name"] for p in report["periods"] for r in p["reviewers"]})
    marks: dict[str, list[str]] = {}
    for mark in report["publications"]:
        if mark["period"]:
            marks.setdefault(mark["period"], []).append(mark["rubric"])
    rows = []
    for period in report["periods"]:
        shares = {r["name"]: r for r in period["reviewers"]}
        published = marks.get(period["period"])
        rows.append(
            (
                period["period"] + (f" (published {', '.join(published)})" if published else ""),
                str(period["labels"]),
                _alpha_cell(period["versions"]),
                *(
                    _number(shares[name]["value"]) + f" ({shares[name]['n']})"
                    if name in shares
                    else "—"
                    for name in names
                ),
            )
        )
    headers = ("period", "labels", "alpha (units)", *(f"{name} vs gold" for name in names))
    lines = [
        f"agreement over time under {report['rubric']} and its earlier versions, by {report['by']}",
        "",
        format_table(headers, rows) if rows else "no labels yet",
        "",
        *report["sentences"],
    ]
    lines.extend(f"  {warning}" for warning in report["warnings"])
    return "\n".join(lines)
