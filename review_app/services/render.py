"""Plain-text and JSON renderings of a case view (for the terminal and for --json)."""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from typing import Any

from review_app.services.cases import CaseView, TurnView


def case_view_dict(view: CaseView) -> dict[str, Any]:
    data = asdict(view)
    data["assistant_turns"] = view.assistant_turns
    return data


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
        detail = ""
        if h["code"] == "request_missing_turns":
            detail = f"request omits turns {', '.join(map(str, h['missing_turns']))}"
        elif "expected" in h:
            detail = f"request has {h['actual']}, contract has {h['expected']}"
        lines.append(f"?? missing context {h['code']}: {detail}")
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
