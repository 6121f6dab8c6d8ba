"""Identities from the reverse proxy's header (issue 35), on SQLite and PostgreSQL.

The probe: ``José`` sent by the proxy as UTF-8 became the identity ``josã©`` (the HTTP
server decodes header values as Latin-1), a different reviewer from ``josé``; a value
breaking the name rules raised an uncaught error (Streamlit's exception box, a traceback
in the log); and a proxy user ``operator`` was indistinguishable in the audit log from
the command line's operator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.datastructures import Headers
from streamlit.testing.v1 import AppTest

from review_app.errors import InputError
from review_app.services.access.actors import operator_actor, proxy_identity, sign_in
from review_app.services.team.people import add_person
from review_app.ui import auth
from tests.conftest import Database
from tests.ui_support import app_database, demo_template, plain

APP = Path(__file__).resolve().parents[1] / "review_app" / "ui" / "app.py"


def _as_the_server_reads(raw: bytes) -> str:
    """The header's value as Streamlit's server (Starlette) hands it to ``st.context``:
    the request's bytes decoded as Latin-1."""
    return Headers(raw=[(b"x-forwarded-user", raw)])["X-Forwarded-User"]


def test_a_utf8_name_from_the_proxy_is_the_same_person_as_typed(database: Database) -> None:
    seen = _as_the_server_reads("José".encode())
    assert seen == "JosÃ©"  # what the page used to sign in
    assert proxy_identity(seen) == "José"
    by_proxy = sign_in(database.engine, name=proxy_identity(seen) or "", auth_mode="proxy")
    typed = sign_in(database.engine, name="josé", auth_mode="oidc")
    assert by_proxy.name == typed.name == "josé"
    assert by_proxy.reviewer_id == typed.reviewer_id
    # compatibility forms are folded before the rules: full-width letters are plain ones
    assert proxy_identity(_as_the_server_reads("ｊｏｓé".encode())) == "josé"


RESERVED_LOOK_ALIKES = [
    "operator",
    "Operator",
    "OPERATOR",
    "ｏｐｅｒａｔｏｒ",  # full-width
    "\u043eperator",  # Cyrillic о
    "oper\u0430tor",  # Cyrillic а
    "0perator",
    "oper.ator",
    "op-erator",
    "opérator",
]


@pytest.mark.parametrize("name", RESERVED_LOOK_ALIKES)
def test_operator_and_its_look_alikes_are_reserved_everywhere(
    database: Database, name: str
) -> None:
    assert proxy_identity(_as_the_server_reads(name.encode())) is None
    for mode in ("proxy", "oidc", "local"):
        with pytest.raises(InputError, match="reserved"):
            sign_in(database.engine, name=name, auth_mode=mode)
    with pytest.raises(InputError, match="reserved"):
        add_person(database.engine, operator_actor(), name=name)


def test_names_near_a_reserved_one_are_people(database: Database) -> None:
    for name in ("operators", "co-operator", "opera", "operator2"):
        assert proxy_identity(name) == name
        assert sign_in(database.engine, name=name, auth_mode="proxy").name == name


BREAKING = [
    b"\xff\xfeana",  # not UTF-8
    "\u202eana".encode(),  # a bidi control
    "an\u200ba".encode(),  # a zero-width space
    b"a" * 201,  # too long
    b"",  # empty
    b"   ",
]


@pytest.mark.parametrize("raw", BREAKING)
def test_a_header_breaking_the_rules_signs_nobody_in(raw: bytes) -> None:
    assert proxy_identity(_as_the_server_reads(raw) if raw.strip() else raw.decode()) is None


@pytest.fixture
def served_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    template = demo_template(tmp_path / "demo.db")
    with app_database(template, tmp_path, monkeypatch, local_user=None) as url:
        yield url


@pytest.mark.parametrize(
    ("header", "signed_in"),
    [
        ("JosÃ©", "José"),  # UTF-8 bytes as the server decoded them
        ("operator", None),
        ("ｏｐｅｒａｔｏｒ", None),
        ("\u202eana", None),
        ("\xff\xfeana", None),
        (None, None),
    ],
)
def test_the_page_signs_in_the_decoded_name_or_says_one_sentence(
    served_db: str, monkeypatch: pytest.MonkeyPatch, header: str | None, signed_in: str | None
) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "proxy")
    monkeypatch.setattr(auth, "read_proxy_header", lambda: header)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if signed_in is None:
        assert len(at.error) == 1
        message = plain(at.error[0].value)
        assert message.startswith("No identity: this server trusts the X-Forwarded-User")
        assert message.count(". ") == 1  # one sentence, then what to do
        assert not at.page_link
    else:
        caption = " ".join(plain(c.value) for c in at.sidebar.caption)
        assert f"Signed in as `{signed_in}`" in caption, caption


def test_a_local_user_named_operator_gets_one_sentence_not_an_exception(
    served_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "local")
    monkeypatch.setenv("REVIEW_APP_LOCAL_USER", "Operator")
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = at.error
    assert "reserved" in plain(error.value) and not at.page_link
