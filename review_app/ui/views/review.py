"""Review: one conversation turn by turn, findings pre-marked, labels per assistant turn.

``review?case=<case_id>`` opens a case directly. Keyboard (caught in the browser by
the labeling panel, :mod:`review_app.ui.keys.panel`): the key beside a code (the version's
key map, docs/reference.md "Label keys") labels the focused turn and moves to the next
unlabeled one, J / K move to the next / previous turn, R opens the rationale of the
focused turn (Enter keeps it), N opens the next case in the queue. Each label key is
queued in the browser with the turn focused when it was pressed and stored here once,
in order. A turn awaiting re-review says so beside itself, with its old label.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from review_app.errors import DatabaseBusy, InputError, NotFound, PermissionDenied
from review_app.services.cases.case_views import SHORT_HASH_CHARS, CaseView, TurnView
from review_app.services.cases.case_window import WINDOW_EVENTS, TurnWindow, turn_window
from review_app.services.judging.selective import certified_verdicts
from review_app.services.labels.key_events import apply_key_events, parse_key_events
from review_app.services.labels.labeling import CaseLabels, case_labels
from review_app.services.rubrics.rubric_carry import ReReviewItem, re_review_queue
from review_app.services.rubrics.rubric_keys import key_map_for
from review_app.services.team.queue import next_case
from review_app.ui import cached, common, registry, session
from review_app.ui.keys import panel
from review_app.ui.safe import code_list, code_span, error_text, escape

AVATARS = {
    "user": "user",
    "assistant": "assistant",
    "system": ":material/settings:",
    "tool": ":material/build:",
}

actor = session.actor()
rubric = common.rubric_selector()
case_id: str = st.query_params.get("case") or ""
if not case_id and st.session_state["focus"]:
    # The sidebar's "Review" link carries no case: reopen the one being reviewed.
    case_id = st.session_state["focus"]["case"]
    st.query_params["case"] = case_id

if not case_id:
    st.title("Review")
    st.write("Open a case from your queue, or type its id.")
    st.text_input("Case id", key="jump_case")
    if st.session_state["jump_case"]:
        st.query_params["case"] = st.session_state["jump_case"].strip()
        st.rerun()
    st.stop()

try:
    view: CaseView = cached.case_view(case_id)
except (NotFound, PermissionDenied) as error:
    st.title("Review")
    st.error(error_text(error))
    st.session_state["focus"] = None
    st.stop()
case_id = view.case_id  # as stored (the address's id went through the id rules)

labelable = [t for t in view.turns if rubric and t.actor == rubric.applies_to]
labelable_turns = [t.turn for t in labelable]
rubric_catalog = cached.catalog()
label_keys = key_map_for(rubric_catalog, rubric) if rubric is not None else None


def _apply_keys() -> None:
    """Store the label keys the browser queued (each once), then follow its focus and
    run its command. Runs before anything is drawn, so the page shows the result."""
    sent: Any = st.session_state.get(panel.KEY)
    if rubric is None or not isinstance(sent, dict) or sent.get("case") != case_id:
        return
    try:
        client, events = parse_key_events(sent)
    except InputError as error:
        st.session_state["key_notice"] = f"Not saved: {error}"
        return
    acked = dict(st.session_state["key_acked"])
    after_seq = acked.get(client, 0)
    try:
        result = apply_key_events(
            cached.engine(),
            actor,
            case_id=case_id,
            rubric=rubric,
            client_id=client,
            events=events,
            after_seq=after_seq,
        )
    except DatabaseBusy:
        # Nothing acknowledged and no command run (the next case would drop the queue):
        # the panel keeps its queue and sends it again by itself. A press stored before
        # the lock ran out counts once, as a duplicate, when it comes back.
        waiting = sum(1 for event in events if event.seq > after_seq)
        st.session_state["key_notice"] = (
            f"Database busy: {waiting} key press{'' if waiting == 1 else 'es'} not saved "
            "yet; they will be sent again"
        )
        return
    acked[client] = result.last_seq
    st.session_state["key_acked"] = acked
    if result.errors:
        st.session_state["key_notice"] = "Not saved: " + "; ".join(result.errors)
    elif result.last_seq > after_seq:
        st.session_state["key_notice"] = None
    if sent.get("focus") in labelable_turns:
        st.session_state["focus"] = {"case": case_id, "turn": sent["focus"]}
    command = sent.get("command")
    if isinstance(command, dict) and command.get("id") not in st.session_state["key_commands"]:
        st.session_state["key_commands"] = [*st.session_state["key_commands"][-20:], command["id"]]
        if command.get("name") == "next_case":
            _open_next_case()


def _open_next_case(rerun: bool = True) -> None:
    if rubric is None:
        return
    following = next_case(
        cached.engine(),
        actor,
        rubric=rubric,
        after=case_id,
        order=st.session_state["queue_order"],  # the order the queue page shows
    )
    if following is None:
        st.session_state["key_notice"] = "No unfinished case left in your queue."
        return
    st.query_params["case"] = following
    st.session_state["focus"] = None
    st.session_state["key_notice"] = None
    if rerun:  # not from a button's callback, which reruns anyway
        st.rerun()


_apply_keys()

labels: CaseLabels | None = (
    case_labels(cached.engine(), actor, case_id=case_id, rubric=rubric) if rubric else None
)
# Units of this case the reviewer labeled under the previous version with a code whose
# meaning changed: shown beside their turn (never under the pinned panel).
re_reviews: dict[int, ReReviewItem] = (
    {
        item.turn: item
        for item in re_review_queue(
            cached.engine(), actor, catalog=rubric_catalog, rubric=rubric, case_id=case_id
        )
    }
    if rubric is not None and labels is not None
    else {}
)


def _first_unlabeled() -> int | None:
    mine = labels.mine if labels else {}
    return next((t for t in labelable_turns if t not in mine), None)


focus = st.session_state["focus"]
if not focus or focus.get("case") != case_id or focus.get("turn") not in labelable_turns:
    first = _first_unlabeled()
    if first is None and labelable_turns:
        first = labelable_turns[0]  # everything labeled: start at the top
    focus = {"case": case_id, "turn": first}
    st.session_state["focus"] = focus
focus_turn: int | None = focus["turn"]

# A long case draws a window of turns around the focused one and its first break, not
# every turn (services/cases/case_window.py); a J past it draws the next stretch.
positions = {t.turn: index for index, t in enumerate(view.turns)}
kept = st.session_state["review_window"]
window = turn_window(
    len(view.turns),
    focus=positions.get(focus_turn) if focus_turn is not None else None,
    first_break=positions.get(view.first_violation_turn)
    if view.first_violation_turn is not None
    else None,
    kept=tuple(kept[1:]) if kept and kept[0] == case_id else None,
)
st.session_state["review_window"] = (case_id, window.start, window.end, window.anchor)
drawn = [view.turns[index] for index in window.drawn]


def _move_window(events: int, current: TurnWindow = window) -> None:
    moved = current.shifted(events)
    st.session_state["review_window"] = (case_id, moved.start, moved.end, moved.anchor)


with st.sidebar:
    st.toggle(
        "Open the next case when this one is done",
        key=session.widget_key("auto_advance"),
        on_change=session.keep,
        args=("auto_advance",),
    )
    st.button(
        "Next case (N)",
        key="next_case",
        icon=":material/skip_next:",
        on_click=_open_next_case,
        args=(False,),
        width="stretch",
    )


# --- header: one line of facts, one line of role ------------------------------------------

st.markdown(f"**Review** · {code_span(case_id)}")
meta = [
    f"lane {code_span(view.lane or '-')}",
    f"contract {code_span(view.contract_version or 'none')}",
    f"evaluator v{escape(view.evaluator_version)}",
]
if labels is not None:
    if labels.blind:
        meta.append("others' labels hidden until you have labeled every turn")
    elif labels.other_reviewers:
        meta.append("you have labeled every turn: others' labels are shown")
st.caption(" · ".join(meta))
# Always one slot, filled or not: an element that comes and goes above the panel would
# move it in the page's element tree, and Streamlit would draw a new panel (its state,
# such as a notice or keys not yet acknowledged, gone).
re_review_slot = st.container()
waiting = sorted(turn for turn, item in re_reviews.items() if not item.done)
if waiting:
    with re_review_slot:
        st.caption(
            f"Label again: turn{'s' if len(waiting) > 1 else ''} "
            + ", ".join(f"{turn:d}" for turn in waiting)
            + f" (their codes changed meaning in {escape(rubric.ref if rubric else '')}); "
            "the old label and both definitions are beside each turn"
        )
st.caption(
    "Marks: red = role violation · yellow = invalid fixture · blue box = missing context · "
    "blue outline = the focused turn (your keys label it)"
)
if view.diagnostic:
    st.code(view.diagnostic, language=None, wrap_lines=True)
if view.chatbot_role:
    first_line = view.chatbot_role.strip().splitlines()[0] if view.chatbot_role.strip() else ""
    # Imported text: literal (an expander's label would be Markdown).
    st.text("Role: " + first_line[:110] + ("…" if len(first_line) > 110 else ""))
    with st.expander("Full role description"):
        st.text(view.chatbot_role)
if view.contract is None:
    st.caption("No contract: semantic review only (no deterministic findings for this case).")
for finding in view.case_findings:
    st.warning(f"Invalid fixture {code_span(finding['code'])}: contract problem")
    if finding.get("message"):
        st.text(finding["message"])

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
            omitted = ", ".join(escape(t) for t in finding["missing_turns"])
            detail = f" · request omits turns {omitted}"
        elif finding["code"] == "role_instruction_mismatch":
            # Two hashes of 64 characters say nothing more than their first 12.
            detail = (
                " · the request carried another role instruction than the contract's "
                f"(hash {code_span(str(finding['actual'])[:SHORT_HASH_CHARS])}, contract "
                f"{code_span(str(finding['expected'])[:SHORT_HASH_CHARS])})"
            )
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
    line = f"Your label: {mine.code if mine else '—'}"
    again = re_reviews.get(turn.turn)
    if again is not None and mine is None:
        line += f" (was {again.old_code} under {again.old_ref}: label it again)"
    # Only changes of code: a rationale added to the same code is no "was".
    codes: list[str] = []
    for h in history:
        if not codes or codes[-1] != h.code:
            codes.append(h.code)
    if mine is not None and codes and codes[-1] == mine.code:
        codes.pop()
    if codes:
        line += " (was " + " → ".join(codes) + ")"
    if turn.turn in labels.needs_relabeling:
        line += " · NEEDS RELABELING: the conversation changed since you labeled it"
    if labels.others is not None:
        others = labels.others.get(turn.turn, [])
        if others:
            line += " · others: " + ", ".join(f"{o.reviewer} {o.code}" for o in others)
    return line


def _turn_text(turn: TurnView) -> str:
    """The whole turn as one plain-text element (each element costs rerun time): who,
    role, actions, labels, then the message. Imported text: never Markdown or HTML."""
    header = f"turn {turn.turn} · {turn.actor} · role {turn.active_role or '-'}"
    if turn.actions:
        header += " · actions " + ", ".join(turn.actions)
    lines = [header]
    label_line = _label_line(turn)
    if label_line is not None:
        lines.append(label_line)
        mine = labels.mine.get(turn.turn) if labels else None
        if mine and mine.rationale:
            lines.append(f"Your rationale: {mine.rationale}")
    head = "\n".join(lines)
    return f"{head}\n\n{turn.text}" if turn.text else head


with reference:
    # Drawn before the transcript: the sooner the panel is in the browser, the sooner
    # it listens for keys.
    if rubric is not None and labels is not None and labelable:
        panel.keyboard(
            case=case_id,
            rubric=rubric.ref,
            turns=labelable_turns,
            order=[t.turn for t in drawn],  # the messages on the page, in order
            focus=focus_turn,
            labels={str(t): row.code for t, row in labels.mine.items()},
            rationales={str(t): row.rationale for t, row in labels.mine.items() if row.rationale},
            codes=[
                {
                    "code": label.code,
                    "key": label_keys.key_of(label.code) if label_keys else "",
                    "title": label.title,
                    "verdict": label.verdict,
                    "definition": label.definition
                    + (f"\n\n{label.guidance}" if label.guidance else ""),
                }
                for label in rubric.labels
            ],
            acked=st.session_state["key_acked"],
            commands_done=st.session_state["key_commands"],
            auto_advance=bool(st.session_state["auto_advance"]),
            error=st.session_state["key_notice"],
        )
        st.page_link(
            registry.page("rubrics"), label=f"Rubric {escape(rubric.ref)}: examples and versions"
        )
    else:
        st.caption("Nothing to label in this case.")

# Policy owners see which judge verdicts `judge route --apply` certified; reviewers
# label blind and never do.
certified = (
    certified_verdicts(cached.engine(), actor, rubric=rubric, case_ids=[view.case_id])
    if rubric is not None and actor.has_role("policy_owner")
    else {}
)


def _draw_turn(turn: TurnView) -> None:
    if turn.set_role is not None:
        if turn.transition == "trusted":
            st.divider()
            st.caption(
                f"Trusted role transition → {code_span(turn.set_role)} "
                f"(system event, turn {turn.turn:d})"
            )
        else:
            st.warning(
                f"Ignored role change to {code_span(turn.set_role)} at turn "
                f"{turn.turn:d}: a {code_span(turn.actor)} event is not a trusted "
                "transition",
                icon=":material/gpp_bad:",
            )
    with st.chat_message(turn.actor, avatar=AVATARS.get(turn.actor)):
        st.text(_turn_text(turn))
        if turn.turn in re_reviews:
            _re_review_note(re_reviews[turn.turn])
        _finding_marks(turn)
        mark = certified.get((view.case_id, turn.turn))
        if mark is not None:
            st.caption(
                f"Judge verdict {code_span(mark.label)} certified (run {mark.run:d}, "
                f"alpha {mark.alpha:g}, delta {mark.delta:g}, confidence "
                f"{mark.confidence:.3f} ≥ {mark.threshold:.3f}): the judge decides "
                "this turn"
            )


def _re_review_note(item: ReReviewItem) -> None:
    """Why a turn is to be labeled again, its old label and the definitions, beside it."""
    assert rubric is not None
    with st.container(border=True):
        st.caption(
            f"Re-review turn {item.turn:d}"
            + (" (done)" if item.done else "")
            + f": you labeled it {code_span(item.old_code)} under "
            f"{code_span(item.old_ref)}, whose meaning changed"
        )
        st.text(f"{item.old_code} ({item.old_ref}): {item.old_definition}")
        for code in item.new_codes:
            key = f" [key {label_keys.key_of(code)}]" if label_keys else ""
            st.text(f"{code} ({rubric.ref}){key}: {rubric.label(code).definition}")


def _gap(before: int, after: int) -> None:
    """The events not drawn between two drawn stretches (or before the first, after the
    last), and a button moving the window over them where the window borders them."""
    hidden = after - before
    if hidden <= 0:
        return
    st.caption(f"… {hidden:,} turn{'s' if hidden != 1 else ''} not shown")
    if after == window.start or before == window.end:
        earlier = after == window.start
        st.button(
            "Show earlier turns" if earlier else "Show later turns",
            key="window_earlier" if earlier else "window_later",
            icon=":material/unfold_more:",
            on_click=_move_window,
            args=((-1 if earlier else 1) * 2 * WINDOW_EVENTS,),
        )


with transcript:
    if not window.whole:
        st.caption(
            f"A long conversation of {len(view.turns):,} events: turns "
            f"{view.turns[window.start].turn:d}-{view.turns[window.end - 1].turn:d} are shown, "
            "around the focused turn"
            + (" (and the first violation)" if len(window.segments) > 1 else "")
            + "; J/K, the panel's turn buttons and the buttons here move the window."
        )
    shown_until = 0
    for start, end in window.segments:
        _gap(shown_until, start)
        shown_until = end
        for turn in view.turns[start:end]:
            _draw_turn(turn)
    _gap(shown_until, len(view.turns))
