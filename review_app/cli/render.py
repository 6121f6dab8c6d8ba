"""Plain-text and JSON renderings of a case view (for the terminal and for --json)."""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from review_app.services.cases.case_views import SHORT_HASH_CHARS, CaseView, TurnView
from review_app.stats.alt_test import ALT_TEST_SENTENCE

if TYPE_CHECKING:  # a command imports only the service whose report it prints
    from review_app.agreement.summary import PairKappaJson
    from review_app.calibration.like_for_like import LikeForLike
    from review_app.services.judging.judge_report import JudgeCalibrationReport
    from review_app.services.review.agreement_reports import AgreementReport
    from review_app.stats.alt_test import AltTestJson
    from review_app.stats.core import EstimateJson, UnitsEstimateJson


def case_view_dict(view: CaseView) -> dict[str, Any]:
    data = asdict(view)
    data["assistant_turns"] = view.assistant_turns
    return data


def harness_detail(finding: dict[str, Any]) -> str:
    """What a missing-context finding says, in one plain sentence (hashes shortened to
    their first 12 characters; the JSON keeps them whole)."""
    if finding["code"] == "request_missing_turns":
        return f"request omits turns {', '.join(map(str, finding['missing_turns']))}"
    if finding["code"] == "role_instruction_mismatch":
        return (
            "the request carried another role instruction than the contract's (hash "
            f"{str(finding['actual'])[:SHORT_HASH_CHARS]}, contract "
            f"{str(finding['expected'])[:SHORT_HASH_CHARS]})"
        )
    if "expected" in finding:
        return f"request has {finding['actual']}, contract has {finding['expected']}"
    return ""


def _finding_lines(turn: TurnView) -> list[str]:
    lines = []
    for v in turn.violations:
        lines.append(
            f"!! violation {v['code']}: {v['action']} is not allowed for {v['active_role']} "
            f"(allowed: {', '.join(v['allowed_actions']) or 'nothing'})"
        )
    for e in turn.fixture_errors:
        lines.append(f"!! invalid fixture {e['code']}: {e.get('message', '')}".rstrip(": "))
    for h in turn.harness_findings:
        lines.append(f"?? missing context {h['code']}: {harness_detail(h)}")
    if turn.role_change_claim:
        lines.append(
            "-- the user asks for a different role in text; ignored (only system events "
            "change the role)"
        )
    return lines


def render_case_text(view: CaseView, *, width: int = 100) -> str:
    out = [
        f"case {view.case_id}  contract {view.contract_version or '(none)'}  "
        f"lane {view.lane or '-'}  status {view.status or '-'}",
    ]
    if view.chatbot_role:
        out.extend(textwrap.wrap(f"role: {view.chatbot_role}", width))
    if view.diagnostic:
        out.append(view.diagnostic)
    for finding in view.case_findings:
        out.append(f"!! {finding['code']}: {finding.get('message', '')}")
    out.append("")
    for turn in view.turns:
        if turn.set_role is not None:
            label = (
                "trusted role transition"
                if turn.transition == "trusted"
                else "IGNORED role change (not a trusted transition)"
            )
            out.append(
                f"---- turn {turn.turn} {turn.actor}: role -> {turn.set_role} ({label}) ----"
            )
        head = f"turn {turn.turn:<4} {turn.actor:<9} [{turn.active_role or '-'}]"
        if turn.actions:
            head += f"  actions: {', '.join(turn.actions)}"
        out.append(head)
        if turn.text:
            for paragraph in turn.text.splitlines() or [""]:
                out.extend(
                    textwrap.wrap(
                        paragraph,
                        width,
                        initial_indent="      ",
                        subsequent_indent="      ",
                        drop_whitespace=False,
                    )
                    or [""]
                )
        out.extend(f"      {line}" for line in _finding_lines(turn))
    return "\n".join(out)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _coefficient_line(name: str, coefficient: UnitsEstimateJson, indent: int = 0) -> str:
    label = " " * indent + name
    value = _number(coefficient.get("value"))
    ci = coefficient.get("ci95")
    interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    line = f"{label:<36} {value:>7}  {interval:<17} {coefficient.get('n_units', 0):>7}"
    note = coefficient.get("reason") or coefficient.get("warning")
    return f"{line}  {note}" if note else line


def _kappa_method_lines(pairs: dict[str, PairKappaJson]) -> list[str]:
    """How the pairs' intervals were made (the pairs named only when methods differ)."""
    by_method: dict[str, list[str]] = {}
    for pair, coefficient in sorted(pairs.items()):
        method = coefficient["method"]
        if coefficient["ci95"] and method:
            by_method.setdefault(method, []).append(pair)
    if len(by_method) == 1:
        return [f"kappa's intervals: {next(iter(by_method))}"]
    return [
        f"kappa's intervals: {method} ({', '.join(names)})"
        for method, names in sorted(by_method.items())
    ]


