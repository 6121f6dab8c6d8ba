"""The demo database the AppTest page tests open: loaded once per module or session into a
template file, copied for each test."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database


def demo_template(path: Path, *, local_user: str | None = None) -> Path:
    """A SQLite file at ``path`` with the demo loaded (``local_user`` among its admins)."""
    engine = create_database_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    load_demo(engine, operator_actor(), local_user=local_user)
    engine.dispose()  # the last connection checkpoints the WAL into the file
    return path


@contextmanager
def app_database(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, local_user: str | None
) -> Iterator[str]:
    """The URL of a copy of ``template`` the app opens, signed in through local mode as
    ``local_user`` (None: no sign-in mode set). No auth or rubrics setting is left over
    from the environment; Streamlit's caches (engines and rubric catalogs per URL) are
    cleared before and after."""
    target = tmp_path / "review.db"
    shutil.copyfile(template, target)
    url = f"sqlite:///{target}"
    monkeypatch.setenv("REVIEW_APP_DATABASE_URL", url)
    for name in (
        "REVIEW_APP_AUTH",
        "REVIEW_APP_LOCAL_USER",
        "REVIEW_APP_ADMINS",
        "REVIEW_APP_RUBRICS_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    if local_user is not None:
        monkeypatch.setenv("REVIEW_APP_AUTH", "local")
        monkeypatch.setenv("REVIEW_APP_LOCAL_USER", local_user)
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        yield url
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def plain(markdown: str) -> str:
    """The text a Markdown source escaped by :func:`review_app.ui.safe.escape` shows:
    AppTest hands over an element's Markdown source, the browser shows this."""
    unescaped = _ESCAPED.sub(r"\1", markdown.replace("  \n", "\n"))
    return unescaped.replace("\u2060", "")  # the word joiners that stop autolinks


def routed_pages(at: Any) -> list[str]:
    """The addresses the entry script routed on its last run (what the sidebar can list
    and an address can open), in order; the root (the queue) is ``""``."""
    return [
        str(info["url_pathname"])
        for info in at._registered_pages.values()
        if info.get("url_pathname") is not None
    ]
