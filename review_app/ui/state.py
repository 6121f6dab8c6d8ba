"""Session state, shared resources and the page registry, in one place.

Every session-state key the app uses is declared in :data:`DEFAULTS` and set by
:func:`init_session` at the top of each run; pages read and write those keys only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from review_app.errors import PermissionDenied
from review_app.rubrics import Rubric, default_rubrics_dir
from review_app.services.cases.cases import CaseView, case_fingerprint, load_case_view
from review_app.services.judging.drift import DriftReport
from review_app.services.judging.estimate import BreakRateEstimate
from review_app.services.judging.judge_report import FewShotExample, JudgeCalibrationReport
from review_app.services.judging.selective import CoverageCurve
from review_app.services.labels.adjudication import DisagreementUnit
from review_app.services.operations.database import database_url, open_database
from review_app.services.review import report_store
from review_app.services.review.agreement_reports import (
    ConfusionCell,
    DashboardData,
    confusion_between,
)
from review_app.services.review.queue import open_review_work
from review_app.services.review.report_store import Shown
from review_app.services.rubrics.rubric_catalog import RubricCatalog, sync_rubrics
from review_app.services.team.people import Actor, authorize, sign_in
from review_app.ui import auth
from review_app.ui.safe import escape

PAGES_DIR = Path(__file__).resolve().parent / "views"

# key -> default value
DEFAULTS: dict[str, Any] = {
    "rubric_ref": None,  # the rubric version being labeled against
    "queue_lane": "all",
    "queue_unlabeled": False,
    "queue_page": 1,
    "queue_order": "oldest",  # or "informative"
    "focus": None,  # {"case": case_id, "turn": turn} on the review page
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
    "workbench_first": None,  # the runs compared (None: the default pair)
    "workbench_second": None,
    "workbench_seen_end": None,  # the finished job whose end the page has reread
    "workbench_new_run": False,  # a run just ended: compare it by default
    "judge_newest_run": None,  # the highest run id the judge page has shown
    "judge_method": "isotonic",
    "judge_kind": "all",
    "judge_label": "all",
    "judge_route_alpha": 0.1,
    "judge_route_delta": 0.1,
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


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return open_database(url)


def engine() -> Engine:
    # open_database keeps one engine per URL already; called directly, a page's several
    # calls skip the cache's argument hashing.
    return open_database(database_url())


def _rubric_signature(root: Path) -> tuple[tuple[str, float], ...]:
    if not root.is_dir():
        return ()
    return tuple(sorted((str(p), p.stat().st_mtime) for p in root.glob("*/*.y*ml") if p.is_file()))


@st.cache_resource(show_spinner=False)
def _catalog(
    url: str, root: str, signature: tuple[tuple[str, float], ...], _who: Actor
) -> RubricCatalog:
    del signature  # part of the cache key only: a changed file loads again
    return sync_rubrics(_engine(url), _who, directory=Path(root))


def catalog() -> RubricCatalog:
    """The rubric catalog, shared between sessions; each call checks the session's actor."""
    who = authorize(engine(), actor(), "reviewer")
    root = default_rubrics_dir()
    return _catalog(database_url(), str(root), _rubric_signature(root), who)


def forget_catalog() -> None:
    """After a publication: the next page reads which versions have labels afresh."""
    _catalog.clear()


_CASE_VIEWS: OrderedDict[tuple[str, str, str], CaseView] = OrderedDict()
_CASE_VIEWS_LOCK = threading.Lock()
_CASE_VIEWS_MAX = 64