def render_agreement_text(report: AgreementReport) -> str:
    """The agreement report as a table for the terminal."""
    out = [
        f"agreement on {report['rubric']}: {report['units']} units, {report['raters']} raters, "
        f"{report['ratings']} ratings",
        f"{'':<36} {'value':>7}  {'95% CI':<17} {'units':>7}",
        _coefficient_line("percent agreement", report["percent_agreement"]),
        _coefficient_line("Krippendorff's alpha (codes)", report["krippendorff_alpha"]),
        _coefficient_line("alpha, break / no break", report["alpha_break"]),
        _coefficient_line("alpha, verdict", report["alpha_verdict"]),
        _coefficient_line("Fleiss' kappa (all raters)", report["fleiss_kappa"]),
        _coefficient_line("Gwet's AC1", report["gwet_ac1"]),
    ]
    method = (report.get("bootstrap") or {}).get("method")
    if method and report.get("alpha_ci95"):
        out.append(f"alpha's interval: {method}")
    if report.get("carried_units"):
        out.append(f"{report['carried_units']} units hold labels carried from the version before")
    versions = report.get("versions")
    if versions:
        out.append(f"versions side by side, on the {versions['units']} units both have")
        for compared in versions["compared"]:
            out.append(
                _coefficient_line(
                    f"{compared['rubric']} alpha", compared["krippendorff_alpha"], indent=2
                )
            )
            out.append(
                _coefficient_line(
                    f"{compared['rubric']} percent agreement",
                    compared["percent_agreement"],
                    indent=2,
                )
            )
    if report["cohen_kappa"]:
        out.append("Cohen's kappa, per pair of reviewers")
        for pair, coefficient in sorted(report["cohen_kappa"].items()):
            out.append(_coefficient_line(pair, coefficient, indent=2))
        out.extend(_kappa_method_lines(report["cohen_kappa"]))
    if report["per_label"]:
        out.append("per label (one-vs-rest alpha)")
        for code, alpha in sorted(report["per_label"].items()):
            out.append(_coefficient_line(str(code), alpha, indent=2))
    conversation = report.get("conversation") or {}
    if conversation:
        first = conversation.get("first_break_agreement") or {}
        out.append("conversation level")
        rate = first.get("value")
        out.append(
            f"  {'first break turn, exact match':<34} {_number(rate):>7}  "
            f"{'':<17} {first.get('n_pairs', 0):>7} rater pairs"
        )
        if conversation.get("any_break_alpha"):
            out.append(_coefficient_line("any break (alpha)", conversation["any_break_alpha"], 2))
    gold = report.get("gold")
    if gold:
        out.append(
            f"gold labels: {gold['with_gold']} units ({gold['adjudicated']} adjudicated, "
            f"{gold['unanimous']} unanimous); without: {gold['in_disagreement']} in "
            f"disagreement, {gold['single_rater']} with a single rater"
        )
    for warning in report.get("warnings", []):
        out.append(f"warning: {warning}")
    return "\n".join(out)


def _estimate_line(name: str, estimate: EstimateJson | None, indent: int = 2) -> str:
    if estimate is None:
        return f"{' ' * indent}{name:<30} {'—':>7}"
    value = _number(estimate.get("value"))
    ci = estimate.get("ci95")
    interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    line = f"{' ' * indent}{name:<30} {value:>7}  {interval:<17} {estimate.get('n', 0):>6}"
    if estimate.get("reason"):
        line += f"  {estimate['reason']}"
    return line


def render_alt_test(alt: AltTestJson) -> list[str]:
    """The alt-test headline, its one-sentence explanation and the per-reviewer table."""
    rate, advantage = alt.get("winning_rate"), alt.get("advantage_probability")
    head = f"  may the judge replace a reviewer? {alt.get('verdict', 'not tested')}"
    if rate is not None:
        head += f" (winning rate {rate:.2f}, advantage probability {_number(advantage)}"
        head += f", epsilon {alt['epsilon']:.2f}, q {alt['q']:.2f})"
    lines = [head, f"    {ALT_TEST_SENTENCE}"]
    if alt.get("reason"):
        lines.append(f"    {alt['reason']}")
    if alt.get("reviewers"):
        lines.append(
            f"    {'reviewer':<20} {'units':>6} {'p-value':>9} {'rejected':>9} {'adv.':>6}"
        )
        for row in alt["reviewers"]:
            p = row.get("p_value")
            lines.append(
                f"    {row['reviewer']:<20} {row['units']:>6} "
                f"{'-' if p is None else format(p, '.4f'):>9} "
                f"{'yes' if row['rejected'] else 'no':>9} {row['advantage_probability']:>6.2f}"
            )
    for skipped in alt.get("skipped", []):
        lines.append(f"    skipped {skipped['reviewer']}: {skipped['reason']}")
    return lines


