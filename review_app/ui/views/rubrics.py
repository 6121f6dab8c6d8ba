"""Rubrics: definitions, contrasting examples, versions and what changed between them."""

from __future__ import annotations

import streamlit as st

from review_app.errors import InputError
from review_app.rubrics.diff import diff_rubrics
from review_app.services.labels.adjudication import AmbiguityNote, ambiguity_notes
from review_app.services.rubrics.rubric_carry import carry_history
from review_app.services.rubrics.rubric_catalog import has_labels
from review_app.services.rubrics.rubric_drafts import WHO_MAY_PUBLISH
from review_app.ui import cached, common, rubric_drafting, session
from review_app.ui.safe import code_span, escape

catalog = cached.catalog()


def _origin(ref: str) -> str:
    info = catalog.draft_info.get(ref)
    return "written in the app" if info is not None and info.origin == "app" else "a file"


st.title("Rubrics")

if session.actor().has_role("policy_owner"):
    for ref, message in sorted(catalog.refused.items()):
        st.warning(f"{code_span(ref)} is not offered")
        st.text(message)

if catalog.drafts:
    st.caption(
        "Drafts (not published: offered nowhere, labeled by nobody, a default nowhere): "
        + ", ".join(f"{code_span(ref)} ({escape(_origin(ref))})" for ref in catalog.draft_refs)
    )

if not catalog.usable:
    st.info("No rubric versions. Add rubrics/<id>/v<N>.yaml.")
    st.stop()

common.selected_rubric(catalog)  # makes sure a usable version is selected
refs = catalog.refs
st.selectbox(
    "Rubric version",
    refs,
    key=session.widget_key("rubric_ref"),
    on_change=session.keep,
    args=("rubric_ref",),
)
rubric = catalog.get(st.session_state["rubric_ref"])
locked = has_labels(
    cached.engine(), session.actor(), rubric
)  # live: the cached catalog predates new labels
st.caption(
    f"{code_span(rubric.ref)} · applies to {code_span(rubric.applies_to)} turns · "
    f"sha256 {code_span(rubric.sha256[:12])} · "
    + ("labels recorded: immutable" if locked else "no labels yet")
)
st.text(rubric.title)
st.caption(escape(WHO_MAY_PUBLISH))

actor = session.actor()
notes_by_code: dict[str, list[AmbiguityNote]] = {}
if actor.has_role("policy_owner"):
    for note in ambiguity_notes(cached.engine(), actor, rubric=rubric):
        notes_by_code.setdefault(note.gold, []).append(note)

tab_names = ["Labels", "Examples", "Compare versions"]
if actor.has_role("policy_owner"):
    tab_names.append("Next version")
definitions, examples, versions, *writing = st.tabs(tab_names, key="rubric_tabs")
with definitions:
    if notes_by_code:
        st.caption(
            "Rubric ambiguity notes from adjudication are listed under the gold code they "
            "were written with: the input for the next version."
        )
    for label in rubric.labels:
        st.markdown(
            f"#### {code_span(label.code)} · {escape(label.verdict)}"
            + (f" · {code_span(label.dimension)}" if label.dimension else "")
        )
        st.text(label.title)
        st.text(label.definition)
        if label.guidance:
            st.caption("Guidance")
            st.text(label.guidance)
        for note in notes_by_code.get(label.code, []):
            st.caption(
                f"Ambiguity noted at {code_span(note.case_id)} turn {escape(str(note.turn))}"
            )
            st.text(note.note)

with examples:
    codes = ["(all)", *rubric.codes]
    st.selectbox("Label", codes, key="rubric_example_label")
    chosen = st.session_state["rubric_example_label"]
    for example in rubric.examples:
        if chosen != "(all)" and example.label != chosen:
            continue
        with st.container(border=True):
            st.caption(f"{code_span(example.label)} · {escape(example.kind)}")
            st.text(f"Context: {example.context}\nReply: {example.reply}\nWhy: {example.why}")

with versions:
    # drafts are compared by those who write them; a reviewer sees published versions
    same_id = [r.ref for r in catalog.versions_of(rubric.id)] + [
        ref
        for ref in catalog.draft_refs
        if catalog.drafts[ref].id == rubric.id and actor.has_role("policy_owner")
    ]
    if len(same_id) < 2:
        st.info(f"{escape(rubric.id)} has a single version so far.")
    else:
        left, right = st.columns(2)
        if st.session_state["compare_old"] not in same_id:
            st.session_state["compare_old"] = same_id[0]
        if st.session_state["compare_new"] not in same_id:
            st.session_state["compare_new"] = same_id[-1]
        left.selectbox("Older", same_id, key="compare_old")
        right.selectbox("Newer", same_id, key="compare_new")
        old = catalog.any_version(st.session_state["compare_old"])
        new = catalog.any_version(st.session_state["compare_new"])
        try:
            diff = diff_rubrics(old, new)
        except InputError as error:
            st.error("The newer version's mapping is inconsistent")
            st.text(str(error))
            st.stop()
        if new.ref in catalog.drafts:
            st.caption(f"{code_span(new.ref)} is a draft: publish it under Next version.")
        rubric_drafting.show_diff(diff, old)
        history = (
            carry_history(cached.engine(), actor, rubric_id=rubric.id)
            if actor.has_role("policy_owner")
            else []
        )
        if history:
            st.subheader("Publications")
            for record in history:
                carried = sum(record.summary.get("carried", {}).values())
                st.caption(
                    f"{code_span(record.to_ref)} from {code_span(record.from_ref)} · "
                    f"{code_span(record.actor)} · {escape(str(record.at))} · "
                    f"{carried:d} labels carried, "
                    f"{int(record.summary.get('re_review_units', 0)):d} units to re-review"
                )

for tab in writing:
    with tab:
        rubric_drafting.draw(cached.engine(), actor, catalog)
