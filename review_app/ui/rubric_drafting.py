"""The rubrics page's "Next version" tab: a policy owner writes version N+1 of a rubric
(per code, or the YAML itself), sees the same one-line errors a file gives, the
differences from N, a preview of the publication (what ``rubrics publish --dry-run``
prints) and publishes after a confirmation naming the consequence (docs/reference.md,
"Rubric drafts and publication")."""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.rubrics.diff import RubricDiff
from review_app.rubrics.model import CHANGES, EXAMPLE_KINDS, VERDICTS, Rubric
from review_app.services.access.actors import Actor
from review_app.services.rubrics.rubric_carry import publish_rubric
from review_app.services.rubrics.rubric_catalog import RubricCatalog
from review_app.services.rubrics.rubric_drafts import (
    WHO_MAY_PUBLISH,
    check_draft,
    draft_text,
    edit_code,
    preview_publish,
    save_draft,
)
from review_app.ui import cached, session
from review_app.ui.safe import code_list, code_span, error_text, escape

REFUSED = (InputError, NotFound, PermissionDenied)
NEW_CODE = "(a new code)"


def show_diff(diff: RubricDiff, old: Rubric) -> None:
    """What changed from ``old`` to the newer version, and the mapping of its codes."""
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


def _consequence(ref: str, report: dict[str, Any]) -> str:
    carried = sum(report["carried"].values())
    people = len(report["re_review"])
    return (
        f"Publish {ref}: carry {carried} labels from {report['from']}, queue "
        f"{report['re_review_units']} units for {people} reviewer{'s' if people != 1 else ''} "
        f"to label again, and make {ref} the version reviewers label. It cannot be undone."
    )


def _report_panel(report: dict[str, Any]) -> None:
    """The counts of a publication (previewed or done), as ``--dry-run --json`` has them."""
    carried, not_carried, people = st.columns(3)
    carried.metric("Labels carried", sum(report["carried"].values()))
    not_carried.metric("Labels not carried", sum(report["not_carried"].values()))
    people.metric("Units to label again", report["re_review_units"])
    st.caption(
        "Carried: current labels of codes kept as same or reworded, copied into the new "
        "version. Not carried: labels of codes whose meaning changed; their reviewers "
        "label those units again (per reviewer below)."
    )
    rows = [
        {"code": code, "carried": report["carried"].get(code, 0), "not carried": n}
        for code, n in report["not_carried"].items()
    ] + [
        {"code": code, "carried": n, "not carried": 0}
        for code, n in report["carried"].items()
        if code not in report["not_carried"]
    ]
    if rows:
        st.table(sorted(rows, key=lambda r: r["code"]))
    if report["re_review"]:
        st.caption("Re-review per reviewer: the labels each is asked to give again")
        st.table(
            [{"reviewer": k, "labels to give again": v} for k, v in report["re_review"].items()]
        )
    else:
        st.caption("Nobody has units to label again: no label of a changed code exists.")


