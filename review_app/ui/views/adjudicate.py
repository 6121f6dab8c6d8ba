"""Adjudicate: settle disagreements into gold labels (policy owners only)."""

from __future__ import annotations

import streamlit as st

from review_app.errors import DatabaseBusy, InputError, NotFound
from review_app.input_policy import parse_turn_text
from review_app.services.cases.case_views import TurnView
from review_app.services.judging.unit_with_judge import unit_detail_with_judge
from review_app.services.labels.adjudication import (
    ambiguity_notes,
    first_open_unit,
    next_open_unit,
    queue_place,
    record_gold,
)
from review_app.services.operations.audit import audit_entries, audit_line
from review_app.services.rubrics.rubric_keys import key_map_for
from review_app.ui import cached, common, registry, session
from review_app.ui.safe import code_span, error_text, escape

LISTED_UNITS = 200  # a page of thousands of rows of links would stall the browser
AUDIT_ENTRIES = 50
LONG_TURN_CHARS = 700  # a longer decided turn scrolls in a box of its own

actor = common.policy_owner("Adjudication is for policy owners.")
rubric = common.rubric_page("Adjudicate")
engine = cached.engine()
common.own_work_notice(rubric)
case_id = st.query_params.get("case")
turn_text = st.query_params.get("turn")
# The address is untrusted input: a turn that is no storable whole number is no unit.
if case_id and turn_text and parse_turn_text(turn_text) is not None:
    st.session_state["adjudicate_unit"] = {"case": case_id, "turn": parse_turn_text(turn_text)}
elif st.session_state["adjudicate_unit"]:
    # A rerun without the unit in the address (a widget change, the sidebar link):
    # stay on the unit and put it back in the address.
    case_id = st.session_state["adjudicate_unit"]["case"]
    turn_text = str(st.session_state["adjudicate_unit"]["turn"])
    st.query_params.update({"case": case_id, "turn": turn_text})

address_turn = parse_turn_text(turn_text) if turn_text else None
if not case_id or address_turn is None:
    # No unit asked for: open the first open one by itself (no click to start).
    first = first_open_unit(cached.disagreements(rubric.ref))
    if first is not None:
        case_id, address_turn = first.case_id, first.turn
        st.session_state["adjudicate_unit"] = {"case": case_id, "turn": address_turn}
        st.query_params.update({"case": case_id, "turn": str(address_turn)})


def _queue_section() -> None:
    """The disagreement queue, the noted ambiguities and the audit log (below the unit)."""
    assert rubric is not None
    st.toggle("Include settled units", key="adjudicate_all")
    units = cached.disagreements(rubric.ref, include_adjudicated=st.session_state["adjudicate_all"])
    open_units = sum(1 for unit in units if not unit.adjudicated)
    st.caption(f"{open_units:d} open units under {escape(rubric.ref)}")
    for unit in units[:LISTED_UNITS]:
        cells = st.columns([7, 4, 3, 2])
        cells[0].page_link(
            registry.page("adjudicate"),
            label=f"{escape(unit.case_id)} · turn {unit.turn:d}",
            query_params={"case": unit.case_id, "turn": str(unit.turn)},
            width="stretch",
        )
        cells[1].markdown(", ".join(code_span(code) for code in unit.codes))
        cells[2].caption(", ".join(escape(kind.replace("_", " ")) for kind in unit.kinds))
        cells[3].markdown(f"gold {code_span(unit.gold_code)}" if unit.gold_code else "open")
    if len(units) > LISTED_UNITS:
        st.caption(
            f"… and {len(units) - LISTED_UNITS:d} more. Recording a gold label opens the next "
            "open unit, so the queue can be worked through from the first one."
        )
    with st.expander("Rubric ambiguities noted for the next version"):
        notes = ambiguity_notes(engine, actor, rubric=rubric)
        if not notes:
            st.caption("None yet.")
        for note in notes:
            st.caption(
                f"{code_span(note.case_id)} turn {note.turn:d} · gold {code_span(note.gold)}"
            )
            st.text(note.note)
    with st.expander("Audit log: the latest changes and exports"):
        entries = audit_entries(engine, actor, limit=AUDIT_ENTRIES)
        if not entries:
            st.caption("None yet.")
        else:
            st.text("\n".join(audit_line(entry) for entry in entries))  # plain text


