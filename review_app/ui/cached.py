"""Cached reads, shared between the sessions of a server: the engine, the rubric
catalog, the built view of a case, and the report accessors (each checks the session's
actor at every call; heavy reports are stored per state of the data, see
:mod:`review_app.services.reports.report_store`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from review_app.rubrics.catalog import default_rubrics_dir
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_views import CaseView, case_fingerprint, load_case_view
from review_app.services.judging.drift import DriftReport
from review_app.services.judging.estimate import BreakRateEstimate
from review_app.services.judging.judge_report import FewShotExample, JudgeCalibrationReport
from review_app.services.judging.selective import CoverageCurve
from review_app.services.labels.adjudication import DisagreementUnit
from review_app.services.operations import page_run
from review_app.services.operations.database import database_url, open_database
from review_app.services.reports import report_store
from review_app.services.reports.report_store import Shown
from review_app.services.review.agreement_reports import (
    ConfusionCell,
    DashboardData,
    confusion_between,
)
from review_app.services.rubrics.rubric_catalog import (
    RubricCatalog,
    catalog_token,
    sync_rubrics,
)
from review_app.ui.session import actor


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
    url: str,
    root: str,
    signature: tuple[tuple[str, float], ...],
    stored: tuple[int, int, str, str],
    _who: Actor,
) -> RubricCatalog:
    # part of the cache key only: a changed file, or a version stored, drafted or
    # published by another server or the command line, loads again
    del signature, stored
    return sync_rubrics(_engine(url), _who, directory=Path(root))


def catalog() -> RubricCatalog:
    """The rubric catalog, shared between sessions; each call checks the session's actor."""
    who = authorize(engine(), actor(), "reviewer")
    root = default_rubrics_dir()
    # read once per page run: a page asks for the catalog several times
    stored = page_run.run_memo(engine(), "rubric_versions", lambda: catalog_token(engine(), who))
    return _catalog(database_url(), str(root), _rubric_signature(root), stored, who)


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


def dashboard(ref: str) -> Shown[DashboardData]:
    """The agreement dashboard (review_app/services/reports/report_store.py: stored per state of
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


def drift(ref: str, run_id: int | None = None) -> Shown[DriftReport]:
    """The drift report of gold and run ``run_id`` (``None``: the default run, the team's
    judge or the newest complete one), recomputed when labels or runs change."""
    return report_store.drift(engine(), actor(), rubric=catalog().for_reports(ref), run_id=run_id)


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
