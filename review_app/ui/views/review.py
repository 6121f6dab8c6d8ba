"""Review: one conversation turn by turn, findings pre-marked, labels per assistant turn.

``review?case=<case_id>`` opens a case directly. Keyboard: 1-9 label the focused
turn, J / K move to the next / previous turn, N opens the next case in the queue.
"""

from __future__ import annotations

import streamlit as st

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.services.cases import CaseView, TurnView
from review_app.services.labeling import (
    MAX_RATIONALE_CHARS,
    CaseLabels,
    case_labels,
    record_label,
)
from review_app.services.queue import next_case
from review_app.ui import state
from review_app.ui.safe import code_list, code_span

AVATARS = {
    "user": "user",
    "assistant": "assistant",
    "system": ":material/settings:",
    "tool": ":material/build:",
}
# Material icons come with Streamlit's own font; emoji need a colour-emoji font that
# many Linux desktops (and headless browsers) lack, and then show as empty boxes.
VERDICT_ICONS = {
    "pass": ":material/check_circle:",
    "fail": ":material/block:",
    "borderline": ":material/balance:",
    "abstain": ":material/help:",
}

actor = state.actor()
rubric = state.rubric_selector()
case_id: str = st.query_params.get("case") or ""

if not case_id:
    st.title("Review")
    st.write("Open a case from your queue, or type its id.")
    st.text_input("Case id", key="jump_case")
    if st.session_state["jump_case"]:
        st.query_params["case"] = st.session_state["jump_case"].strip()
        st.rerun()
    st.stop()

try:
    view: CaseView = state.case_view(case_id)
except (NotFound, PermissionDenied) as error:
    st.title("Review")
    st.error(str(error))
    st.stop()

labels: CaseLabels | None = (
    case_labels(state.engine(), actor, case_id=case_id, rubric=rubric) if rubric else None
)
labelable = [t for t in view.turns if rubric and t.actor == rubric.applies_to]
labelable_turns = [t.turn for t in labelable]


def _first_unlabeled(after: int | None = None) -> int | None:
    mine = labels.mine if labels else {}
    ordered = labelable_turns
    if after is not None and after in ordered:
        start = ordered.index(after) + 1
        ordered = ordered[start:] + ordered[:start]
    return next((t for t in ordered if t not in mine), None)


focus = st.session_state["focus"]
if not focus or focus.get("case") != case_id or focus.get("turn") not in labelable_turns:
    first = _first_unlabeled()
    if first is None and labelable_turns:
        first = labelable_turns[0]  # everything labeled: start at the top
    focus = {"case": case_id, "turn": first}
    st.session_state["focus"] = focus
focus_turn: int | None = focus["turn"]


def _move_focus(step: int) -> None:
    if focus_turn is None or not labelable_turns:
        return
    index = labelable_turns.index(focus_turn)
    target = labelable_turns[max(0, min(len(labelable_turns) - 1, index + step))]
    st.session_state["focus"] = {"case": case_id, "turn": target}


def _save(code: str) -> None:
    assert rubric is not None and focus_turn is not None
    rationale = st.session_state.get(f"rationale_{case_id}_{focus_turn}", "")
    try:
        saved = record_label(
            state.engine(),
            actor,
            case_id=case_id,
            turn=focus_turn,
            rubric=rubric,
            code=code,
            rationale=rationale,
        )
    except (InputError, NotFound) as error:
        state.flash(f"Not saved: {error}")
        return
    state.flash(f"Turn {saved.turn}: {saved.code} ({saved.labeled_turns}/{saved.total_turns})")
    following = _first_unlabeled(after=focus_turn)
    if following is not None and following != focus_turn:
        st.session_state["focus"] = {"case": case_id, "turn": following}


def _open_next_case() -> None:
    if rubric is None:
        return
    following = next_case(state.engine(), actor, rubric=rubric, after=case_id)
    if following is None:
        state.flash("No unfinished case left in your queue.")
        return
    st.query_params["case"] = following
    st.session_state["focus"] = None


