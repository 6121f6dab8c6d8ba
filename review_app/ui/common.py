"""What several pages share: their opening (who may see the page, which rubric
version), a choice where "all" means no filter, a disagreement's row of links, and the
sentence saying a report's intervals are still being computed."""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from review_app.rubrics import Rubric
from review_app.services.adjudication import DisagreementUnit
from review_app.services.people import Actor
from review_app.services.report_store import Shown
from review_app.ui import state
from review_app.ui.safe import code_span, escape

FIRST_ROWS = 30
"""Rows a page draws of a long list (disagreements): each row is several elements, so a
page showing hundreds would load several times slower on a large database than on the
demo; the rest is one click away (the adjudication page, a filter)."""


def policy_owner(forbidden: str) -> Actor:
    """The signed-in policy owner; anyone else sees ``forbidden`` and nothing more."""
    actor = state.actor()
    if not actor.has_role("policy_owner"):
        state.forbidden(forbidden)
    return actor


def rubric_page(title: str) -> Rubric:
    """The rubric version chosen in the sidebar, under the page's title (the page
    stops there when there is no usable rubric version)."""
    rubric = state.rubric_selector()
    st.title(escape(title))
    if rubric is None:
        st.stop()
    return rubric


def chosen(key: str) -> str | None:
    """A select box's value, ``None`` for its "all" entry."""
    value = st.session_state[key]
    return None if value == "all" else value


def disagreement_row(unit: DisagreementUnit, widths: list[int]) -> list[DeltaGenerator]:
    """A unit's link to its adjudication, its codes and kinds; the row's cells."""
    cells = st.columns(widths)
    cells[0].page_link(
        state.page("adjudicate"),
        label=f"{escape(unit.case_id)} · turn {unit.turn:d}",
        query_params={"case": unit.case_id, "turn": str(unit.turn)},
    )
    cells[1].markdown(", ".join(code_span(code) for code in unit.codes))
    cells[2].caption(", ".join(escape(kind.replace("_", " ")) for kind in unit.kinds))
    return cells


INTERVALS_REFRESH_SECONDS = 3
"""How often a page waiting for intervals asks whether they are ready."""


def intervals_notice(*shown: Shown[Any]) -> None:
    """Under a page's headline: one sentence while the intervals of ``shown`` reports are
    computed in the background (the page draws again by itself once they are stored),
    or why they could not be."""
    failed = [report.error for report in shown if report.intervals == "failed"]
    if failed:
        st.caption("The intervals could not be computed; the figures show without them.")
        st.text(str(failed[0]))
    waiting = [report.waiting for report in shown if report.computing and report.waiting]
    if waiting:
        st.info(
            "Intervals are being computed in the background; until they are ready the "
            "figures show without them, and this page adds them by itself.",
            icon=":material/hourglass_top:",
        )
        _redraw_when_ready(waiting)


@st.fragment(run_every=INTERVALS_REFRESH_SECONDS)
def _redraw_when_ready(waiting: list[dict[str, Any]]) -> None:
    # A fragment reruns alone every few seconds; the whole page reruns once one of the
    # awaited reports has its intervals (or its job ended).
    if any(state.intervals_ready(one) for one in waiting):
        st.rerun(scope="app")
