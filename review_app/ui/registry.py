"""The page registry: every page of the app, its script under ``views/``, title, icon,
address and the least role that may use it (the entry script routes with
:func:`pages_for`, so the sidebar lists only the pages the signed-in person can use;
pages link with :func:`page`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from review_app.services.access.actors import Actor

PAGES_DIR = Path(__file__).resolve().parent / "views"


def page(name: str) -> st.Page:
    return PAGES[name]


PAGE_TABLE = (
    ("queue", "Queue", ":material/inbox:", "reviewer"),
    ("review", "Review", ":material/forum:", "reviewer"),
    ("rubrics", "Rubrics", ":material/menu_book:", "reviewer"),
    ("agreement", "Agreement", ":material/analytics:", "policy_owner"),
    ("adjudicate", "Adjudicate", ":material/gavel:", "policy_owner"),
    ("judge", "Judge", ":material/smart_toy:", "policy_owner"),
    ("import", "Import", ":material/upload:", "policy_owner"),
    ("export", "Export", ":material/download:", "policy_owner"),
    ("team", "Team", ":material/group:", "policy_owner"),
)
"""``(address, title, icon, least role)`` of each page, in the sidebar's order. The
pages check the role themselves too (a page's service refuses anyone below it)."""
LEAST_ROLE = {name: role for name, _, _, role in PAGE_TABLE} | {"home": "reviewer"}


def _build_pages() -> dict[str, st.Page]:
    pages = {
        name: st.Page(str(PAGES_DIR / f"{name}.py"), title=title, icon=icon, url_path=name)
        for name, title, icon, _ in PAGE_TABLE
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
    """Every page."""
    if not PAGES:
        PAGES.update(_build_pages())
    return list(PAGES.values())


def page_names_for(actor: Actor) -> list[str]:
    """The addresses of the pages ``actor`` can use (a reviewer: queue, review, rubrics;
    a policy owner or admin: all), the hidden root last."""
    return [name for name, role in LEAST_ROLE.items() if actor.has_role(role)]


def pages_for(actor: Actor) -> list[st.Page]:
    """The pages the entry script routes for ``actor``: the sidebar lists these only,
    and an address of another page opens the queue ("page not found")."""
    pages()
    return [PAGES[name] for name in page_names_for(actor)]
