"""Test data written once: the shipped rubric's codes, label CSV files, and the keys the
reference promises in an agreement report and an evaluation result."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from review_app.rubrics.parsing import load_rubric_file
from review_app.services.exchange.labels_io import LABEL_COLUMNS

REPO = Path(__file__).resolve().parents[1]

# role-adherence@1: code -> verdict, from the rubric file itself
ROLE_ADHERENCE_VERDICTS: dict[str, str] = {
    label.code: label.verdict
    for label in load_rubric_file(REPO / "rubrics" / "role-adherence" / "v1.yaml").labels
}

# role-adherence@1's break codes, written out (an independent check on the rubric)
BREAK_CODES = (
    "persona_break",
    "scope_break",
    "authority_break",
    "tone_break",
    "out_of_role_mishandled",
    "false_action_claim",
)

# The top-level keys of an agreement report (``review-app agreement --json``).
AGREEMENT_REPORT_KEYS = {
    "rubric",
    "level",
    "units",
    "raters",
    "ratings",
    "percent_agreement",
    "krippendorff_alpha",
    "alpha_ci95",
    "fleiss_kappa",
    "gwet_ac1",
    "cohen_kappa",
    "per_label",
}

# The keys of an evaluation result (``evaluate_case``).
EVALUATION_RESULT_KEYS = {
    "case_id",
    "contract_version",
    "status",
    "fixture_errors",
    "violations",
    "first_violation",
    "role_by_turn",
    "harness_findings",
    "evaluator_version",
}


def write_label_csv(
    path: Path, rows: Sequence[Sequence[object]], header: Sequence[str] = LABEL_COLUMNS
) -> Path:
    """A labels CSV (``header``, then ``rows``) at ``path``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path
