"""Import: upload cases (native or other tools' formats), labels, with a validation report."""

from __future__ import annotations

import streamlit as st

from review_app.errors import InputError, PermissionDenied
from review_app.formats.detect import FORMAT_NAMES
from review_app.formats.options import ImportOptions
from review_app.services.exchange.uploads import (
    import_label_upload,
    import_upload,
    validate_upload,
)
from review_app.ui import auth, cached, common
from review_app.ui.safe import code_span, escape

actor = common.policy_owner("Importing is for policy owners.")

st.title("Import")
cases_tab, labels_tab = st.tabs(["Cases", "Labels (CSV)"])

with cases_tab:
    st.file_uploader(
        "Case file (JSON, JSONL or CSV)", type=["json", "jsonl", "ndjson", "csv"], key="import_file"
    )
    st.selectbox("Format", ["detect", *FORMAT_NAMES], key="import_format")
    st.checkbox("Replace stored cases whose content changed", key="import_replace")
    upload = st.session_state["import_file"]
    chosen = st.session_state["import_format"]
    options = ImportOptions(
        format=None if chosen == "detect" else chosen,
        replace=st.session_state["import_replace"],
    )
    if upload is not None:
        # Checked as the import would (the same file and options), against what is
        # stored too (contracts, cases).
        name, data = upload.name, upload.getvalue()
        report = validate_upload(cached.engine(), actor, name=name, data=data, options=options)
        if not report.ok:
            st.error("This file cannot be imported; nothing was stored.")
            st.text(report.error or "")
        else:
            st.success(
                f"{len(report.cases):d} cases in format {code_span(report.format)}: "
                + ", ".join(
                    f"{escape(lane)} {count:d}" for lane, count in sorted(report.lanes.items())
                )
            )
            st.dataframe(report.cases, hide_index=True, key="import_preview")
            if st.button("Import these cases", key="import_submit", type="primary"):
                try:
                    summary = import_upload(
                        cached.engine(), actor, name=name, data=data, options=options
                    )
                except InputError as error:
                    st.error("Nothing was stored.")
                    st.text(str(error))
                else:
                    st.success(escape(summary.line()))

with labels_tab:
    st.caption("Columns: case_id,turn,reviewer,label,rubric,rationale (all rows or none).")
    st.file_uploader("Label file (CSV)", type=["csv"], key="labels_file")
    labels_upload = st.session_state["labels_file"]
    if labels_upload is not None and st.button("Import labels", key="labels_submit"):
        try:
            result = import_label_upload(
                cached.engine(),
                actor,
                name=labels_upload.name,
                data=labels_upload.getvalue(),
                catalog=cached.catalog(),
                sign_in_enabled=auth.auth_mode() != "local",
            )
        except (InputError, PermissionDenied) as error:
            st.error("Nothing was stored.")
            st.text(str(error))
        else:
            st.success(escape(result.line()))
