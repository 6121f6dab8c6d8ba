"""What several pages share: their opening (who may see the page, which rubric
version), a choice where "all" means no filter, and a disagreement's row of links."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from review_app.rubrics import Rubric
from review_app.services.labels.adjudication import DisagreementUnit
from review_app.services.team.people import Actor
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