if not case_id or address_turn is None:
    st.success("Nothing to adjudicate: every disagreement has a gold label.")
    _queue_section()
    st.stop()

turn = address_turn
if st.session_state["gold_unit"] != [case_id, turn]:
    session.reset_gold_form()  # another unit: nothing chosen yet
    st.session_state["gold_unit"] = [case_id, turn]
try:
    detail = unit_detail_with_judge(engine, actor, rubric=rubric, case_id=case_id, turn=turn)
except NotFound as error:
    st.session_state["adjudicate_unit"] = None
    st.error(error_text(error))
    st.stop()
case_id = detail.case_id  # as stored (the address's id went through the id rules)


def _turn_message(event: TurnView, *, focused: bool) -> None:
    """One event of the transcript: who, which role, the text, actions and findings."""
    with st.chat_message(event.actor):
        marker = " · **this turn**" if focused else ""
        st.caption(
            f"turn {event.turn:d} · {code_span(event.actor)} · role "
            f"{code_span(event.active_role or '-')}{marker}"
        )
        if event.text and focused and len(event.text) > LONG_TURN_CHARS:
            st.container(height=320).text(event.text)  # the choices stay on the first screen
        elif event.text:
            st.text(event.text)
        if event.actions:
            st.caption("actions: " + ", ".join(code_span(a) for a in event.actions))
        for violation in event.violations:
            st.error(
                f"Violation: {code_span(violation['action'])} outside role "
                f"{code_span(violation['active_role'])}"
            )
        for fixture_error in event.fixture_errors:
            st.warning(f"Invalid fixture {code_span(fixture_error['code'])}")
        for finding in event.harness_findings:
            st.info(f"Missing context {code_span(finding['code'])}")


def _submit_gold() -> None:
    """Runs before the next run draws the form, so it may reset the form's widgets."""
    assert rubric is not None and case_id is not None
    if st.session_state["gold_code"] is None:
        session.flash("Not recorded: choose the gold label first (the key before its code).")
        return
    try:
        record_gold(
            engine,
            actor,
            rubric=rubric,
            case_id=case_id,
            turn=turn,
            code=st.session_state["gold_code"],
            note=st.session_state["gold_note"],
            calibration_item=st.session_state["gold_calibration"],
            rubric_ambiguity=st.session_state["gold_ambiguity"],
        )
    except (InputError, NotFound, DatabaseBusy) as error:
        session.flash(f"Not recorded: {error}")
        return
    session.reset_gold_form()
    session.flash(f"Gold label recorded for {case_id} turn {turn}.")
    following = next_open_unit(cached.disagreements(rubric.ref), case_id=case_id, turn=turn)
    if following is not None:
        st.query_params.update({"case": following.case_id, "turn": str(following.turn)})
        st.session_state["adjudicate_unit"] = {"case": following.case_id, "turn": following.turn}
    else:
        st.query_params.clear()
        st.session_state["adjudicate_unit"] = None


def _choose(code: str) -> None:
    st.session_state["gold_code"] = code


place = queue_place(cached.disagreements(rubric.ref), case_id=case_id, turn=turn)
# The version's key map (docs/reference.md, "Label keys"): the same key chooses the same
# code here as on the review page, and under the next version too.
label_keys = key_map_for(cached.catalog(), rubric)
chosen = st.session_state["gold_code"]
if chosen not in rubric.codes:
    chosen = st.session_state["gold_code"] = None  # the policy owner chooses

