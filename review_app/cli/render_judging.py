"""Judging reports as text for the terminal: the break-rate estimate, a comparison of
two runs, drift and certified routing. The services compute the reports; these only
format them (``--json`` prints the reports themselves)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a command imports only the service whose report it prints
    from review_app.services.judging.drift import DriftReport
    from review_app.services.judging.estimate import BreakRateEstimate
    from review_app.services.judging.judge_compare import RunComparison
    from review_app.services.judging.selective import RouteReport
    from review_app.stats.core import EstimateJson


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def estimate_headline(estimate: BreakRateEstimate) -> str:
    """``turn break rate 5.3% [4.2%, 6.5%], judge alone would say 4.1%``; with PPI's
    weight 0, the rate is the reviewers' and the line says so and why."""
    ppi = estimate["ppi"]
    line = f"{estimate['level']} break rate {_percent(ppi['value'])}"
    if ppi["ci95"]:
        line += f" [{_percent(ppi['ci95'][0])}, {_percent(ppi['ci95'][1])}]"
    if ppi["lambda"] == 0:
        line += (
            f": the reviewers' estimate from {estimate['n_gold']} gold {estimate['level']}s; "
            f"the judge gets no weight ({ppi.get('lambda_reason')})"
        )
    return line + f", judge alone would say {_percent(estimate['judge_only'])}"


def render_estimate(estimate: BreakRateEstimate) -> str:
    """The estimate as text for the terminal."""
    human = estimate["human_only"]
    lines = [
        estimate_headline(estimate),
        f"  run {estimate['run']['id']} ({estimate['run']['name']}): from "
        f"{estimate['n_judged']} judged {estimate['level']}s and {estimate['n_gold']} "
        f"with gold ({estimate['gold_source']}); PPI++ lambda "
        + ("—" if estimate["ppi"]["lambda"] is None else f"{estimate['ppi']['lambda']:.3f}"),
        f"  reviewers alone: {_percent(human['value'])}"
        + (
            f" [{_percent(human['ci95'][0])}, {_percent(human['ci95'][1])}]"
            if human["ci95"]
            else ""
        ),
    ]
    budget = estimate.get("budget") or {}
    if budget.get("more_audited_units_to_halve_width") is not None:
        lines.append(
            f"  budget: about {budget['more_audited_units_to_halve_width']} more audited "
            f"{estimate['level']}s would halve the interval's width"
        )
    elif budget.get("reason"):
        lines.append(f"  budget: {budget['reason']}")
    active = estimate.get("active")
    if active:
        line = f"  uncertainty draw: {_percent(active['value'])}"
        if active["ci95"]:
            line += f" [{_percent(active['ci95'][0])}, {_percent(active['ci95'][1])}]"
        lines.append(
            line + f" from {active['with_gold']} of {active['drawn']} drawn turns with gold"
        )
        widths = budget.get("uncertainty")
        width = None if widths is None else widths["width"]
        uniform = None if widths is None else widths["uniform_width"]
        if widths is not None and width is not None and uniform is not None:
            lines.append(
                f"  budget: with {widths['labels']} reviewer labels the uncertainty draw's "
                f"interval is {100 * width:.1f} points wide; a uniform draw of as "
                f"many would give about {100 * uniform:.1f}"
            )
    lines.extend(f"  {warning}" for warning in estimate["warnings"])
    return "\n".join(lines)


def _figure(estimate: EstimateJson, *, signed: bool = False) -> str:
    value, interval = estimate.get("value"), estimate.get("ci95")
    if value is None:
        return f"undefined ({estimate.get('reason')})"
    spec = "+.2f" if signed else ".2f"
    text = format(value + 0.0, spec)
    if interval:
        return f"{text} [{format(interval[0] + 0.0, spec)}, {format(interval[1] + 0.0, spec)}]"
    return f"{text} ({estimate.get('reason') or 'no interval'})"