def case_view(case_id: str) -> CaseView:
    """The case as the review page shows it, built once per content (every label click
    reruns the page on the same case). Shared between sessions: treat it as read-only.
    Raises ``NotFound``, ``PermissionDenied``."""
    who = actor()
    # The fingerprint checks that this actor may open the case (at every call), so the
    # shared built view is handed only to those who may.
    fingerprint = case_fingerprint(engine(), who, case_id=case_id)
    # A plain dictionary, not st.cache_resource: no argument hashing at every rerun.
    key = (database_url(), case_id, fingerprint)
    with _CASE_VIEWS_LOCK:
        found = _CASE_VIEWS.get(key)
        if found is not None:
            _CASE_VIEWS.move_to_end(key)
            return found
    built = load_case_view(engine(), who, case_id=case_id)
    with _CASE_VIEWS_LOCK:
        _CASE_VIEWS[key] = built
        while len(_CASE_VIEWS) > _CASE_VIEWS_MAX:
            _CASE_VIEWS.popitem(last=False)
    return built


def current_actor() -> Actor | None:
    """The signed-in actor, or ``None`` (the entry script then shows the sign-in)."""
    identity = auth.current_identity()
    if identity is None:
        return None
    kept = st.session_state["signed_in"]
    if kept is not None and kept[0] == identity:
        # Signed in at an earlier run of this session: check the issued actor again
        # (its seal, and its current role and active flag from the database).
        return authorize(engine(), kept[1], "reviewer")
    signed_in = sign_in(
        engine(),
        name=identity.name,
        auth_mode=identity.mode,
        display_name=identity.display_name,
        first_role=identity.first_role,
    )
    st.session_state["signed_in"] = (identity, signed_in)
    return signed_in


def actor() -> Actor:
    """The actor for pages (the entry script has already made sure there is one)."""
    found = st.session_state.get("_actor")
    if found is None:
        raise PermissionDenied("nobody is signed in")
    assert isinstance(found, Actor)
    return found


def selected_rubric(rubrics: RubricCatalog | None = None) -> Rubric | None:
    """The rubric version chosen in the sidebar (a valid one, or ``None`` if none exists).

    Pass the catalog when the caller has it: each :func:`catalog` call looks at the
    rubric files and hashes the cache key again.
    """
    if rubrics is None:
        rubrics = catalog()
    refs = rubrics.refs
    if not refs:
        return None
    if st.session_state["rubric_ref"] not in refs:
        st.session_state["rubric_ref"] = rubrics.default_ref()
    return rubrics.get(st.session_state["rubric_ref"])


def rubric_selector() -> Rubric | None:
    rubrics = catalog()
    selected = selected_rubric(rubrics)
    if selected is None:
        st.sidebar.error("No usable rubric version. Add one under rubrics/<id>/v<N>.yaml.")
    else:
        st.sidebar.selectbox(
            "Rubric version",
            rubrics.refs,
            key=widget_key("rubric_ref"),
            on_change=keep,
            args=("rubric_ref",),
        )
        selected = rubrics.get(st.session_state["rubric_ref"])
    for ref, message in sorted(rubrics.refused.items()):
        st.sidebar.warning(f"Rubric {escape(ref)} is not offered.")
        st.sidebar.text(message)
    return selected


def dashboard(ref: str) -> Shown[DashboardData]:
    """The agreement dashboard (review_app/services/review/report_store.py: stored per state of
    the labels, shared by every server; the actor is checked at every call)."""
    known = catalog()
    rubric = known.for_reports(ref)
    return report_store.agreement_dashboard(
        engine(), actor(), rubric=rubric, previous=known.previous_of(rubric)
    )


def confusion(ref: str, reviewer_a: str, reviewer_b: str) -> list[ConfusionCell]:
    return confusion_between(
        engine(),
        actor(),
        rubric=catalog().for_reports(ref),
        reviewer_a=reviewer_a,
        reviewer_b=reviewer_b,
    )


def disagreements(ref: str, *, include_adjudicated: bool = False) -> list[DisagreementUnit]:
    """The disagreement queue, computed again only when labels or gold labels change."""
    return report_store.open_disagreements(
        engine(),
        actor(),
        rubric=catalog().for_reports(ref),
        include_adjudicated=include_adjudicated,
    )