# Compact, for a laptop screen: the turn being decided on the left, the labels and the
# choices on the right, both on the first screen; everything else below.
transcript, decision = st.columns([4, 5])
with transcript:
    st.subheader(f"{escape(case_id)} · turn {turn:d}")
    _turn_message(detail.focus, focused=True)
    with st.expander(f"The conversation around turn {turn:d}"):
        for event in detail.context:
            if event.turn != turn:
                _turn_message(event, focused=False)
    if detail.chatbot_role:
        with st.expander("Role given to the assistant"):
            st.text(detail.chatbot_role)
    if detail.diagnostic:
        st.code(detail.diagnostic, language=None)

with decision:
    st.caption(escape(place.sentence()))
    st.markdown(
        "**Labels** · "
        + " · ".join(f"{code_span(row.reviewer)}: {code_span(row.code)}" for row in detail.labels)
    )
    judge = detail.judge
    verdict = judge.verdict if judge is not None else None
    if judge is None:
        st.caption("No judge run is complete yet: no judge's verdict to show.")
    elif verdict is None:
        st.caption(
            "The judge's run has no verdict on this unit (it has not judged it yet): run it "
            "on every turn from the judge page."
        )
    elif verdict.label is None:
        st.caption(f"The judge's run failed on this unit: {escape(verdict.error or '')}")
    else:
        score = f" · score {verdict.score:.2f}" if verdict.score is not None else ""
        st.markdown(f"judge: {code_span(verdict.label)}{score}")
    if detail.gold:
        st.success(
            f"Gold: {code_span(detail.gold.code)} by "
            f"{code_span(detail.gold.adjudicator or 'operator')}"
        )
    st.markdown(
        "**Gold label** · the key before a code chooses it, Enter records · "
        + (f"chosen: {code_span(chosen)}" if chosen else "none chosen yet")
    )
    picks = st.container(horizontal=True, gap="small")
    for label in rubric.labels:
        key = label_keys.key_of(label.code)
        picks.button(
            escape(f"{key.upper()} · {label.code}"),
            key=f"gold_pick_{label.code}",
            shortcut=key,
            type="primary" if label.code == chosen else "secondary",
            help=escape(label.title),
            on_click=_choose,
            args=(label.code,),
        )
    st.button(
        "Record gold label",
        key="gold_submit",
        type="primary",
        shortcut="Enter",
        disabled=chosen is None,
        on_click=_submit_gold,
    )
    if judge is not None:
        st.caption(
            f"The judge's column is one run for every unit, {escape(judge.why)}: "
            f"{escape(judge.run)}."
        )
    if detail.gold and detail.gold.note:
        st.caption("Gold note")
        st.text(detail.gold.note)
    rationales = [row for row in detail.labels if row.rationale]
    judge_reason = verdict.reason if verdict is not None else None
    if rationales or judge_reason:
        st.markdown("**Rationales**")
    for row in rationales:
        st.caption(code_span(row.reviewer))
        st.text(row.rationale)
    if judge_reason:
        st.caption("judge")
        st.text(judge_reason)
    if detail.history:
        with st.expander(f"{len(detail.history)} earlier labels (replaced)"):
            for row in detail.history:
                st.caption(f"{code_span(row.reviewer)} had {code_span(row.code)}")
    for code in sorted({row.code for row in detail.labels}):
        with st.expander(f"Definition of {escape(code)}"):
            st.text(rubric.label(code).definition)
    st.text_area("Note", key="gold_note")
    st.checkbox("Calibration item (use it to calibrate the LLM judge)", key="gold_calibration")
    st.text_area("Rubric ambiguity to fix in the next version (optional)", key="gold_ambiguity")

# Drawn only when asked for: every key reruns the page, and the queue's rows cost a
# run about as much as the rest of the page.
st.toggle(
    f"Show the disagreement queue ({place.open_units:d} open units)", key="adjudicate_show_queue"
)
if st.session_state["adjudicate_show_queue"]:
    _queue_section()