def render_run_comparison(report: RunComparison) -> str:
    """The comparison as text: the verdict first (the very sentence of ``--json``'s
    ``verdict`` and of the page), the confound if any, then the figures behind it."""
    first, second = report["runs"]
    a, b = report["first"], report["second"]
    lines = [report["verdict"]]
    if report["confound"]:
        lines.append(report["confound"])
    lines += [
        "",
        f"{a} = run {first['id']}: {first['identity']}",
        f"{b} = run {second['id']}: {second['identity']}",
        f"pair: {report['pairing']}",
        f"units: {report['n_units']} with gold judged by both runs, in "
        f"{report['n_conversations']} conversations",
    ]
    source = report["gold_source"]
    lines.append(
        f"gold: {source['adjudicated']} adjudicated, {source['unanimous']} unanimous, "
        f"{source['in_audit_samples']} in audit samples ({source['note']})"
    )
    lines.append("")
    for name in (a, b):
        lines.append(
            f"{name}: kappa {_figure(report['kappa'][name])}, accuracy "
            f"{_figure(report['accuracy'][name])}"
        )
    lines.append(
        f"difference {b} - {a} (paired, cluster bootstrap over conversations, "
        f"{report['n_resamples']} resamples, seed {report['seed']}): kappa "
        f"{_figure(report['kappa_difference'], signed=True)}, accuracy "
        f"{_figure(report['accuracy_difference'], signed=True)}"
    )
    mcnemar = report["mcnemar"]
    lines.append(
        f"exact McNemar on break / no break: only {a} right on {mcnemar['only_first_right']}, "
        f"only {b} right on {mcnemar['only_second_right']} of {mcnemar['n']} units; "
        f"p = {mcnemar['p_value']:.4g}"
    )
    alt_test = report.get("alt_test")
    if alt_test:
        lines.append(
            f"alternative annotator test (on the {report['alt_test_units']} units both judged):"
        )
        for name in (a, b):
            lines.append(f"  {name}: {alt_test[name]['verdict']}")
    differing = report["differing"]
    lines.append("")
    lines.append(f"units where they differ: {len(differing)}")
    for item in differing[:50]:
        lines.append(
            f"  {item['case_id']} turn {item['turn']}: gold {item['gold']}; "
            f"{a} {item['first']['code']} ({item['first']['reason'] or 'no reason'}); "
            f"{b} {item['second']['code']} ({item['second']['reason'] or 'no reason'})"
        )
    if len(differing) > 50:
        lines.append(f"  ... and {len(differing) - 50} more (--json lists them all)")
    return "\n".join(lines)


def render_drift(report: DriftReport) -> str:
    """The drift report as text for the terminal."""

    def percent(value: float | None) -> str:
        return "—" if value is None else f"{100 * value:.1f}%"

    lines = [f"where the role breaks ({report['rubric']}), by answer position and role"]
    for source in report["sources"]:
        state = source.get("status")
        lines.append(
            f"{source['name']}"
            + (
                f" ({'stopped' if state == 'partial' else state})"
                if state not in (None, "complete")
                else ""
            )
            + f": {source['breaks']} breaks in {source['units']} turns of "
            f"{source['conversations']} conversations"
        )
        for row in source["by_position"]:
            ci = row["ci95"]
            lines.append(
                f"  answer {row['bin']:>5}: {percent(row['rate'])}"
                + (f" [{percent(ci[0])}, {percent(ci[1])}]" if ci else "")
                + f" of {row['units']}"
                + (f" ({row['reason']})" if row.get("reason") else "")
            )
        for role in source["by_role"]:
            lines.append(f"  role {role['role']}: {percent(role['rate'])} of {role['units']}")
        slope = source["slope"]
        if slope["odds_ratio"] is not None and slope["ci95"] is not None:
            low, high = slope["ci95"]
            lines.append(
                f"  break odds x{slope['odds_ratio']:.2f} per later answer [{low:.2f}, {high:.2f}]"
            )
        else:
            lines.append(f"  slope: {slope['reason']}")
    lines.extend(f"  {w}" for w in report["warnings"])
    return "\n".join(lines)


def render_route(report: RouteReport) -> str:
    """The routing report as text for the terminal."""
    coverage = report["coverage"]
    lines = [
        f"judge decides {report['decided_units']} of {report['judged_units']} turns "
        f"({'—' if coverage is None else f'{100 * coverage:.1f}%'}), escalates "
        f"{report['escalated_units']}; disagreement with gold ({report['on']}) at most "
        f"{report['alpha']} with probability {1 - report['delta']:.3g} "
        f"(gold: {report['gold_source']})",
    ]
    for run in report["runs"]:
        threshold = "none" if run["threshold"] is None else f"{run['threshold']:.3f}"
        bound = "—" if run["upper_bound"] is None else f"{run['upper_bound']:.3f}"
        lines.append(
            f"  run {run['run']}: threshold {threshold} on {run['calibration_units']} gold "
            f"units, kept {run['kept']} with {run['disagreements']} disagreements "
            f"(upper bound {bound}); decides {run['decided']}"
        )
    applied = report.get("applied")
    if applied:
        lines.append(
            f"  applied: {applied['certified']} verdicts marked certified; "
            f"{applied['escalated_cases']} cases queued"
            + (f": {applied['assignment']}" if applied["assignment"] else "")
        )
    lines.extend(f"  {w}" for w in report["warnings"])
    return "\n".join(lines)
