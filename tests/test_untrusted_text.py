"""Text from data or from the address is shown as text, and the address is checked like
any other input: the services on both databases, the pages through AppTest.

What a Markdown-rendering element would draw is checked by rendering its source with a
CommonMark renderer (markdown-it): no image, no link, no HTML. The browser's own view of
the same (remote image requests counted) is in ``tests/test_browser_untrusted.py``.
"""

from __future__ import annotations

import copy
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review_app.errors import NotFound
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.case_views import case_fingerprint, load_case_view
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES
from review_app.services.labels.adjudication import unit_detail
from review_app.services.labels.labeling import case_labels, record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from review_app.ui.safe import code_span, error_text, escape
from storage.engine import shared_engine
from tests.conftest import Database
from tests.test_ui_apptest import (
    APP,
    MARKDOWN_TYPES,
    TIMEOUT,
    assign,
    demo_case,
    import_cases,
    open_app,
    run,
    walk,
)
from tests.ui_support import app_database, demo_template, plain

RUBRIC = "role-adherence@1"
IMAGE = "![x](http://127.0.0.1:9/p.png)"
LINK = "[Session expired](http://127.0.0.1:9/)"
STORED_ID = "![](http://127.0.0.1:9/x.png)"  # no space: the id rules let it in
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def drawn(source: str) -> str:
    """The HTML a CommonMark renderer makes of a Markdown source."""
    return _MARKDOWN.render(source)


def assert_literal(source: str) -> None:
    """``source`` draws no image, link or HTML, and no autolink can start in it (GFM
    links ``http://...``, ``www.`` and ``a@b`` even without brackets)."""
    html = drawn(source)
    for tag in ("<img", "<a ", "<script", "<em>", "<strong>", "<h1", "<code><img"):
        assert tag not in html, (source, html)
    for bare in ("http://", "https://", "www.", "javascript:"):
        assert bare not in source, source
    assert re.search(r"(?<!\\)@", source) is None, source


# --- the helper ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        IMAGE,
        LINK,
        STORED_ID,
        "<img src=http://127.0.0.1:9/h.png>",
        "**bold** _it_ ~~gone~~ `code` $x^2$ :material/home: :red[red]",
        "# heading\n- item\n1. first\n> quote\n| a | b |\n|---|---|",
        "www.example.com ana@example.com https://example.com",
        "back\\slash \\![x](http://127.0.0.1:9/e.png)",
    ],
)
def test_escaped_text_draws_exactly_its_characters(value: str) -> None:
    source = escape(value)
    assert_literal(source)
    assert plain(source) == value


@given(st.text(max_size=80))
def test_escape_draws_nothing_but_text_whatever_the_input(value: str) -> None:
    source = escape(value)
    html = drawn(source)
    assert "<img" not in html and "<a " not in html
    # every ASCII punctuation character comes escaped, so no markup can start
    position = 0
    while position < len(source):
        if source[position] == "\\":
            assert source[position + 1] in string.punctuation, source
            position += 2
            continue
        assert source[position] not in string.punctuation, source
        position += 1
    expected = value.replace("\r\n", "\n").replace("\r", "\n").replace("\u2060", "")
    assert plain(source) == expected


def test_error_text_and_code_spans_are_literal() -> None:
    assert_literal(error_text(NotFound(f"no case {IMAGE!r} in the database")))
    # a code span of an id the id rules accept is literal too
    html = drawn(code_span(STORED_ID))
    assert "<img" not in html and "<a " not in html


# --- the services, as the address reaches them, on both databases ----------------------------

REFUSED_IDS = ["\x00", "case\x00id", "x" * 201, "a\u202eb", "a\u200bb", "a\x7fb", " "]


