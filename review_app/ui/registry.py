"""The page registry: every page of the app, its script under ``views/``, title, icon
and address (the entry script routes with :func:`pages`; pages link with :func:`page`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).resolve().parent / "views"


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
