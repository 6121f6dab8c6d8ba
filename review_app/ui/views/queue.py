"""Queue: the cases assigned to me for a rubric version, with my progress."""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from review_app.errors import InputError
from review_app.services.cases.case_views import LANES
from review_app.services.rubrics.rubric_carry import re_review_queue
from review_app.services.team.people import list_people
from review_app.services.team.queue import assign_cases, informative_queue, next_case, queue_page
from review_app.ui import cached, common, registry, session
from review_app.ui.safe import code_list, code_span, error_text, escape

actor = session.actor()
rubric = common.rubric_page("Queue")


def _filter_changed(key: str) -> None:
    session.keep(key)
    st.session_state["queue_page"] = 1  # another selection starts on its first page


ORDERS = {"oldest": "Queue order (case id)", "informative": "Most informative first"}

left, middle, right = st.columns([1, 1, 1])
left.selectbox(
    "Lane",
    ["all", *LANES],
    key=session.widget_key("queue_lane"),
    on_change=_filter_changed,
    args=("queue_lane",),
)
middle.toggle(
    "Not yet labeled by me",
    key=session.widget_key("queue_unlabeled"),
    on_change=_filter_changed,
    args=("queue_unlabeled",),
)
right.selectbox(
    "Order",
    list(ORDERS),
    format_func=ORDERS.__getitem__,
    key=session.widget_key("queue_order"),
    on_change=_filter_changed,
    args=("queue_order",),
    help="Most informative first: where the judge is unsure or its runs disagree, where "
    "reviewers disagree, where a finding contradicts a label. Audit-sample cases keep "
    "their place.",
)
lane = common.chosen("queue_lane")

why: dict[str, str] = {}
shown: dict[str, Any] = {
    "rubric": rubric,
    "lane": lane,
    "only_unlabeled": st.session_state["queue_unlabeled"],
    "page": st.session_state["queue_page"],
}
if st.session_state["queue_order"] == "informative":
    result, scored = informative_queue(cached.engine(), actor, **shown)
    why = {case_id: found.why for case_id, found in scored.items()}
else:
    result = queue_page(cached.engine(), actor, **shown)
st.progress(
    result.progress,
    text=f"{result.completed} of {result.assigned} assigned cases labeled under {rubric.ref}",
)

following = next_case(
    cached.engine(), actor, rubric=rubric, after=None, order=st.session_state["queue_order"]
)
if following is not None:
    opener = st.container(horizontal=True, gap="small", vertical_alignment="center")
    if opener.button("Open my next case (N)", key="queue_open_next", shortcut="N", type="primary"):
        st.switch_page(registry.page("review"), query_params={"case": following})
    opener.caption(code_span(following))

if not result.rows:
    if result.assigned == 0:
        st.info(
            "No cases are assigned to you for this rubric version yet. "
            "A policy owner assigns them (below, or `review-app assign`)."
        )
    else:
        st.info("No case matches these filters.")
else:
    review_page = registry.page("review")
    # Rows are horizontal containers with fixed cell widths rather than st.columns:
    # they line up the same and cost half the elements at every rerun.
    widths = (380, 150, 110, 130)

    def _row() -> DeltaGenerator:
        return st.container(horizontal=True, gap="small", vertical_alignment="center")

    header = _row()
    for width, title in zip(widths, ("Case", "Lane", "My labels", "First violation"), strict=True):
        header.caption(escape(title), width=width)
    for row in result.rows:
        cells = _row()
        cells.page_link(
            review_page,
            label=escape(row.case_id),
            query_params={"case": row.case_id},
            width=widths[0],
        )
        cells.markdown(code_span(row.lane or "-"), width=widths[1])
        cells.markdown(
            f"{row.labeled_turns:d} / {row.n_assistant_turns:d}" + (" ✓" if row.completed else ""),
            width=widths[2],
        )
        # "—", not "-": a lone hyphen is an empty Markdown list item (a stray bullet).
        cells.markdown(
            "—" if row.first_violation_turn is None else f"turn {row.first_violation_turn:d}",
            width=widths[3],
        )
        if why.get(row.case_id):
            cells.caption(escape(why[row.case_id]))
    if result.n_pages > 1:
        st.session_state["queue_page"] = result.page
        # st.pagination has a default, so writing its state (the widget_key pattern)
        # logs a warning; the kept page comes in as the default instead, and each
        # selection of filters has its own pager (so a new selection starts afresh).
        pager = "_w_queue_page_{}_{}".format(
            st.session_state["queue_lane"], st.session_state["queue_unlabeled"]
        )
        st.pagination(
            result.n_pages,
            default=result.page,
            key=pager,
            on_change=lambda: st.session_state.update(queue_page=st.session_state[pager]),
        )
    st.caption(f"{result.n_matching:d} matching cases")

re_review = [
    item
    for item in re_review_queue(cached.engine(), actor, catalog=cached.catalog(), rubric=rubric)
    if not item.done
]
if re_review:
    with st.expander(f"Re-review: {len(re_review)} turns whose label's meaning changed"):
        st.caption(
            "You labeled these turns under the previous version with a code that was "
            "narrowed, widened, split or merged; label them again under "
            f"{code_span(rubric.ref)} (the review page shows both definitions)."
        )
        for item in re_review[:50]:
            cells = st.container(horizontal=True, gap="small", vertical_alignment="center")
            cells.page_link(
                registry.page("review"),
                label=f"{escape(item.case_id)} turn {item.turn:d}",
                query_params={"case": item.case_id},
                width=380,
            )
            cells.markdown(
                f"was {code_span(item.old_code)} → {code_list(item.new_codes)}", width=360
            )
        if len(re_review) > 50:
            st.caption(f"… and {len(re_review) - 50:d} more")

if actor.has_role("policy_owner"):
    with st.expander("Assign cases to reviewers"):
        people = [p.name for p in list_people(cached.engine())]
        st.multiselect("Reviewers", people, key="assign_reviewers")
        st.number_input(
            "Fill each case up to N reviewers",
            min_value=1,
            max_value=10,
            key="assign_overlap",
            help="Everyone already assigned counts: a case with N or more gets nobody new. "
            "To add reviewers whoever else has a case, with a preview, use the team page.",
        )
        st.selectbox(
            "Cases",
            ["all", *LANES],
            key="assign_lane",
            format_func=lambda v: "all cases" if v == "all" else f"lane {v}",
        )
        if st.button("Assign", key="assign_submit"):
            try:
                report = assign_cases(
                    cached.engine(),
                    actor,
                    rubric=rubric,
                    reviewers=st.session_state["assign_reviewers"],
                    mode="fill",
                    overlap=int(st.session_state["assign_overlap"]),
                    lane=common.chosen("assign_lane"),
                )
            except InputError as error:
                st.error(error_text(error))
            else:
                st.success(escape(report.line()))