# --- sidebar: the labeling panel -------------------------------------------------------

with st.sidebar:
    if rubric is None or not labelable:
        st.caption("Nothing to label in this case.")
    else:
        assert labels is not None and focus_turn is not None
        st.subheader(f"Turn {focus_turn}")
        st.session_state["focus_turn"] = focus_turn
        labeled_by_me = set(labels.mine)
        st.selectbox(
            "Turn to label",
            list[int](labelable_turns),
            key="focus_turn",
            format_func=lambda t: f"turn {t}" + (" ✓" if t in labeled_by_me else ""),
            on_change=lambda: st.session_state.update(
                focus={"case": case_id, "turn": st.session_state["focus_turn"]}
            ),
        )
        st.progress(
            labels.labeled_turns / labels.total_turns if labels.total_turns else 0.0,
            text=f"{labels.labeled_turns} of {labels.total_turns} turns labeled by you",
        )
        focused = next(t for t in labelable if t.turn == focus_turn)
        if focused.text:
            st.text(focused.text[:1200] + ("…" if len(focused.text) > 1200 else ""))
        current = labels.mine.get(focus_turn)
        for number, label in enumerate(rubric.labels, start=1):
            chosen = current is not None and current.code == label.code
            st.button(
                label.code,
                key=f"label_{label.code}",
                icon=VERDICT_ICONS.get(label.verdict),
                shortcut=str(number) if number <= 9 else None,
                type="primary" if chosen else "secondary",
                help=label.title,
                on_click=_save,
                args=(label.code,),
                width="stretch",
            )
        # Starts from the current label's rationale, so changing only the code keeps it.
        st.text_input(
            "Rationale (optional; type it, then choose the label)",
            value=current.rationale if current is not None and current.rationale else "",
            max_chars=MAX_RATIONALE_CHARS,
            key=f"rationale_{case_id}_{focus_turn}",
        )
        previous_col, next_col = st.columns(2)
        previous_col.button(
            "◀ Turn",
            key="focus_previous",
            shortcut="K",
            on_click=_move_focus,
            args=(-1,),
            width="stretch",
        )
        next_col.button(
            "Turn ▶",
            key="focus_next",
            shortcut="J",
            on_click=_move_focus,
            args=(1,),
            width="stretch",
        )
    st.button(
        "Next case ⏭", key="next_case", shortcut="N", on_click=_open_next_case, width="stretch"
    )


# --- main: header and transcript ----------------------------------------------------------

st.title(f"Review · {case_id}")
meta = [
    f"contract {code_span(view.contract_version or 'none')}",
    f"lane {code_span(view.lane or '-')}",
    f"evaluator v{view.evaluator_version}",
]
st.caption(" · ".join(meta))
if view.diagnostic:
    st.code(view.diagnostic, language=None)
if view.chatbot_role:
    st.caption("Role given to the assistant")
    st.text(view.chatbot_role)
if view.contract is None:
    st.info("No contract: semantic review only (no deterministic findings for this case).")
for finding in view.case_findings:
    st.warning(f"Invalid fixture {code_span(finding['code'])}: contract problem")
    if finding.get("message"):
        st.text(finding["message"])
if labels is not None:
    if labels.blind:
        st.caption("Other reviewers' labels stay hidden until you have labeled every turn.")
    elif labels.other_reviewers:
        st.caption("You have labeled every turn: other reviewers' labels are shown.")

transcript, reference = st.columns([3, 2])


