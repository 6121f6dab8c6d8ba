"""Labeled regression fixtures for CI: one JSON case per file plus an ``expected`` block,
a generated pytest module that replays them, and a manifest with honest denominators.

Pure: builds file contents from plain data; the export service gathers the data
and writes the files. Everything is deterministic: the same data gives the same
bytes (sorted keys, stable order, no timestamps).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from review_app.case_records import EXPECTED_BLOCK
from review_app.evaluator import EVALUATOR_VERSION, diagnostic, evaluate_case
from review_app.files.discovery import EXPORT_MANIFEST_NAME, EXPORTER_NAME
from review_app.version import VERSION

EXPORTER_VERSION = f"{EXPORTER_NAME} {VERSION} / fixtures 1"
TEST_MODULE_NAME = "test_role_fixtures.py"
MANIFEST_NAME = EXPORT_MANIFEST_NAME
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def fixture_file_name(case_id: str, *, hashed: bool = False) -> str:
    """A file name for a case id: the id itself when safe, else a cleaned id plus a hash."""
    cleaned = _SAFE_NAME.sub("_", case_id)
    if hashed or cleaned != case_id or cleaned.startswith("."):
        digest = hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:10]
        cleaned = f"{cleaned.lstrip('.')[:150]}-{digest}"
    return f"{cleaned}.json"


def fixture_file_names(case_ids: Iterable[str]) -> dict[str, str]:
    """File names for the cases of one export: distinct from each other and from the
    manifest even where letter case does not count (macOS and Windows file systems).

    A case id whose plain name would clash (``manifest``, or ``Refund-A`` beside
    ``refund-a``) gets the hashed name instead, so no fixture silently replaces another.
    """
    plain = {case_id: fixture_file_name(case_id) for case_id in case_ids}
    clashes = Counter(name.casefold() for name in plain.values())
    taken = {MANIFEST_NAME.casefold()}
    return {
        case_id: fixture_file_name(case_id, hashed=True)
        if clashes[name.casefold()] > 1 or name.casefold() in taken
        else name
        for case_id, name in plain.items()
    }


def redact_text(text: str) -> str:
    """Masked transcript text: its length and a hash, so identity can still be checked."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"[redacted: {len(text)} characters, sha256 {digest}]"


def redact_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """The case with every event text masked; events, actions and roles kept."""
    copy = dict(case)
    copy["transcript"] = [
        {**event, "text": redact_text(event["text"])} if event.get("text") else dict(event)
        for event in case["transcript"]
    ]
    return copy


@dataclass(frozen=True)
class SemanticLabel:
    turn: int
    code: str
    source: str
    """``adjudicated`` or ``unanimous``."""


@dataclass
class CaseExport:
    """What the exporter needs of one case."""

    case: dict[str, Any]
    """The shape of docs/reference.md, "Cases": case_id, chatbot_role, contract, transcript."""
    gold: list[SemanticLabel] = field(default_factory=list)
    units_without_gold: dict[int, str] = field(default_factory=dict)
    """turn -> why (``in_disagreement``, ``single_rater``, ``unlabeled``)."""


def expected_block(
    export: CaseExport, *, rubric_ref: str, break_codes: Iterable[str]
) -> dict[str, Any]:
    result = evaluate_case(export.case)
    breaks = set(break_codes)
    first_break = next(
        (label.turn for label in sorted(export.gold, key=lambda g: g.turn) if label.code in breaks),
        None,
    )
    violation = result["first_violation"]
    return {
        "deterministic": {
            "status": result["status"],
            "first_violation_turn": violation["turn"] if violation else None,
            "fixture_error_codes": sorted({e["code"] for e in result["fixture_errors"]}),
            "violation_codes": sorted({v["code"] for v in result["violations"]}),
            "harness_codes": sorted({h["code"] for h in result["harness_findings"]}),
            "diagnostic": diagnostic(result),
        },
        "semantic": {
            "rubric": rubric_ref,
            "labels": {
                str(label.turn): {"label": label.code, "source": label.source}
                for label in sorted(export.gold, key=lambda g: g.turn)
            },
            "first_break_turn": first_break,
            "units_without_gold": {
                str(turn): why for turn, why in sorted(export.units_without_gold.items())
            },
        },
        "contract_version": result["contract_version"],
        "rubric": rubric_ref,
        "evaluator_version": EVALUATOR_VERSION,
        "exporter": EXPORTER_VERSION,
    }


def fixture_document(
    export: CaseExport, *, rubric_ref: str, break_codes: Iterable[str], redact: bool
) -> dict[str, Any]:
    case = redact_case(export.case) if redact else dict(export.case)
    expected = expected_block(export, rubric_ref=rubric_ref, break_codes=break_codes)
    if redact:
        expected["redacted"] = True
    return {**case, EXPECTED_BLOCK: expected}