@pytest.mark.parametrize("case_id", REFUSED_IDS)
def test_an_id_the_rules_refuse_is_no_case_on_both_databases(
    database: Database, case_id: str
) -> None:
    """``/review?case=%00`` on PostgreSQL was a DataError with a traceback; SQLite said
    "no case". Now both give the same plain answer, before the database sees the id."""
    engine = database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES / "support-clean-late-parcel.json"])
    add_person(engine, Actor.operator(), name="rita", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    rita = sign_in(engine, name="rita", auth_mode="local")
    owner = operator_actor()
    calls = {
        "case_fingerprint": lambda who: case_fingerprint(engine, who, case_id=case_id),
        "load_case_view": lambda who: load_case_view(engine, who, case_id=case_id),
        "case_labels": lambda who: case_labels(engine, who, case_id=case_id, rubric=rubric),
    }
    for name, call in calls.items():
        for who in (rita, owner):
            with pytest.raises(NotFound, match=r"^no case '") as refused:
                call(who)
            assert "\x00" not in str(refused.value), name
    with pytest.raises(NotFound, match=r"^no case '"):
        unit_detail(engine, owner, rubric=rubric, case_id=case_id, turn=2)


# --- the pages (AppTest) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("demo-template") / "review.db")


@pytest.fixture
def db_url(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=None) as url:
        yield url


@pytest.fixture
def engine(db_url: str) -> Engine:
    return shared_engine(db_url)


_CODE_SPAN = re.compile(r"`[^`]*`")


def markdown_sources(at: AppTest) -> list[str]:
    """Every string the page hands to Markdown: bodies, labels, link labels, toasts."""
    found: list[str] = []
    for node in walk(at):
        kind = getattr(node, "type", None)
        if kind in MARKDOWN_TYPES:
            value = getattr(node, "value", None)
            if isinstance(value, str):
                found.append(value)
        elif kind == "page_link" or kind in ("button", "expander", "toggle", "checkbox"):
            label = getattr(node, "label", None)
            if label is None and hasattr(node, "proto"):
                label = getattr(node.proto, "label", None)
            if isinstance(label, str):
                found.append(label)
    found.extend(link.proto.label for link in at.get("page_link"))
    found.extend(toast.value for toast in at.toast)
    return found


def assert_page_literal(at: AppTest, *, shows: str | None = None) -> None:
    sources = markdown_sources(at)
    for source in sources:
        html = drawn(source)
        assert "<img" not in html and "<a " not in html, (source, html)
        # outside code spans (literal, never autolinked) no bare address either
        assert "http://" not in _CODE_SPAN.sub("", source), source
    if shows is not None:
        assert any(shows in plain(source) for source in sources), (shows, sources)


def open_review(at: AppTest, case_id: str) -> AppTest:
    at.switch_page("views/review.py")
    at.query_params["case"] = case_id
    return run(at)


@pytest.mark.parametrize("address", ["\x00", "a\u202eb", "x" * 500])
def test_a_refused_address_id_says_no_case(
    address: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_review(open_app(monkeypatch, local="ana"), address)
    (error,) = [plain(e.value) for e in at.error]
    assert error.startswith("no case '") and error.endswith("' in the database")
    assert "Traceback" not in error and ".py" not in error


@pytest.mark.parametrize("address", [IMAGE, LINK])
def test_a_markdown_address_is_shown_as_text(
    address: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/review?case=![x](http://host/p.png)`` fetched the image from the error box."""
    at = open_review(open_app(monkeypatch, local="ana"), address)
    (error,) = [e.value for e in at.error]
    # An id the id rules refuse is no case; one they accept is, for a reviewer, a case
    # not in their queue whether or not it exists (issue 18, item 3).
    refused = f"no case {address!r} in the database"
    not_theirs = f"case {address!r} is not in ana's queue"
    assert plain(error) in (refused, not_theirs)
    assert plain(error) == (refused if " " in address else not_theirs)
    assert_page_literal(at, shows=address)


@pytest.mark.parametrize("turn", ["²", "99999999999999999999", "-99999999999999999999", "1e3"])
def test_a_turn_in_the_address_that_is_no_turn_opens_the_first_open_unit(
    turn: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adjudication page read ``isdigit()`` (true for "²") and ``int()`` (no bound)."""
    at = open_app(monkeypatch, local="olivia")
    at.switch_page("views/adjudicate.py")
    at.query_params["case"] = "support-delayed-refund-violation"
    at.query_params["turn"] = turn
    run(at)
    # No unit from that address: the page opens the first open unit by itself and puts
    # it in the address instead (a storable whole turn), with no error.
    assert not at.error
    shown = at.query_params["turn"]
    shown = shown[0] if isinstance(shown, list) else shown
    assert shown != turn and shown.isascii() and shown.isdigit() and int(shown) < 10_000


def test_a_markdown_address_on_the_adjudication_page_is_text(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_app(monkeypatch, local="olivia")
    at.switch_page("views/adjudicate.py")
    at.query_params["case"] = IMAGE
    at.query_params["turn"] = "2"
    run(at)
    assert [plain(e.value) for e in at.error] == [f"no case {IMAGE!r} in the database"]
    assert_page_literal(at, shows=IMAGE)


def _stored_markdown_case(engine: Engine, tmp_path: Path) -> None:
    """A case whose id is a Markdown image, in ana's and ben's queues, labeled apart."""
    case = copy.deepcopy(demo_case("support-delayed-refund-violation"))
    case["case_id"] = STORED_ID
    import_cases(engine, tmp_path / "cases", [case])
    for reviewer in ("ana", "ben"):
        assign(engine, reviewer, [STORED_ID])
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    for name, code in (("ana", "in_role"), ("ben", "tone_break")):
        who = sign_in(engine, name=name, auth_mode="oidc")
        record_label(engine, who, case_id=STORED_ID, turn=2, rubric=rubric, code=code)


def test_a_stored_markdown_id_is_text_on_every_page(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue's link, the adjudication list and heading, the agreement page's
    disagreements: each showed the id as an image fetched from its host."""
    _stored_markdown_case(engine, tmp_path)

    queue = open_app(monkeypatch, local="ana")
    assert STORED_ID in [plain(link.proto.label) for link in queue.get("page_link")]
    assert_page_literal(queue, shows=STORED_ID)
    review = open_review(queue, STORED_ID)
    assert review.markdown[0].value == f"**Review** · {code_span(STORED_ID)}", "it opens"
    assert_page_literal(review)

    owner = open_app(monkeypatch, local="olivia")
    owner.switch_page("views/adjudicate.py")
    run(owner)
    owner.toggle(key="adjudicate_show_queue").set_value(True)  # the queue below the unit
    run(owner)
    assert f"{STORED_ID} · turn 2" in [plain(link.proto.label) for link in owner.get("page_link")]
    assert_page_literal(owner, shows=STORED_ID)

    owner.query_params["case"] = STORED_ID
    owner.query_params["turn"] = "2"
    run(owner)
    assert [plain(h.value) for h in owner.subheader] == [f"{STORED_ID} · turn 2"]
    assert_page_literal(owner, shows=STORED_ID)

    owner.query_params.clear()
    owner.session_state["adjudicate_unit"] = None
    owner.switch_page("views/agreement.py")
    run(owner)
    assert f"{STORED_ID} · turn 2" in [plain(link.proto.label) for link in owner.get("page_link")]
    assert_page_literal(owner, shows=STORED_ID)


# --- errors from the server ------------------------------------------------------------------


def test_serve_hides_error_details_the_way_this_streamlit_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``false`` is read as "stacktrace" (the legacy value); ``none`` shows nothing."""
    from streamlit import config

    from review_app.cli import server

    started: list[list[str]] = []
    monkeypatch.setattr(server, "open_engine", lambda db: None)
    monkeypatch.setattr("os.execve", lambda path, command, env: started.append(command))
    server.serve(port=8999, host="127.0.0.1", db="sqlite:///unused.db")
    (command,) = started
    value = command[command.index("--client.showErrorDetails") + 1]
    assert value == config.ShowErrorDetailsConfigOptions.NONE
    assert not config.ShowErrorDetailsConfigOptions.is_false_variation(value)


def test_a_page_error_shows_no_exception_text(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error no page expects: its text (paths, values) goes to the server's log only."""
    import review_app.services.team.queue

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError('File "/srv/secret/review_app/storage/access.py", line 12')

    monkeypatch.setattr(review_app.services.team.queue, "queue_page", broken)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    monkeypatch.setenv("REVIEW_APP_AUTH", "local")
    monkeypatch.setenv("REVIEW_APP_LOCAL_USER", "ana")
    at.run()
    assert not at.exception, "caught by the entry script"
    assert [plain(e.value) for e in at.error] == [
        "Something went wrong on the server; nothing more is shown here. The server's log "
        "has the details."
    ]
    for node in walk(at):
        for value in (getattr(node, "value", None), getattr(node, "label", None)):
            assert not isinstance(value, str) or "/srv/secret" not in value