def _finding_marks(turn: TurnView) -> None:
    for violation in turn.violations:
        st.error(
            f"**Violation** {code_span(violation['code'])}: action "
            f"{code_span(violation['action'])} is outside role "
            f"{code_span(violation['active_role'])}; allowed: "
            f"{code_list(violation['allowed_actions'])}",
            icon=":material/block:",
        )
    for error in turn.fixture_errors:
        st.warning(f"**Invalid fixture** {code_span(error['code'])}", icon=":material/warning:")
        if error.get("message"):
            st.text(error["message"])
    for finding in turn.harness_findings:
        detail = ""
        if finding["code"] == "request_missing_turns":
            detail = " · request omits turns " + ", ".join(map(str, finding["missing_turns"]))
        elif "expected" in finding:
            detail = (
                f" · request {code_span(finding['actual'])}, contract "
                f"{code_span(finding['expected'])}"
            )
        st.info(
            f"**Missing context** {code_span(finding['code'])}{detail}", icon=":material/link_off:"
        )
    if turn.role_change_claim:
        st.caption(
            "The user asks for a different role in text: ignored (only trusted system "
            "events change the role)."
        )


def _label_line(turn: TurnView) -> str | None:
    """The line with the reviewer's label of a labelable turn (and others' once not blind)."""
    if labels is None or turn.turn not in labelable_turns:
        return None
    mine = labels.mine.get(turn.turn)
    history = labels.my_history.get(turn.turn, [])
    line = f"Your label: {code_span(mine.code) if mine else '—'}"
    earlier = [h for h in history if not h.current]
    if earlier:
        line += " (was " + " → ".join(code_span(h.code) for h in earlier) + ")"
    if turn.turn in labels.needs_relabeling:
        line += " · **needs relabeling**: the conversation changed since you labeled it"
    if labels.others is not None:
        others = labels.others.get(turn.turn, [])
        if others:
            line += " · others: " + ", ".join(
                f"{code_span(o.reviewer)} {code_span(o.code)}" for o in others
            )
    return line


def _header(turn: TurnView) -> str:
    """One caption per turn (each element costs rerun time): who, role, actions, labels."""
    parts = [
        f"turn {turn.turn} · {code_span(turn.actor)} · role {code_span(turn.active_role or '-')}"
    ]
    if turn.actions:
        parts.append("actions " + code_list(turn.actions))
    if turn.turn == focus_turn:
        parts.append("**labeling**")
    header = " · ".join(parts)
    label_line = _label_line(turn)
    return header if label_line is None else f"{header}  \n{label_line}"


def _label_controls(turn: TurnView) -> None:
    if labels is None or turn.turn not in labelable_turns:
        return
    mine = labels.mine.get(turn.turn)
    if mine and mine.rationale:
        st.text(f"Your rationale: {mine.rationale}")


with transcript:
    for turn in view.turns:
        if turn.set_role is not None:
            if turn.transition == "trusted":
                st.divider()
                st.caption(
                    f"Trusted role transition → {code_span(turn.set_role)} "
                    f"(system event, turn {turn.turn})"
                )
            else:
                st.warning(
                    f"Ignored role change to {code_span(turn.set_role)} at turn "
                    f"{turn.turn}: a {code_span(turn.actor)} event is not a trusted "
                    "transition",
                    icon=":material/gpp_bad:",
                )
        with st.chat_message(turn.actor, avatar=AVATARS.get(turn.actor)):
            st.caption(_header(turn))
            if turn.text:
                st.text(turn.text)
            _finding_marks(turn)
            _label_controls(turn)

with reference:
    if rubric is not None:
        st.subheader(f"Rubric {rubric.ref}")
        # One label at a time: everything on this page is drawn again at every rerun.
        if st.session_state["reference_code"] not in rubric.codes:
            st.session_state["reference_code"] = rubric.codes[0]
        verdicts = {label.code: label.verdict for label in rubric.labels}
        st.selectbox(
            "Definition of",
            list[str](rubric.codes),
            key="reference_code",
            format_func=lambda code: f"{code} · {verdicts[code]}",
        )
        label = rubric.label(st.session_state["reference_code"])
        blocks = [label.title, label.definition]
        if label.guidance:
            blocks.append(label.guidance)
        blocks.extend(
            f"[{example.kind} example]\n{example.context}\n→ {example.reply}\n({example.why})"
            for example in rubric.examples_for(label.code)
        )
        st.text("\n\n".join(blocks))
        st.page_link(state.page("rubrics"), label="All examples and versions")