def draw(engine: Engine, actor: Actor, catalog: RubricCatalog) -> None:
    st.caption(escape(WHO_MAY_PUBLISH))
    result = st.session_state["draft_result"]
    if result is not None:
        with st.container(border=True):
            st.success(f"Published {escape(result['rubric'])}")
            _report_panel(result)
            st.text(result["text"])
    ids = catalog.rubric_ids
    if not ids:
        st.info("No published rubric to write a next version of.")
        return
    if st.session_state["draft_rubric"] not in ids:
        st.session_state["draft_rubric"] = ids[0]
    st.selectbox("Rubric", ids, key="draft_rubric")
    rubric_id = st.session_state["draft_rubric"]
    current = catalog.current(rubric_id)
    assert current is not None
    ref = f"{rubric_id}@{current.version + 1}"
    saved = catalog.drafts.get(ref)
    info = catalog.draft_info.get(ref)
    if saved is None:
        st.caption(
            f"Version {escape(current.version + 1)} starts from {code_span(current.ref)}, "
            "the current published version. Nothing is stored until you save the draft; "
            "a draft acts nowhere until it is published."
        )
    else:
        origin = (
            "a file in the rubrics folder"
            if info is None or info.origin == "file"
            else f"saved in the app by {info.saved_by or 'someone'}"
        )
        st.caption(f"Draft {code_span(ref)}: {escape(origin)}; not published, used nowhere.")
    if st.session_state["draft_text_of"] != ref:
        st.session_state["draft_text"] = draft_text(
            engine, actor, catalog=catalog, rubric_id=rubric_id
        )
        st.session_state["draft_text_of"] = ref
        st.session_state["draft_preview"] = None

    yaml_tab, per_code = st.tabs(["YAML", "Per code"], key="draft_tabs")
    with yaml_tab:
        st.text_area(
            escape(f"YAML of {ref}"),
            key=session.widget_key("draft_text"),
            on_change=session.keep,
            args=("draft_text",),
            height=420,
        )
    text = st.session_state["draft_text"]
    checked = check_draft(engine, actor, catalog=catalog, rubric_id=rubric_id, text=text)
    with per_code:
        _code_form(engine, actor, catalog, rubric_id, checked.rubric, current)

    if checked.error is not None:
        st.error("The draft cannot be read (as the file would be):")
        st.code(checked.error, language=None)
    else:
        st.success(escape(f"The draft reads as {ref}."))
        assert checked.diff is not None
        with st.container(border=True):  # not an expander: the tab may be hidden
            st.caption(escape(f"What changed since {current.ref}"))
            show_diff(checked.diff, current)
    unsaved = saved is None or checked.rubric is None or checked.rubric.sha256 != saved.sha256
    if st.button("Save draft", key="draft_save", disabled=checked.error is not None):
        try:
            save_draft(engine, actor, catalog=catalog, rubric_id=rubric_id, text=text)
        except REFUSED as error:
            st.error(error_text(error))
        else:
            cached.forget_catalog()
            st.session_state["draft_preview"] = None
            st.rerun()
    if unsaved:
        st.caption("Save the draft to preview and publish it.")
        return
    assert saved is not None
    st.subheader(escape(f"Publish {ref}"))
    if st.button("Preview the publication", key="draft_preview_button"):
        try:
            report = preview_publish(engine, actor, catalog=catalog, ref=ref)
        except REFUSED as error:
            st.session_state["draft_preview"] = {"sha": saved.sha256, "error": str(error)}
        else:
            st.session_state["draft_preview"] = {"sha": saved.sha256, **report.to_dict()}
        st.session_state["draft_confirm"] = False  # each preview is confirmed anew
    preview = st.session_state["draft_preview"]
    if preview is None or preview.get("sha") != saved.sha256:
        st.caption(
            "The preview runs the publication and undoes it: the same counts as "
            f"{code_span(f'review-app rubrics publish {ref} --dry-run --json')}. "
            "Publishing comes after it."
        )
        return
    if "error" in preview:
        st.error("It cannot be published:")
        st.code(preview["error"], language=None)
        return
    with st.container(border=True):
        st.caption(escape(f"Preview: what publishing {ref} now would do (nothing stored yet)"))
        _report_panel(preview)
    confirmed = st.checkbox(escape(_consequence(ref, preview)), key="draft_confirm")
    if st.button(
        escape(f"Publish {ref}"), key="draft_publish", disabled=not confirmed, type="primary"
    ):
        try:
            report = publish_rubric(engine, actor, catalog=catalog, ref=ref)
        except REFUSED as error:
            st.error("Not published")
            st.code(str(error), language=None)
        else:
            cached.forget_catalog()
            st.session_state["draft_result"] = {
                **report.to_dict(),
                "text": "\n".join(report.lines()),
            }
            st.session_state["draft_preview"] = None
            st.session_state["draft_text_of"] = None
            st.rerun()


def _code_form(
    engine: Engine,
    actor: Actor,
    catalog: RubricCatalog,
    rubric_id: str,
    draft: Rubric | None,
    current: Rubric,
) -> None:
    if draft is None:
        st.info("Fix the YAML first: the form edits a draft that reads.")
        return
    codes = [*draft.codes, NEW_CODE]
    if st.session_state["draft_code"] not in codes:
        st.session_state["draft_code"] = codes[0]
    st.selectbox("Code", codes, key="draft_code")
    chosen = st.session_state["draft_code"]
    label = None if chosen == NEW_CODE else draft.label(chosen)
    with st.form(f"draft_code_form_{chosen}"):
        code = (
            st.text_input("New code (lower case, digits, underscores)") if label is None else chosen
        )
        title = st.text_input("Title", value="" if label is None else label.title)
        definition = st.text_area("Definition", value="" if label is None else label.definition)
        verdict = st.selectbox(
            "Verdict", VERDICTS, index=1 if label is None else VERDICTS.index(label.verdict)
        )
        from_codes = st.multiselect(
            escape(f"from: (codes of {current.ref} it takes over)"),
            current.codes,
            default=[] if label is None or not label.from_codes else list(label.from_codes),
        )
        changes = ["", *CHANGES]
        change = st.selectbox(
            "change: (how its meaning relates to them; empty: same when the code is kept)",
            changes,
            index=0 if label is None or not label.change else changes.index(label.change),
        )
        st.caption("An example for this code (optional: left empty, none is added)")
        kind = st.selectbox("Example kind", EXAMPLE_KINDS)
        context = st.text_area("Example context", value="")
        reply = st.text_area("Example reply", value="")
        why = st.text_area("Why (ends with the label to choose)", value="")
        if st.form_submit_button("Apply to the draft"):
            example = (
                {"kind": kind, "context": context, "reply": reply, "why": why}
                if context.strip() or reply.strip() or why.strip()
                else None
            )
            try:
                st.session_state["draft_text"] = edit_code(
                    engine,
                    actor,
                    catalog=catalog,
                    rubric_id=rubric_id,
                    text=st.session_state["draft_text"],
                    code=code.strip(),
                    title=title,
                    definition=definition,
                    verdict=verdict,
                    from_codes=from_codes,
                    change=change or None,
                    example=example,
                )
            except REFUSED as error:
                st.error(error_text(error))
            else:
                st.rerun()