def judge_report(ref: str) -> Shown[JudgeCalibrationReport]:
    """The calibration report of every judge run of the version: verdicts stored by the
    command line or another session show on the next rerun (they change its token)."""
    known = catalog()
    rubric = known.for_reports(ref)
    return report_store.judge_calibration(
        engine(), actor(), rubric=rubric, previous=known.previous_of(rubric)
    )


def drift(ref: str) -> Shown[DriftReport]:
    """The drift report (gold and every judge run), recomputed when labels or runs change."""
    return report_store.drift(engine(), actor(), rubric=catalog().for_reports(ref))


ROUTE_ALPHAS = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def coverage(ref: str, run_id: int, delta: float) -> Shown[CoverageCurve]:
    """Coverage against alpha for one run (the judge page's dial)."""
    return report_store.run_coverage(
        engine(),
        actor(),
        rubric=catalog().for_reports(ref),
        run_id=run_id,
        delta=delta,
        alphas=list(ROUTE_ALPHAS),
        min_units=30,
    )


def estimate(ref: str, run_id: int) -> Shown[BreakRateEstimate]:
    """The judge page's break rate of one run (PPI++): it reads every verdict of the run
    (hundreds of thousands at team scale), too slow for every rerun."""
    return report_store.run_estimate(
        engine(), actor(), rubric=catalog().for_reports(ref), run_id=run_id
    )


def few_shot(ref: str, run_id: int) -> Shown[list[FewShotExample]]:
    """The judge page's few-shot examples for a run (they read every label and gold label
    of the version)."""
    return report_store.run_few_shot(
        engine(), actor(), rubric=catalog().for_reports(ref), run_id=run_id
    )


def intervals_ready(waiting: dict[str, Any]) -> bool:
    """Whether the report a page waits for is stored (or its job ended)."""
    return report_store.intervals_ready(engine(), actor(), waiting=waiting)


def page(name: str) -> st.Page:
    return PAGES[name]


def _build_pages() -> dict[str, st.Page]:
    spec = [
        ("queue", "Queue", ":material/inbox:"),
        ("review", "Review", ":material/forum:"),
        ("rubrics", "Rubrics", ":material/menu_book:"),
        ("agreement", "Agreement", ":material/analytics:"),
        ("adjudicate", "Adjudicate", ":material/gavel:"),
        ("judge", "Judge", ":material/smart_toy:"),
        ("import", "Import", ":material/upload:"),
        ("export", "Export", ":material/download:"),
        ("team", "Team", ":material/group:"),
    ]
    pages = {
        name: st.Page(str(PAGES_DIR / f"{name}.py"), title=title, icon=icon, url_path=name)
        for name, title, icon in spec
    }
    # The app's root shows the queue too. Streamlit serves its default page only at the
    # root (``/queue`` would be "Page not found"), so the default is a hidden second
    # page on the queue's script and every page in the README opens by its address.
    pages["home"] = st.Page(
        str(PAGES_DIR / "queue.py"),
        title="Queue",
        icon=":material/inbox:",
        url_path="home",
        default=True,
        visibility="hidden",
    )
    return pages


PAGES: dict[str, st.Page] = {}


def pages() -> list[st.Page]:
    if not PAGES:
        PAGES.update(_build_pages())
    return list(PAGES.values())


def flash(message: str) -> None:
    st.session_state["flash"] = message


def show_flash() -> None:
    message = st.session_state.get("flash")
    if message:
        st.toast(escape(message))
        st.session_state["flash"] = None


def own_work_notice(rubric: Rubric) -> None:
    """On pages showing everyone's labels: say so to someone with unfinished cases of
    their own under this rubric version (their labeling is blind until they look)."""
    left = open_review_work(engine(), actor(), rubric=rubric)
    if left:
        st.warning(
            f"You have {left:d} unfinished case{'s' if left != 1 else ''} in your own review "
            f"queue under {escape(rubric.ref)}. This page shows other reviewers' labels: label "
            "your queue first to keep your own labels blind.",
            icon=":material/visibility:",
        )


def forbidden(message: str) -> None:
    """Say the page is not for this person and show nothing else."""
    st.error(escape(message))
    st.stop()
