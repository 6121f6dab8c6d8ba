"""Rubrics: definitions, contrasting examples, versions and what changed between them."""

from __future__ import annotations

import streamlit as st

from review_app.errors import InputError
from review_app.rubrics import diff_rubrics
from review_app.services.labels.adjudication import AmbiguityNote, ambiguity_notes
from review_app.services.rubrics.rubric_carry import carry_history, publish_rubric
from review_app.services.rubrics.rubric_catalog import has_labels
from review_app.ui import cached, common, session
from review_app.ui.safe import code_list, code_span, escape

catalog = cached.catalog()
st.title("Rubrics")

if session.actor().has_role("policy_owner"):
    for ref, message in sorted(catalog.refused.items()):
        st.warning(f"{code_span(ref)} is not offered")
        st.text(message)

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

actor = session.actor()
notes_by_code: dict[str, list[AmbiguityNote]] = {}
if actor.has_role("policy_owner"):
    for note in ambiguity_notes(cached.engine(), actor, rubric=rubric):
        notes_by_code.setdefault(note.gold, []).append(note)

definitions, examples, versions = st.tabs(["Labels", "Examples", "Compare versions"])
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
    same_id = [r.ref for r in catalog.versions_of(rubric.id)]
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
        old = catalog.get(st.session_state["compare_old"])
        new = catalog.get(st.session_state["compare_new"])
        try:
            diff = diff_rubrics(old, new)
        except InputError as error:
            st.error("The newer version's mapping is inconsistent")
            st.text(str(error))
            st.stop()
        if diff.is_empty:
            st.success("No differences.")
        if diff.title:
            st.write("Title changed")
            st.text(f"{diff.title.old} → {diff.title.new}")
        for label in diff.labels_added:
            st.success(f"Added {code_span(label.code)} ({escape(label.verdict)})")
        for label in diff.labels_removed:
            st.error(f"Removed {code_span(label.code)}")
        for change in diff.labels_changed:
            fields = ", ".join(escape(f) for f in change.fields)
            st.warning(f"Changed {code_span(change.code)}: {fields}")
            for field_change in change.changes:
                st.text(f"{field_change.field}:\n- {field_change.old}\n+ {field_change.new}")
        if diff.examples_added or diff.examples_removed:
            st.caption(
                f"Examples: {len(diff.examples_added)} added, {len(diff.examples_removed)} removed"
            )
        if diff.mapping is not None:
            st.subheader("Mapping")
            st.caption(
                "How each label of the newer version relates to the older codes: same and "
                "reworded are carried when publishing; narrowed, widened, split and merged "
                'go to re-review (docs/reference.md, "Rubric versions: mapping and carry-over").'
            )
            for origin in diff.mapping.origins:
                said = origin.change or "open: the file must say change:"
                source = f" ← {code_list(origin.from_codes)}" if origin.from_codes else ""
                derived = " (derived)" if origin.derived and origin.change else ""
                st.markdown(f"- {code_span(origin.code)}{source}: {escape(said)}{derived}")
            for code in diff.mapping.unaccounted():
                st.error(f"{code_span(code)} of {code_span(old.ref)} is unaccounted for")
            if actor.has_role("admin") and new.version == old.version + 1:
                st.caption(
                    f"Publishing {code_span(new.ref)} carries the labels, gold labels and judge "
                    f"verdicts of {code_span(old.ref)} whose code is same or reworded, and "
                    "queues the others for the reviewers who gave them. It can be repeated: "
                    "nothing is carried twice."
                )
                if st.button(f"Publish {escape(new.ref)}", key="rubric_publish"):
                    try:
                        report = publish_rubric(
                            cached.engine(), actor, catalog=catalog, ref=new.ref
                        )
                    except InputError as error:
                        st.error("Not published")
                        st.text(str(error))
                    else:
                        cached.forget_catalog()
                        st.success("Published")
                        st.text("\n".join(report.lines()))
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
