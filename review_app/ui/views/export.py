"""Export: labeled regression fixtures and data, as downloads."""

from __future__ import annotations

import streamlit as st

from review_app.errors import InputError
from review_app.services.cases.case_views import LANES
from review_app.services.exchange.export import EXPORT_FORMATS, export_data, export_file_name
from review_app.services.exchange.uploads import zip_export
from review_app.ui import cached, common, session
from review_app.ui.safe import error_text, escape

actor = common.policy_owner("Exporting is for policy owners.")
rubric = common.rubric_page("Export")

st.selectbox(
    "Format",
    EXPORT_FORMATS,
    key="export_format",
    help="fixtures: JSON cases + expected block + a pytest module + manifest",
)
st.selectbox("Cases", ["all", *LANES], key="export_lane")
st.checkbox("Redact transcript text (keep events and labels)", key="export_redact")
# What a prepared file was made from: a download is offered only while the choices on
# the page are still these (the file would otherwise be another export than they say).
choices = {
    "rubric": rubric.ref,
    "format": st.session_state["export_format"],
    "lane": st.session_state["export_lane"],
    "redact": bool(st.session_state["export_redact"]),
}
if st.button("Prepare export", key="export_prepare", type="primary"):
    try:
        result = export_data(
            cached.engine(),
            session.actor(),
            rubric=rubric,
            format=st.session_state["export_format"],
            redact=st.session_state["export_redact"],
            lane=common.chosen("export_lane"),
        )
    except InputError as error:
        st.error(error_text(error))
    else:
        st.session_state["export_ready"] = {
            "choices": choices,
            "name": export_file_name(
                rubric,
                format=choices["format"],
                lane=common.chosen("export_lane"),
                redact=choices["redact"],
            ),
            "zip": zip_export(cached.engine(), session.actor(), result),
            "manifest": result.files["manifest.json"],
            "summary": result.line(),
        }
ready = st.session_state["export_ready"]
if ready and ready.get("choices") != choices:
    st.session_state["export_ready"] = ready = None
    st.info("The choices changed since the last export was prepared: prepare it again.")
if ready:
    st.success(escape(ready["summary"]))
    st.download_button(
        "Download (zip)",
        ready["zip"],
        file_name=ready["name"],
        mime="application/zip",
        key="export_download",
    )
    st.download_button(
        "Download the manifest",
        ready["manifest"],
        file_name="manifest.json",
        mime="application/json",
        key="export_manifest",
    )
    st.code(ready["manifest"].decode("utf-8"), language="json")