def _transitions(case: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """Roles active somewhere in the case, and trusted transitions ``from->to``."""
    contract = case.get("contract") or {}
    roles_used: set[str] = set()
    transitions: set[str] = set()
    result = evaluate_case(case)
    if result["status"] == "invalid":
        return roles_used, transitions
    active = contract.get("initial_role")
    roles_used.update(r for r in result["role_by_turn"].values() if r)
    for event in case["transcript"]:
        new_role = event.get("set_role")
        if new_role and event.get("actor") == "system" and new_role != active:
            transitions.add(f"{active}->{new_role}")
            active = new_role
    return roles_used, transitions


def manifest(
    exports: list[CaseExport],
    *,
    rubric_ref: str,
    break_codes: Iterable[str],
    redact: bool,
    data_format: str,
) -> dict[str, Any]:
    """Counts a reader of the fixtures needs: what is covered, what is not, and why."""
    statuses: Counter[str] = Counter()
    invalid: list[str] = []
    no_contract: list[str] = []
    without_gold: Counter[str] = Counter()
    gold_sources: Counter[str] = Counter()
    by_contract: dict[str, dict[str, Any]] = {}
    breaks = set(break_codes)
    semantic_breaks = 0
    for export in exports:
        case = export.case
        result = evaluate_case(case)
        statuses[result["status"]] += 1
        if result["status"] == "invalid":
            invalid.append(case["case_id"])
        if result["status"] == "no_contract":
            no_contract.append(case["case_id"])
        for why in export.units_without_gold.values():
            without_gold[why] += 1
        for label in export.gold:
            gold_sources[label.source] += 1
        semantic_breaks += any(label.code in breaks for label in export.gold)
        contract = case.get("contract")
        if not contract:
            continue
        entry = by_contract.setdefault(
            contract["version"],
            {
                "roles": sorted(contract.get("roles", {})),
                "roles_covered": set(),
                "transitions_covered": set(),
                "cases": 0,
            },
        )
        entry["cases"] += 1
        roles, transitions = _transitions(case)
        entry["roles_covered"].update(roles)
        entry["transitions_covered"].update(transitions)
    contracts = {}
    for version, entry in sorted(by_contract.items()):
        covered = sorted(entry["roles_covered"])
        entered = {t.split("->", 1)[1] for t in entry["transitions_covered"]}
        contracts[version] = {
            "cases": entry["cases"],
            "roles": entry["roles"],
            "roles_covered": covered,
            "roles_not_covered": sorted(set(entry["roles"]) - set(covered)),
            "transitions_covered": sorted(entry["transitions_covered"]),
            "roles_never_entered_by_a_transition": sorted(set(entry["roles"]) - entered),
        }
    units_with_gold = sum(gold_sources.values())
    return {
        "exporter": EXPORTER_VERSION,
        "format": data_format,
        "rubric": rubric_ref,
        "evaluator_version": EVALUATOR_VERSION,
        "redacted": redact,
        "cases_exported": len(exports),
        "deterministic": {
            "pass": statuses["pass"],
            "fail": statuses["fail"],
            "invalid_fixtures": statuses["invalid"],
            "no_contract": statuses["no_contract"],
            "invalid_case_ids": sorted(invalid),
            "no_contract_case_ids": sorted(no_contract),
        },
        "semantic": {
            "units": units_with_gold + sum(without_gold.values()),
            "units_with_gold": units_with_gold,
            "gold_adjudicated": gold_sources["adjudicated"],
            "gold_unanimous": gold_sources["unanimous"],
            "units_without_gold": sum(without_gold.values()),
            "without_gold_in_disagreement": without_gold["in_disagreement"],
            "without_gold_single_rater": without_gold["single_rater"],
            "without_gold_unlabeled": without_gold["unlabeled"],
            "cases_with_a_semantic_break": semantic_breaks,
        },
        "contracts": contracts,
        "note": (
            "Passing these fixtures says the listed cases replay as recorded; it says nothing "
            "about roles, transitions or units listed as not covered or without gold."
        ),
    }


TEST_MODULE = '''"""Replays Role Review regression fixtures through the deterministic evaluator.

Generated by {exporter} for {rubric}. Every *.json file beside this module is a
case (docs/reference.md, "Cases") with an "expected" block; the test re-evaluates the case and
checks the deterministic result still matches. Run: python -m pytest {module}
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from review_app.evaluator import diagnostic, evaluate_case

HERE = Path(__file__).resolve().parent
FIXTURES = sorted(p for p in HERE.glob("*.json") if p.name != "{manifest}")


def _load(path):
    document = json.loads(path.read_text(encoding="utf-8"))
    expected = document.pop("expected")
    return document, expected


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_replays(path):
    case, expected = _load(path)
    result = evaluate_case(case)
    wanted = expected["deterministic"]
    first = result["first_violation"]
    actual = {{
        "status": result["status"],
        "first_violation_turn": first["turn"] if first else None,
        "fixture_error_codes": sorted({{e["code"] for e in result["fixture_errors"]}}),
        "violation_codes": sorted({{v["code"] for v in result["violations"]}}),
        "harness_codes": sorted({{h["code"] for h in result["harness_findings"]}}),
    }}
    expected_subset = {{key: wanted[key] for key in actual}}
    assert actual == expected_subset, (
        f"{{path.name}}: now {{diagnostic(result)}}; expected {{wanted['diagnostic']}}"
    )
'''


def pytest_module_text(*, rubric_ref: str) -> str:
    return TEST_MODULE.format(
        exporter=EXPORTER_VERSION,
        rubric=rubric_ref,
        module=TEST_MODULE_NAME,
        manifest=MANIFEST_NAME,
    )