def _like_for_like_lines(like: LikeForLike) -> list[str]:
    lines = []
    for pair in like.get("pairs", []):
        a, b = pair["reviewers"]
        judge = pair["judge_kappa"]
        lines.append(
            f"  same {pair['units']} units: kappa {a}|{b} "
            f"{_number(pair['reviewer_kappa'].get('value'))}; judge|{a} "
            f"{_number(judge[a].get('value'))}, judge|{b} {_number(judge[b].get('value'))}"
        )
    for row in like.get("leave_one_out_gold", []):
        lines.append(
            f"  leave-one-out gold for {row['reviewer']} ({row['units']} units, "
            f"{row['gold_source']}): reviewer kappa "
            f"{_number(row['reviewer_kappa'].get('value'))}, judge kappa "
            f"{_number(row['judge_kappa'].get('value'))}"
        )
    return lines


AGAINST_GOLD: tuple[
    tuple[Literal["kappa", "accuracy", "break_kappa", "precision", "recall", "f1", "tnr"], str],
    ...,
] = (
    ("kappa", "Cohen's kappa (codes)"),
    ("accuracy", "accuracy (codes)"),
    ("break_kappa", "kappa (break / no break)"),
    ("precision", "precision (break)"),
    ("recall", "recall = TPR"),
    ("f1", "F1 (break)"),
    ("tnr", "TNR"),
)
"""The figures against gold that ``judge report`` prints, with their names."""


def render_judge_report(report: JudgeCalibrationReport) -> str:
    """The judge calibration report as text for the terminal."""
    gold = report["gold"]
    out = [
        f"judge calibration on {report['rubric']}: gold labels on {gold['with_gold']} units "
        f"({gold['adjudicated']} adjudicated, {gold['unanimous']} unanimous); without gold: "
        f"{gold['in_disagreement']} in disagreement, {gold['single_rater']} single rater",
    ]
    if not report["runs"]:
        out.append("no judge runs for this rubric version")
    for run in report["runs"]:
        out.append("")
        out.append(
            f"run {run['id']} {run['name']} ({run['source']}): {run['turn_verdicts']} turn "
            f"verdicts, {run['conversation_verdicts']} conversation verdicts, "
            f"{run['errors']} errors"
        )
        alt = run.get("alt_test")
        if alt:
            out.extend(render_alt_test(alt))
        vs_gold = run.get("vs_gold")
        if vs_gold is None:
            out.append("  no labels to compare with gold")
            continue
        source = run.get("gold_source") or {}
        out.append(
            f"  against gold ({source.get('adjudicated', 0)} adjudicated, "
            f"{source.get('unanimous', 0)} unanimous units; not a random sample); turn-level "
            "intervals resample conversations, proportions use Wilson intervals"
        )
        out.append(f"  {'against gold':<30} {'value':>7}  {'95% CI':<17} {'units':>6}")
        for key, name in AGAINST_GOLD:
            out.append(_estimate_line(name, vs_gold.get(key)))
        out.extend(_like_for_like_lines(run.get("like_for_like") or {}))
        first = run.get("first_break")
        if first:
            exact = first.get("exact_match") or {}
            offset = first.get("mean_offset") or {}
            out.append(
                f"  first break turn: exact match {_number(exact.get('value'))} over "
                f"{exact.get('n', 0)} conversations; mean offset "
                f"{_number(offset.get('value'))}"
            )
        scores = run.get("scores")
        if scores:
            best = next((p for p in scores["sweep"]["points"] if p.get("is_best")), None)
            if best:
                out.append(
                    f"  best threshold {best['threshold']:.2f}: kappa "
                    f"{_number(best.get('kappa'))}, F1 {_number(best.get('f1'))}"
                )
            elif scores["sweep"].get("best_reason"):
                out.append(f"  no best threshold: {scores['sweep']['best_reason']}")
            reliability = scores["reliability"]
            out.append(
                f"  scores: Brier {_number(reliability.get('brier_score'))}, ECE "
                f"{_number(reliability.get('expected_calibration_error'))} over {scores['n']} units"
                + ("; calibration map stored" if scores.get("calibration_map") else "")
            )
        reviewers = run.get("vs_reviewers") or {}
        if reviewers:
            parts = [
                f"{name} {_number((r.get('kappa') or {}).get('value'))}"
                for name, r in sorted(reviewers.items())
            ]
            out.append("  kappa against each reviewer: " + ", ".join(parts))
        kinds: dict[str, int] = {}
        for item in run.get("disagreements", []):
            kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
        if kinds:
            out.append(
                "  disagreements with gold: "
                + ", ".join(
                    f"{kind.replace('_', ' ')} {count}" for kind, count in sorted(kinds.items())
                )
            )
        for warning in vs_gold.get("warnings", []):
            out.append(f"  warning: {warning}")
    versions = report.get("versions")
    if versions:
        out.append("")
        out.append(
            f"prompt versions differ on {len(versions.get('differences', []))} of "
            f"{versions.get('n_shared', 0)} shared units"
        )
    return "\n".join(out)
