"""This session's state: every key it uses, set in one place, and what pages read and write
of it (widget copies of persistent values, the signed-in actor, the form to reset, the
message shown once after a rerun).

Every session-state key the app uses is declared in :data:`DEFAULTS` and set by
:func:`init_session` at the top of each run; pages read and write those keys only.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from review_app.errors import PermissionDenied
from review_app.services.access.actors import Actor
from review_app.ui.safe import escape

# key -> default value
DEFAULTS: dict[str, Any] = {
    "rubric_ref": None,  # the rubric version being labeled against
    "queue_lane": "all",
    "queue_unlabeled": False,
    "queue_page": 1,
    "queue_order": "oldest",  # or "informative"
    "focus": None,  # {"case": case_id, "turn": turn} on the review page
    "review_window": None,  # (case_id, start, end, anchor): the turns a long case draws
    "key_acked": {},  # review page: {client id: highest key press stored} (replace, never mutate)
    "key_commands": [],  # review page: ids of the keyboard commands already run
    "key_notice": None,  # review page: a message for the labeling panel
    "auto_advance": False,  # review page: open the next case once every turn is labeled
    "flash": None,  # a message to show once after a rerun
    "signed_in": None,  # (identity, actor issued by sign_in): reruns re-authorize it
    "jump_case": "",
    "assign_reviewers": [],
    "assign_overlap": 2,
    "assign_lane": "all",
    "rubric_example_label": "(all)",
    "draft_rubric": None,  # rubrics page: the rubric whose next version is written
    "draft_text": "",  # the YAML of the next version being written
    "draft_text_of": None,  # the version whose text the area holds
    "draft_code": None,  # the code the per-code form edits
    "draft_preview": None,  # the publication's preview: {"sha", counts} or {"sha", "error"}
    "draft_confirm": False,  # the confirmation naming the consequence (never preselected)
    "draft_result": None,  # the last publication's counts: the result panel
    "compare_old": None,
    "compare_new": None,
    "agreement_rubric": None,
    "confusion_a": None,
    "confusion_b": None,
    "adjudicate_all": False,
    "adjudicate_show_queue": False,  # the queue below the unit (drawn only when asked for)
    "adjudicate_unit": None,  # {"case", "turn"}: the unit open on the adjudicate page
    "gold_unit": None,  # the unit the gold form's values belong to
    "gold_code": None,
    "gold_note": "",
    "gold_calibration": False,
    "gold_ambiguity": "",
    "import_format": "detect",
    "import_replace": False,
    "export_format": "fixtures",
    "export_lane": "all",
    "export_redact": False,
    "export_ready": None,
    "judge_score_means": "break",
    "judge_run": None,
    "judge_view": "Calibration",  # or "Prompt workbench"
    "workbench_version": None,  # judge@vN chosen in the workbench
    "workbench_text": "",  # the Prompt text area
    "workbench_saved": None,  # the version just saved: selected on the next run
    "workbench_text_of": None,  # the version whose text the area was filled with
    "workbench_endpoint": None,
    "judge_everywhere_endpoint": None,  # the decision card's endpoint for a run on every turn
    "workbench_job": None,  # the id of the job this session started
    "workbench_first": None,  # the runs compared (the default pair until chosen by hand)
    "workbench_second": None,
    "workbench_pair_chosen": False,  # the pair was chosen by hand (else: the default pair)
    "workbench_seen_end": None,  # the finished job whose end the page has reread
    "workbench_version_chosen": False,  # a version was picked (else: the team's judge)
    "align_endpoint": None,  # "Suggest a better prompt": the judge's endpoint
    "align_optimizer": None,  # and the optimiser's (never preselected to the judge's)
    "align_budget": 200,
    "align_confirm_share": 0.3,
    "align_seed": 0,
    "align_job": None,  # the align job this session started
    "align_seen_end": None,  # the finished align job whose end the page has reread
    "judge_run_chosen": False,  # the judge page's run was chosen (else: the default run)
    "judge_method": "isotonic",
    "judge_kind": "all",
    "judge_label": "all",
    "judge_route_alpha": 0.1,
    "judge_route_delta": 0.1,
    "judge_audit_result": None,  # judge page: the last audit draw ({"key", "ok", "text"})
    "strata_by": "position",  # judge page: the strata of the break rate by stratum
    "team_result": None,  # team page: the result panel ({"title", "lines", "pairs"})
    "team_assign_planned": None,  # team page: (request, AssignmentReport) previewed
    "team_uncertain_planned": None,  # team page: (request, UncertaintySample) previewed
    "team_rights_pending": None,  # team page: (request, RightsPreview) awaiting confirmation
}

_GOLD_FORM = ("gold_code", "gold_note", "gold_calibration", "gold_ambiguity")


def reset_gold_form() -> None:
    for key in _GOLD_FORM:
        st.session_state[key] = DEFAULTS[key]


def init_session() -> None:
    for key, value in DEFAULTS.items():
        if key not in st.session_state:
            st.session_state[key] = value


def widget_key(key: str) -> str:
    """The key of the widget that edits the persistent session value ``key``.

    Streamlit forgets a widget's state on a page that does not draw the widget, so
    values that must survive page changes live under ``key`` and the widget edits a
    copy (``_w_<key>``), written back by :func:`keep`.
    """
    widget = f"_w_{key}"
    st.session_state[widget] = st.session_state[key]
    return widget


def keep(key: str) -> None:
    """``on_change`` callback: store the widget's new value under the persistent key."""
    st.session_state[key] = st.session_state[f"_w_{key}"]


def actor() -> Actor:
    """The actor for pages (the entry script has already made sure there is one)."""
    found = st.session_state.get("_actor")
    if found is None:
        raise PermissionDenied("nobody is signed in")
    assert isinstance(found, Actor)
    return found


def flash(message: str) -> None:
    st.session_state["flash"] = message


def show_flash() -> None:
    message = st.session_state.get("flash")
    if message:
        st.toast(escape(message))
        st.session_state["flash"] = None
