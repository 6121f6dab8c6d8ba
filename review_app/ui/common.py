"""What several pages share: their opening (who may see the page, which rubric
version, a word to someone with unfinished work of their own), a choice where "all"
means no filter, a disagreement's row of links, and the sentence saying a report is
still being computed in the background."""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor
from review_app.services.labels.adjudication import DisagreementUnit
from review_app.services.reports.report_store import Shown
from review_app.services.rubrics.rubric_catalog import RubricCatalog, default_ref_for
from review_app.services.team.queue import open_review_work
from review_app.ui import cached, registry, session
from review_app.ui.safe import code_span, escape

FIRST_ROWS = 30
"""Rows a page draws of a long list (disagreements): each row is several elements, so a
page showing hundreds would load several times slower on a large database than on the
demo; the rest is one click away (the adjudication page, a filter)."""


def policy_owner(message: str) -> Actor:
    """The signed-in policy owner; anyone else sees ``message`` and nothing more."""
    actor = session.actor()
    if not actor.has_role("policy_owner"):
        forbidden(message)
    return actor


def selected_rubric(rubrics: RubricCatalog | None = None) -> Rubric | None:
    """The rubric version chosen in the sidebar (a valid one, or ``None`` if none exists).

    Pass the catalog when the caller has it: each :func:`~review_app.ui.cached.catalog`
    call looks at the rubric files and hashes the cache key again.
    """
    if rubrics is None:
        rubrics = cached.catalog()
    refs = rubrics.refs
    if not refs:
        return None
    if st.session_state["rubric_ref"] not in refs:
        # the version the person's assignments name; never a draft
        st.session_state["rubric_ref"] = default_ref_for(cached.engine(), session.actor(), rubrics)
    return rubrics.get(st.session_state["rubric_ref"])


def rubric_selector() -> Rubric | None:
    rubrics = cached.catalog()
    selected = selected_rubric(rubrics)
    if selected is None:
        st.sidebar.error("No usable rubric version. Add one under rubrics/<id>/v<N>.yaml.")
    else:
        st.sidebar.selectbox(
            "Rubric version",
            rubrics.refs,
            key=session.widget_key("rubric_ref"),
            on_change=session.keep,
            args=("rubric_ref",),
        )
        selected = rubrics.get(st.session_state["rubric_ref"])
    if session.actor().has_role("policy_owner"):
        # Why a rubric file is refused is for those who keep the rubrics; the names
        # and reasons hold no directory of the server.
        for ref, message in sorted(rubrics.refused.items()):
            st.sidebar.warning(f"Rubric {escape(ref)} is not offered.")
            st.sidebar.text(message)
    return selected


def own_work_notice(rubric: Rubric) -> None:
    """On pages showing everyone's labels: say so to someone with unfinished cases of
    their own under this rubric version (their labeling is blind until they look)."""
    left = open_review_work(cached.engine(), session.actor(), rubric=rubric)
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


def rubric_page(title: str) -> Rubric:
    """The rubric version chosen in the sidebar, under the page's title (the page
    stops there when there is no usable rubric version)."""
    rubric = rubric_selector()
    st.title(escape(title))
    if rubric is None:
        st.stop()
    return rubric


def chosen(key: str) -> str | None:
    """A select box's value, ``None`` for its "all" entry."""
    value = st.session_state[key]
    return None if value == "all" else value


def disagreement_row(unit: DisagreementUnit) -> DeltaGenerator:
    """A unit's link to its adjudication, then its codes and kinds, on one line; the row.

    Three elements a row (a page of 30 rows used to send 210: a block of three columns
    each), which is what a browser spends most of a warm agreement page drawing."""
    row = st.container(horizontal=True, vertical_alignment="center", gap="medium")
    row.page_link(
        registry.page("adjudicate"),
        label=f"{escape(unit.case_id)} · turn {unit.turn:d}",
        query_params={"case": unit.case_id, "turn": str(unit.turn)},
    )
    codes = ", ".join(code_span(code) for code in unit.codes)
    kinds = ", ".join(escape(kind.replace("_", " ")) for kind in unit.kinds)
    row.caption(f"{codes} · {kinds}" if kinds else codes)
    return row


REPORT_REFRESH_SECONDS = 3
"""How often a page waiting for a report computed in the background asks whether it is ready."""

INTERVALS_NOTICE = (
    "Intervals are being computed in the background; until they are ready the figures "
    "show without them, and this page adds them by itself."
)


def mark_chosen(key: str) -> None:
    """``on_change`` callback: the person chose this value themselves (pages stop
    replacing it with the default)."""
    st.session_state[key] = True


def report_notice(*shown: Shown[Any]) -> None:
    """One sentence when some of the page's reports are not final: figures from before the
    latest change, or without their intervals, while a background job computes them (the
    page draws again by itself once they are stored); or why the intervals could not be
    computed."""
    failed = [report.error for report in shown if report.status == "failed"]
    if failed:
        st.caption("The intervals could not be computed; the figures show without them.")
        st.text(str(failed[0]))
    stale = [r.computed_at for r in shown if r.status == "stale" and r.computed_at is not None]
    if stale:
        st.info(
            f"These figures were computed at {min(stale):%Y-%m-%d %H:%M} UTC, before the latest "
            "change of labels, gold labels or verdicts; the current ones are being computed "
            "in the background and this page shows them by itself when they are ready.",
            icon=":material/hourglass_top:",
        )
    elif any(report.status == "computing" for report in shown):
        st.info(INTERVALS_NOTICE, icon=":material/hourglass_top:")
    waiting = [report.waiting for report in shown if report.pending and report.waiting]
    if waiting:
        _redraw_when_ready(waiting)


@st.fragment(run_every=REPORT_REFRESH_SECONDS)
def _redraw_when_ready(waiting: list[dict[str, Any]]) -> None:
    # A fragment reruns alone every few seconds; the whole page reruns once one of the
    # awaited reports is stored (or its job ended).
    if any(cached.intervals_ready(one) for one in waiting):
        st.rerun(scope="app")
