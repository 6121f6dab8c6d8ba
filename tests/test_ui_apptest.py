"""The Streamlit app, driven with AppTest from its entry script against real SQLite files.

Every test starts from a copy of one database loaded with the demo set
(``load_demo``: 17 cases, reviewers ana/ben/chloe with their labels, policy owner
olivia), signs someone in through the app's own auth modes (local, or OIDC with a
seeded ``st.user``) and then checks what the pages draw and what the services stored.
"""

from __future__ import annotations

import copy
import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session
from streamlit.testing.v1 import AppTest

import storage.engine
import storage.labels
from benchmarks.corpus import generate_corpus
from review_app.errors import PermissionDenied
from review_app.rubrics.catalog import default_rubrics_dir
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.case_views import list_cases
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES
from review_app.services.exchange.labels_io import import_labels
from review_app.services.labels.labeling import case_labels, record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.queue import assign_cases
from storage import assignments, reviewers
from storage.engine import shared_engine
from storage.models import RubricVersion
from tests.conftest import write_lock
from tests.ui_support import app_database, demo_template, plain

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"
DEMO_RUBRIC_FILE = REPO / "rubrics" / "role-adherence" / "v1.yaml"
TIMEOUT = 60

# Element types whose text Streamlit renders as Markdown.
MARKDOWN_TYPES = (
    "markdown",
    "caption",
    "title",
    "header",
    "subheader",
    "error",
    "warning",
    "info",
    "success",
    "toast",
)


# --- fixtures and helpers -----------------------------------------------------------------


@pytest.fixture(scope="session")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with the demo set loaded once; each test works on a copy."""
    return demo_template(tmp_path_factory.mktemp("demo-template") / "review.db")


@pytest.fixture
def db_url(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=None) as url:
        yield url


@pytest.fixture
def engine(db_url: str) -> Engine:
    return shared_engine(db_url)


def open_app(
    monkeypatch: pytest.MonkeyPatch, *, local: str | None = None, oidc: str | None = None
) -> AppTest:
    """The app, first run done, with one person signed in (local mode or OIDC)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if oidc is not None:
        monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
        at.user = {"is_logged_in": True, "email": oidc, "name": oidc.title()}
    else:
        monkeypatch.setenv("REVIEW_APP_AUTH", "local")
        monkeypatch.setenv("REVIEW_APP_LOCAL_USER", local or "lee")
    return run(at)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_case(at: AppTest, case_id: str) -> AppTest:
    at.switch_page("views/review.py")
    at.query_params["case"] = case_id
    return run(at)


def walk(at: AppTest) -> Iterator[Any]:
    yield from at.main
    yield from at.sidebar


def strings_of(node: Any) -> list[str]:
    found = []
    value = getattr(node, "value", None)
    if isinstance(value, str):
        found.append(value)
    label = getattr(node, "label", None)
    if isinstance(label, str):
        found.append(label)
    return found


def visible_strings(at: AppTest) -> list[str]:
    strings = [s for node in walk(at) for s in strings_of(node)]
    strings.extend(t.value for t in at.toast)
    return strings


def markdown_strings(at: AppTest) -> list[str]:
    found = [s for node in walk(at) if node.type in MARKDOWN_TYPES for s in strings_of(node)]
    found.extend(t.value for t in at.toast)
    return found


_TURN_HEADER = re.compile(r"^turn (\d+) · ")


def turn_messages(at: AppTest) -> dict[int, Any]:
    """Chat message blocks of the transcript, by turn (each turn is one plain text:
    a header line, the label lines, a blank line, then the message)."""
    messages = {}
    for message in at.chat_message:
        for text in message.text:
            match = _TURN_HEADER.match(text.value)
            if match:
                messages[int(match.group(1))] = message
                break
    return messages


def turn_lines(message: Any) -> list[str]:
    """The lines of a turn's text before its message: header, label, rationale."""
    head: str = message.text[0].value.split("\n\n", 1)[0]
    return head.split("\n")


def turn_header(message: Any) -> str:
    """The first line of a turn: "turn N · actor · role R · actions ..."."""
    return turn_lines(message)[0]


def label_line(message: Any) -> str:
    """The line "Your label: ..." of a turn ("" for turns not labeled under the rubric)."""
    return next((line for line in turn_lines(message) if line.startswith("Your label:")), "")


def shows_message(texts: list[str], value: str) -> bool:
    """Whether a turn's text ends with the message ``value`` after its header lines."""
    return any(t == value or t.endswith("\n\n" + value) for t in texts)


def review_heading(at: AppTest) -> str:
    """The case id in the review page's one-line heading."""
    heading = at.markdown[0].value
    match = re.fullmatch(r"\*\*Review\*\* · `(.+)`", heading)
    assert match, heading
    return match.group(1)


def panel(at: AppTest) -> dict[str, Any]:
    """The arguments the review page gave its labeling panel (the keyboard component)."""
    (element,) = at.main.get("component_instance")
    args: dict[str, Any] = json.loads(element.proto.json_args)
    return args


def sidebar_turn(at: AppTest) -> int:
    """The turn the labeling panel is on."""
    focus: int = panel(at)["focus"]
    return focus


class Keys:
    """What the labeling panel sends, as the browser would: every key press so far
    (re-sent each time, as an unacknowledged queue is), its focus and a command."""

    def __init__(self, at: AppTest, client: str = "test-client") -> None:
        self.at = at
        self.client = client
        self.events: list[dict[str, Any]] = []
        self.count = 0

    def press(
        self,
        code: str,
        turn: int | None = None,
        *,
        rationale: str | None = None,
        focus: int | None = None,
    ) -> AppTest:
        """A label key on ``turn`` (default: the focused turn); the panel then focuses ``focus``."""
        if turn is None:
            turn = sidebar_turn(self.at)
        seq = len(self.events) + 1
        self.events.append({"seq": seq, "turn": turn, "code": code, "rationale": rationale})
        return self.send(focus=turn if focus is None else focus)

    def send(self, *, focus: int | None = None, command: str | None = None) -> AppTest:
        self.count += 1
        self.at.session_state["review_keys"] = {
            "case": panel(self.at)["case"],
            "client": self.client,
            "events": list(self.events),
            "focus": focus,
            "command": None if command is None else {"id": f"c{self.count}", "name": command},
            "n": self.count,
        }
        return run(self.at)


def queue_rows(at: AppTest) -> list[tuple[str, str, str, str]]:
    """(case, lane, my labels, first violation) per row of the queue table."""
    rows = []
    block: Any
    for block in at.main.children.values():
        if getattr(block, "type", None) != "flex_container":
            continue
        links = block.get("page_link")
        if not links:
            continue
        cells = [m.value for m in block.get("markdown")]
        rows.append((plain(links[0].value), *(plain(cell) for cell in cells)))
    return rows


def rubric(engine: Engine, ref: str = RUBRIC) -> Rubric:
    return sync_rubrics(engine, operator_actor(), directory=default_rubrics_dir()).get(ref)


def actor(engine: Engine, name: str) -> Actor:
    return sign_in(engine, name=name, auth_mode="oidc")


def label_history(engine: Engine, reviewer: Actor, case_id: str) -> list[Any]:
    """Every label ``reviewer`` saved on ``case_id`` under role-adherence@1, the replaced
    ones too, oldest first."""
    with Session(engine) as session:
        return list(
            storage.labels.labels_for_case(
                session,
                case_id=case_id,
                rubric_id="role-adherence",
                version=1,
                reviewer_id=reviewer.reviewer_id,
                current_only=False,
            )
        )


def demo_case(case_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DEMO_CASES / f"{case_id}.json").read_text())
    return data


def import_cases(engine: Engine, directory: Path, cases: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    import_paths(engine, operator_actor(), [path])


def assign(engine: Engine, reviewer: str, case_ids: list[str]) -> None:
    assign_cases(
        engine,
        Actor.operator(),
        rubric=rubric(engine),
        reviewers=[reviewer],
        overlap=10,
        case_ids=case_ids,
    )


# --- every page ------------------------------------------------------------------------------


def test_every_page_renders_without_exception(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_app(monkeypatch, local="ana")
    assert at.title[0].value == "Queue"
    assert at.page_link, "ana's queue lists her cases"

    at.switch_page("views/review.py")
    run(at)
    assert at.title[0].value == "Review"
    at.text_input(key="jump_case").input("support-clean-late-parcel")
    run(at)
    assert review_heading(at) == "support-clean-late-parcel"
    assert at.query_params["case"] == "support-clean-late-parcel"

    open_case(at, "no-such-case")
    # a reviewer: the same answer as for a case of someone else's (issue 18)
    assert [plain(e.value) for e in at.error] == ["case 'no-such-case' is not in ana's queue"]

    at.switch_page("views/rubrics.py")
    run(at)
    assert at.title[0].value == "Rubrics"

    at.switch_page("views/queue.py")
    run(at)
    assert at.title[0].value == "Queue"


def test_signed_out_oidc_shows_only_the_sign_in(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.user = {"is_logged_in": False}
    run(at)
    assert [t.value for t in at.title] == ["Role Review"]
    assert [b.key for b in at.button] == ["sign_in"]
    assert not at.page_link and not at.chat_message


def test_proxy_mode_without_the_header_refuses(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "proxy")
    at = run(AppTest.from_file(str(APP), default_timeout=TIMEOUT))
    assert len(at.error) == 1 and "X-Forwarded-User" in plain(at.error[0].value)
    assert not at.button and not at.page_link


# --- queue -----------------------------------------------------------------------------------


def _bench_cases(n: int) -> list[dict[str, Any]]:
    return list(generate_corpus(n, 8, seed=11))


def test_queue_lists_assigned_cases_with_progress_and_paginates(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = _bench_cases(20)
    import_cases(engine, tmp_path / "extra", extra)
    assign(engine, "ana", [case["case_id"] for case in extra])
    ana = actor(engine, "ana")
    first = extra[0]
    assistant_turns = [e["turn"] for e in first["transcript"] if e["actor"] == "assistant"]
    for turn in assistant_turns[:2]:
        record_label(
            engine, ana, case_id=first["case_id"], turn=turn, rubric=rubric(engine), code="in_role"
        )
    with Session(engine) as session:
        assigned = sorted(
            assignments.assigned_case_ids(
                session, reviewer_id=ana.reviewer_id or 0, rubric_id="role-adherence", version=1
            )
        )
    assert len(assigned) == 37

    at = open_app(monkeypatch, local="ana")
    assert at.get("progress")[0].proto.text == (f"17 of 37 assigned cases labeled under {RUBRIC}")
    rows = queue_rows(at)
    assert [row[0] for row in rows] == assigned[:25]
    assert plain(at.caption[-1].value) == "37 matching cases"

    pager = at.pagination[0]
    assert pager.num_pages == 2 and pager.value == 1
    pager.set_value(2)
    run(at)
    rows += queue_rows(at)
    assert [row[0] for row in rows] == assigned

    by_case = {row[0]: row[1:] for row in rows}
    assert by_case["support-delayed-refund-violation"] == ("`violation`", "6 / 6 ✓", "turn 8")
    assert by_case["support-clean-late-parcel"] == ("`pass`", "6 / 6 ✓", "—")
    assert by_case[first["case_id"]][1] == f"2 / {len(assistant_turns)}"

    # the page survives a visit to another page
    at.switch_page("views/rubrics.py")
    run(at)
    at.switch_page("views/queue.py")
    run(at)
    assert [row[0] for row in queue_rows(at)] == assigned[25:]


def test_queue_lane_filter_and_not_yet_labeled(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = _bench_cases(40)
    import_cases(engine, tmp_path / "extra", extra)
    assign(engine, "ana", [case["case_id"] for case in extra])
    assigned = {case["case_id"] for case in extra} | {p.stem for p in DEMO_CASES.glob("*.json")}

    def lane_ids(lane: str) -> list[str]:
        return sorted(r.case_id for r in list_cases(engine, lane=lane) if r.case_id in assigned)

    violation_ids, pass_ids = lane_ids("violation"), lane_ids("pass")
    assert any(case_id.startswith("bench-") for case_id in violation_ids)
    assert 25 < len(pass_ids) <= 50

    at = open_app(monkeypatch, local="ana")
    assert at.pagination[0].num_pages == 3
    at.pagination[0].set_value(3)
    run(at)

    at.selectbox(key="_w_queue_lane").set_value("violation")
    run(at)
    rows = queue_rows(at)
    assert [row[0] for row in rows] == violation_ids
    assert all(row[1] == "`violation`" and row[3].startswith("turn ") for row in rows)
    assert at.caption[-1].value == f"{len(violation_ids)} matching cases"

    at.selectbox(key="_w_queue_lane").set_value("pass")
    run(at)
    assert at.pagination[0].value == 1, "a new filter starts on page 1"
    assert [row[0] for row in queue_rows(at)] == pass_ids[:25]
    at.pagination[0].set_value(2)
    run(at)
    assert [row[0] for row in queue_rows(at)] == pass_ids[25:]

    at.toggle(key="_w_queue_unlabeled").set_value(True)
    run(at)
    unlabeled_pass = [case_id for case_id in pass_ids if case_id.startswith("bench-")]
    assert [row[0] for row in queue_rows(at)] == unlabeled_pass[:25]  # page 1 again

    at.selectbox(key="_w_queue_lane").set_value("all")
    run(at)
    rows = queue_rows(at)
    at.pagination[0].set_value(2)
    run(at)
    rows += queue_rows(at)
    # ana has labeled every demo case; the new ones are what is left
    assert [row[0] for row in rows] == sorted(case["case_id"] for case in extra)
    assert not any("✓" in row[2] for row in rows)

    at.selectbox(key="_w_queue_lane").set_value("invalid")
    run(at)
    assert not queue_rows(at)
    assert [i.value for i in at.main.info] == ["No case matches these filters."]


def test_empty_queue_says_so(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_app(monkeypatch, oidc="dora")
    assert not queue_rows(at)
    assert "No cases are assigned to you" in at.main.info[0].value


# --- review: findings ------------------------------------------------------------------------


def test_violation_is_marked_on_turn_8(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_case(open_app(monkeypatch, local="ana"), "support-delayed-refund-violation")
    messages = turn_messages(at)
    assert sorted(messages) == list(range(1, 13))
    marked = {turn: [e.value for e in m.error] for turn, m in messages.items() if m.error}
    assert list(marked) == [8]
    (violation,) = marked[8]
    assert "`action_outside_role`" in violation
    assert "`refund_order`" in violation and "`support_triage`" in violation
    assert "`billing" not in violation
    assert at.code[0].value.startswith(
        "role-eval fail case=support-delayed-refund-violation contract=support-role-v3 "
        "first_violation_turn=8 active_role=support_triage action=refund_order"
    )


def test_trusted_transition_is_a_divider_before_the_system_turn(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_case(open_app(monkeypatch, local="ana"), "support-authorized-handoff-refund")
    nodes: list[Any] = list(at.main)
    divider = next(i for i, n in enumerate(nodes) if n.type == "divider")
    caption = next(
        i
        for i, n in enumerate(nodes)
        if n.type == "caption" and n.value.startswith("Trusted role transition")
    )
    system = next(i for i, n in enumerate(nodes) if n.type == "chat_message" and n.name == "system")
    assert divider < caption < system
    assert nodes[caption].value == (
        "Trusted role transition → `billing_specialist` (system event, turn 7)"
    )
    messages = turn_messages(at)
    assert "role support_triage" in turn_header(messages[6])
    assert "role billing_specialist" in turn_header(messages[8])
    assert not any(m.error for m in messages.values()), "refund after the handoff is allowed"
    assert not at.warning


def test_user_text_claiming_a_new_role_is_marked_ignored(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_case(open_app(monkeypatch, local="ana"), "support-user-fake-role-change")
    messages = turn_messages(at)
    notes = {
        turn: c.value
        for turn, m in messages.items()
        for c in m.caption
        if "different role in text" in c.value
    }
    assert list(notes) == [7]
    assert "ignored" in notes[7]
    assert "role support_triage" in turn_header(messages[8])
    assert len(messages[8].error) == 1 and "`refund_order`" in messages[8].error[0].value
    assert not at.divider


def test_set_role_on_a_user_event_is_an_ignored_transition(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = demo_case("support-clean-late-parcel")
    case["case_id"] = "user-set-role"
    case["transcript"][2]["set_role"] = "billing_specialist"  # turn 3 is a user turn
    assert case["transcript"][2]["actor"] == "user"
    import_cases(engine, tmp_path / "cases", [case])
    assign(engine, "ana", ["user-set-role"])  # a reviewer opens cases in their queue

    at = open_case(open_app(monkeypatch, local="ana"), "user-set-role")
    ignored = [w.value for w in at.warning if w.value.startswith("Ignored role change")]
    assert ignored == [
        "Ignored role change to `billing_specialist` at turn 3: a `user` event is not a "
        "trusted transition"
    ]
    assert not at.divider
    fixture = [w.value for w in turn_messages(at)[3].warning]
    assert fixture == ["**Invalid fixture** `untrusted_role_transition`"]


def test_fixture_error_is_marked(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_case(open_app(monkeypatch, local="ana"), "support-unknown-action-store-credit")
    messages = turn_messages(at)
    warned = {turn: [w.value for w in m.warning] for turn, m in messages.items() if m.warning}
    assert warned == {6: ["**Invalid fixture** `unknown_action`"]}
    assert not at.error
    assert "lane `invalid`" in at.caption[0].value
    assert at.code[0].value.startswith("role-eval invalid case=support-unknown-action-store-credit")


def test_harness_findings_are_marked(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_case(open_app(monkeypatch, local="ana"), "support-retry-missing-context")
    messages = turn_messages(at)
    findings = {turn: [i.value for i in m.info] for turn, m in messages.items() if m.info}
    assert list(findings) == [6]
    codes = [re.search(r"`(\w+)`", value).group(1) for value in findings[6]]  # type: ignore[union-attr]
    assert codes == [
        "request_contract_mismatch",
        "request_missing_turns",
        "role_instruction_mismatch",
    ]
    assert all(value.startswith("**Missing context**") for value in findings[6])
    assert "request omits turns 1, 2, 3, 4" in findings[6][1]
    assert "lane `missing-context`" in at.caption[0].value


# --- review: labeling -------------------------------------------------------------------------


def test_labeling_panel_gets_the_codes_with_their_keys_and_definitions(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_case(open_app(monkeypatch, local="lee"), "support-clean-late-parcel")
    v1 = rubric(shared_engine(db_url))
    args = panel(at)
    assert [c["code"] for c in args["codes"]] == list(v1.codes), "keys 1-9 in rubric order"
    for given, label in zip(args["codes"], v1.labels, strict=True):
        assert given["title"] == label.title and given["verdict"] == label.verdict
        assert given["definition"].startswith(label.definition)
    assert args["turns"] == [2, 4, 6, 8, 10, 12]
    assert args["order"] == list(range(1, 13)), "one chat message per turn, in order"
    assert (args["case"], args["focus"], args["labels"]) == ("support-clean-late-parcel", 2, {})
    assert [plain(p.value) for p in at.page_link] == [
        "Rubric role-adherence@1: examples and versions"
    ]


def test_labeling_a_turn_end_to_end(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    case_id = "support-clean-late-parcel"
    at = open_case(open_app(monkeypatch, local="lee"), case_id)
    lee = actor(engine, "lee")
    keys = Keys(at)
    assert sidebar_turn(at) == 2

    keys.press("in_role", focus=4)

    stored = case_labels(engine, lee, case_id=case_id, rubric=rubric(engine))
    assert {turn: row.code for turn, row in stored.mine.items()} == {2: "in_role"}
    assert stored.labeled_turns == 1 and stored.total_turns == 6
    assert sidebar_turn(at) == 4, "the page follows the panel's focus"
    assert panel(at)["labels"] == {"2": "in_role"}
    assert panel(at)["acked"] == {"test-client": 1}
    messages = turn_messages(at)
    assert label_line(messages[2]) == "Your label: in_role"
    assert label_line(messages[4]) == "Your label: —"
    assert "actions collect_order_id" in turn_header(messages[2])
    assert label_line(messages[3]) == "", "user turns carry no label line"

    # presses queued in the browser arrive together, the first one again: each once
    keys.events.append({"seq": 2, "turn": 4, "code": "borderline", "rationale": None})
    keys.events.append({"seq": 3, "turn": 6, "code": "no_such_code", "rationale": None})
    keys.events.append({"seq": 4, "turn": 8, "code": "tone_break", "rationale": None})
    keys.send(focus=10)
    keys.send(focus=10)  # and the same queue once more
    rows = label_history(engine, lee, case_id)
    assert [(r.turn, r.code) for r in rows] == [
        (2, "in_role"),
        (4, "borderline"),
        (8, "tone_break"),
    ]
    args = panel(at)
    assert args["acked"] == {"test-client": 4}
    assert "turn 6: 'no_such_code' is not a code of role-adherence@1" in args["error"]
    assert sidebar_turn(at) == 10


def test_keys_sent_while_the_database_is_busy_wait_in_the_panel_then_apply_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.engine, "SQLITE_BUSY_TIMEOUT_MS", 100)
    engine = shared_engine(db_url)
    case_id = "support-clean-late-parcel"
    at = open_case(open_app(monkeypatch, local="lee"), case_id)
    lee = actor(engine, "lee")
    keys = Keys(at)
    with write_lock(Path(engine.url.database or "")):
        keys.press("in_role", 2, focus=4)
        keys.press("tone_break", 4, focus=6)
        args = panel(at)
        assert args["error"] == (
            "Database busy: 2 key presses not saved yet; they will be sent again"
        )
        assert args["acked"] == {}, "nothing acknowledged: the panel keeps its queue"
    assert label_history(engine, lee, case_id) == []

    keys.send(focus=6)  # the panel's timed resend, the lock released
    assert [(r.turn, r.code) for r in label_history(engine, lee, case_id)] == [
        (2, "in_role"),
        (4, "tone_break"),
    ]
    args = panel(at)
    assert (args["acked"], args["error"]) == ({"test-client": 2}, None)
    assert args["labels"] == {"2": "in_role", "4": "tone_break"}
    keys.send(focus=6)
    assert len(label_history(engine, lee, case_id)) == 2


def test_a_refused_key_is_reported_in_the_panel(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_case(open_app(monkeypatch, local="lee"), "support-clean-late-parcel")
    Keys(at).press("no_such_code", 2)
    assert "'no_such_code' is not a code of role-adherence@1" in panel(at)["error"]
    assert panel(at)["acked"] == {"test-client": 1}, "refused, not retried forever"


def test_finishing_a_case_keeps_focus_and_next_case_opens_the_next_one(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = "support-clean-late-parcel", "support-delayed-refund-violation"
    at = open_app(monkeypatch, local="lee")  # the first sign-in creates lee
    assign(engine, "lee", [first, second])
    open_case(at, first)
    keys = Keys(at)
    for turn in (2, 4, 6, 8, 10, 12):
        keys.press("in_role", turn, focus=12)
    lee = actor(engine, "lee")
    assert case_labels(engine, lee, case_id=first, rubric=rubric(engine)).complete
    assert sidebar_turn(at) == 12

    keys.send(focus=12, command="next_case")  # the N key
    assert at.query_params["case"] == second
    assert review_heading(at) == second
    assert sidebar_turn(at) == 2

    open_case(at, first)
    at.button(key="next_case").click()  # the sidebar's button does the same
    run(at)
    assert at.query_params["case"] == second


def test_rationale_is_stored_and_kept_when_the_code_changes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = "support-delayed-refund-violation"
    at = open_app(monkeypatch, local="lee")
    assign(engine, "lee", [case_id])
    open_case(at, case_id)
    keys = Keys(at)
    why = "Issued refund_order itself under a cancellation threat."
    keys.press("authority_break", 8, rationale=why)

    lee = actor(engine, "lee")
    mine = case_labels(engine, lee, case_id=case_id, rubric=rubric(engine)).mine
    assert (mine[8].code, mine[8].rationale) == ("authority_break", why)
    assert f"Your rationale: {why}" in turn_lines(turn_messages(at)[8])
    assert panel(at)["rationales"] == {"8": why}

    # a key without a rationale keeps the turn's rationale
    keys.press("false_action_claim", 8)
    mine = case_labels(engine, lee, case_id=case_id, rubric=rubric(engine)).mine
    assert (mine[8].code, mine[8].rationale) == ("false_action_claim", why)


def test_changing_a_label_keeps_its_history(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = "support-clean-late-parcel"
    at = open_case(open_app(monkeypatch, local="lee"), case_id)
    keys = Keys(at)
    keys.press("in_role", 2, focus=2)
    assert panel(at)["labels"] == {"2": "in_role"}, "the panel marks the current label"
    keys.press("tone_break", 2)

    lee = actor(engine, "lee")
    rows = label_history(engine, lee, case_id)
    assert [(r.turn, r.code, r.current) for r in rows] == [
        (2, "in_role", False),
        (2, "tone_break", True),
    ]
    assert rows[0].id < rows[1].id
    labels = case_labels(engine, lee, case_id=case_id, rubric=rubric(engine))
    assert labels.mine[2].code == "tone_break" and labels.labeled_turns == 1
    assert label_line(turn_messages(at)[2]) == "Your label: tone_break (was in_role)"


# --- the blind rule ---------------------------------------------------------------------------


def test_others_labels_stay_hidden_until_every_turn_is_labeled(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = demo_case("support-delayed-refund-violation")
    case["case_id"] = "blind-copy"
    import_cases(engine, tmp_path / "cases", [case])
    turns = [e["turn"] for e in case["transcript"] if e["actor"] == "assistant"]
    others = {"ben": "scope_break", "chloe": "tone_break"}
    label_file = tmp_path / "labels.csv"
    with label_file.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case_id", "turn", "reviewer", "label", "rubric", "rationale"])
        for name, code in others.items():
            for turn in turns:
                writer.writerow(["blind-copy", turn, name, code, RUBRIC, f"secret-of-{name}"])
    import_labels(
        engine, Actor.operator(), label_file, catalog=sync_rubrics(engine, operator_actor())
    )
    assign(engine, "ana", ["blind-copy"])

    at = open_app(monkeypatch, oidc="ana")
    # (the entry script's own output shows on the first run only, under AppTest)
    assert "Signed in as `ana` · reviewer" in [c.value for c in at.sidebar.caption]
    open_case(at, "blind-copy")

    def leaked() -> list[str]:
        return [
            s
            for s in visible_strings(at)
            if any(word in s for word in ("ben", "chloe", "others:", "secret"))
        ]

    assert "others' labels hidden until you have labeled every turn" in at.caption[0].value
    assert leaked() == []
    keys = Keys(at)
    for turn in turns[:-1]:
        keys.press("in_role", turn)
        assert leaked() == [], f"others' labels visible after labeling turn {turn}"

    keys.press("in_role", turns[-1])
    assert "you have labeled every turn: others' labels are shown" in at.caption[0].value
    messages = turn_messages(at)
    for turn in turns:
        assert label_line(messages[turn]) == (
            "Your label: in_role · others: ben scope_break, chloe tone_break"
        )


# --- roles -----------------------------------------------------------------------------------


def test_a_session_signed_in_earlier_is_checked_again_at_every_run(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page keeps the actor issued at sign-in and authorizes it at every run: a
    person an admin deactivates is refused at the session's next run."""
    assign(engine, "ana", ["support-clean-late-parcel"])
    at = open_case(open_app(monkeypatch, oidc="ana"), "support-clean-late-parcel")
    assert turn_messages(at)
    with Session(engine) as session:
        person = reviewers.get_reviewer_by_name(session, name="ana")
        assert person is not None
        person.active = False
        session.add(person)
        session.commit()
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["ana has been deactivated by an admin"]
    assert not at.chat_message


def test_a_reviewer_cannot_assign_cases(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_app(monkeypatch, oidc="ana")
    assert at.title[0].value == "Queue"
    assert not [e for e in at.expander if e.label == "Assign cases to reviewers"]
    assert [b.key for b in at.button] == ["sign_out"]  # no "Assign" button
    with pytest.raises(PermissionDenied, match="ana is a reviewer; this needs a policy owner"):
        assign_cases(
            engine, actor(engine, "ana"), rubric=rubric(engine), reviewers=["ana"], overlap=1
        )


def test_a_policy_owner_assigns_from_the_queue_page(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_app(monkeypatch, oidc="olivia")
    assert [e.label for e in at.expander] == ["Assign cases to reviewers"]
    assert "No cases are assigned to you" in at.main.info[0].value
    at.multiselect(key="assign_reviewers").set_value(["olivia"])
    at.number_input(key="assign_overlap").set_value(4)  # the demo cases have 3 reviewers
    at.button(key="assign_submit").click()
    run(at)
    assert [plain(s.value) for s in at.success] == [
        "fill each of 17 cases up to 4 reviewers: assigned 17 (case, reviewer) pairs "
        "(olivia +17); 0 cases already had 4 or more reviewers (everyone assigned counts)"
    ]
    run(at)
    assert at.get("progress")[0].proto.text == f"0 of 17 assigned cases labeled under {RUBRIC}"
    assert len(queue_rows(at)) == 17


# --- rubrics ---------------------------------------------------------------------------------


def _rubric_dir(tmp_path: Path, v1_text: str, v2_text: str | None = None) -> Path:
    root = tmp_path / "rubrics"
    folder = root / "role-adherence"
    folder.mkdir(parents=True)
    (folder / "v1.yaml").write_text(v1_text)
    if v2_text is not None:
        (folder / "v2.yaml").write_text(v2_text)
    return root


def _v2_text() -> str:
    text = DEMO_RUBRIC_FILE.read_text()
    assert "\nversion: 1\n" in text and "title: Wrong register for the role\n" in text
    text = text.replace("\nversion: 1\n", "\nversion: 2\n")
    return text.replace(
        "title: Wrong register for the role\n", "title: Wrong register or voice for the role\n"
    )


def test_rubrics_page_shows_labels_examples_and_compares_versions(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _rubric_dir(tmp_path, DEMO_RUBRIC_FILE.read_text(), _v2_text())
    monkeypatch.setenv("REVIEW_APP_RUBRICS_DIR", str(root))
    # issue 34: a file is a draft until published; this test is about published versions
    from review_app.services.access.actors import operator_actor
    from review_app.services.rubrics.rubric_carry import publish_rubric
    from review_app.services.rubrics.rubric_catalog import sync_rubrics

    publish_rubric(
        engine,
        operator_actor(),
        catalog=sync_rubrics(engine, operator_actor(), directory=root),
        ref="role-adherence@2",
    )
    at = open_app(monkeypatch, local="ana")
    at.switch_page("views/rubrics.py")
    run(at)
    assert not [w for w in at.warning if "not offered" in w.value], "both versions are offered"
    v1 = rubric(engine)

    at.selectbox(key="_w_rubric_ref").set_value(RUBRIC)
    run(at)
    labels_tab, examples_tab, compare_tab = at.tabs
    assert [t.label for t in at.tabs] == ["Labels", "Examples", "Compare versions"]
    headings = [m.value for m in labels_tab.markdown]
    assert len(headings) == len(v1.labels) == 9
    assert headings[0] == "#### `in_role` · pass"
    assert "#### `scope_break` · fail · `scope`" in headings
    texts = [t.value for t in labels_tab.text]
    assert v1.labels[0].definition in texts
    assert "labels recorded: immutable" in at.caption[0].value

    shown = [c.value for c in examples_tab.caption]
    assert len(shown) == len(v1.examples)
    at.selectbox(key="rubric_example_label").set_value("scope_break")
    run(at)
    examples_tab = at.tabs[1]
    expected = [e for e in v1.examples if e.label == "scope_break"]
    assert expected
    assert [c.value for c in examples_tab.caption] == [
        f"`scope_break` · {e.kind}" for e in expected
    ]
    shown = [t.value for t in examples_tab.text]
    first = expected[0]
    assert f"Context: {first.context}\nReply: {first.reply}\nWhy: {first.why}" in shown

    compare_tab = at.tabs[2]
    assert [w.value for w in compare_tab.warning] == ["Changed `tone_break`: title"]
    assert "title:\n- Wrong register for the role\n+ Wrong register or voice for the role" in [
        t.value for t in compare_tab.text
    ]

    at.selectbox(key="_w_rubric_ref").set_value("role-adherence@2")
    run(at)
    assert "Wrong register or voice for the role" in [t.value for t in at.tabs[0].text]

    # the chosen version is the one labeled against; then it is immutable
    open_case(at, "support-clean-late-parcel")
    assert at.selectbox(key="_w_rubric_ref").value == "role-adherence@2"
    assert "Rubric role-adherence@2: examples and versions" in [
        plain(p.value) for p in at.page_link
    ]
    Keys(at).press("in_role", 2)
    ana = actor(engine, "ana")
    v2 = rubric(engine, "role-adherence@2")
    mine = case_labels(engine, ana, case_id="support-clean-late-parcel", rubric=v2).mine
    # turn 2 labeled now; ana's other turns of the case were carried from version 1
    assert mine[2].code == "in_role"
    at.switch_page("views/rubrics.py")
    run(at)
    assert at.selectbox(key="_w_rubric_ref").value == "role-adherence@2"
    assert "labels recorded: immutable" in at.caption[0].value


def test_a_refused_rubric_file_is_named_by_version_to_owners_only_and_no_path_is_shown(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: an unreadable rubric file showed ``Rubric /srv/.../x/v2.yaml is not
    offered.`` on every page, reviewers' too, with the parse error and its path."""
    root = _rubric_dir(tmp_path, DEMO_RUBRIC_FILE.read_text(), "id: role-adherence\nversion: [2\n")
    monkeypatch.setenv("REVIEW_APP_RUBRICS_DIR", str(root))
    at = open_app(monkeypatch, local="olivia")  # the demo's policy owner
    assert [plain(w.value) for w in at.sidebar.warning] == [
        "Rubric role-adherence@2 is not offered."
    ]
    (message,) = [t.value for t in at.sidebar.text]
    assert message.startswith("role-adherence@2, line ")
    at.switch_page("views/rubrics.py")
    run(at)
    shown = " ".join([w.value for w in at.warning] + [t.value for t in at.text])
    assert "role-adherence@2" in shown
    for page_text in (message, shown):
        assert str(tmp_path) not in page_text and "rubrics/" not in page_text

    reviewer = open_app(monkeypatch, local="ana")  # one of the demo's reviewers
    assert not reviewer.sidebar.warning and not reviewer.sidebar.text
    reviewer.switch_page("views/rubrics.py")
    run(reviewer)
    assert not [w for w in reviewer.warning if "not offered" in w.value]
    assert "role-adherence@2" not in " ".join(t.value for t in reviewer.text)


def test_a_single_rubric_version_has_nothing_to_compare(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_app(monkeypatch, local="ana")
    at.switch_page("views/rubrics.py")
    run(at)
    assert [plain(i.value) for i in at.tabs[2].info] == [
        "role-adherence has a single version so far."
    ]


def test_a_changed_labeled_rubric_file_is_refused(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = DEMO_RUBRIC_FILE.read_text().replace(
        "title: Wrong register for the role\n", "title: Any register will do\n"
    )
    root = _rubric_dir(tmp_path, changed)
    monkeypatch.setenv("REVIEW_APP_RUBRICS_DIR", str(root))
    at = open_app(monkeypatch, local="olivia")  # a policy owner: told why

    assert [plain(w.value) for w in at.sidebar.warning] == [f"Rubric {RUBRIC} is not offered."]
    (message,) = [t.value for t in at.sidebar.text]
    assert "has labels and its file (role-adherence/v1.yaml) has changed" in message
    assert "immutable" in message and "v2.yaml" in message
    assert str(tmp_path) not in message
    assert "No usable rubric version" in at.sidebar.error[0].value
    assert not queue_rows(at)

    at.switch_page("views/rubrics.py")
    run(at)
    assert [w.value for w in at.warning] == [f"`{RUBRIC}` is not offered"]
    assert "immutable" in at.text[0].value
    # the labels still mean what they meant: the stored content is unchanged
    with Session(engine) as session:
        stored = session.get(RubricVersion, ("role-adherence", 1))
    assert stored is not None and "Any register will do" not in stored.body_json

    # restoring the file (a new modification time) makes it usable again
    (root / "role-adherence" / "v1.yaml").write_text(DEMO_RUBRIC_FILE.read_text())
    at.switch_page("views/queue.py")
    run(at)
    assert not at.sidebar.warning
    assert len(queue_rows(open_app(monkeypatch, local="ana"))) == 17  # a reviewer's queue


# --- untrusted text ----------------------------------------------------------------------------

HOSTILE = (
    "**bold** <script>alert(1)</script> ![x](http://example.com/x.png) "
    "[click](javascript:alert(1)) <b>html</b>"
)


def test_transcript_markup_is_shown_as_plain_text(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = copy.deepcopy(demo_case("support-clean-late-parcel"))
    case["case_id"] = "markup-case"
    case["chatbot_role"] = f"Role with {HOSTILE}"
    case["transcript"][0]["text"] = f"user says {HOSTILE}"
    case["transcript"][1]["text"] = f"assistant says {HOSTILE}"
    import_cases(engine, tmp_path / "cases", [case])
    assign(engine, "ana", ["markup-case"])  # a reviewer opens cases in their queue

    at = open_case(open_app(monkeypatch, local="ana"), "markup-case")
    texts = [t.value for t in at.text]
    assert f"Role with {HOSTILE}" in texts
    for value in (f"user says {HOSTILE}", f"assistant says {HOSTILE}"):
        assert shows_message(texts, value)
    assert f"Role: Role with {HOSTILE}"[:116] + "…" in texts, "the role's first line, literally"
    # the panel shows rationales with textContent; the page hands them over as data
    Keys(at).press("in_role", 2, rationale=f"why {HOSTILE}")
    assert panel(at)["rationales"] == {"2": f"why {HOSTILE}"}
    assert f"Your rationale: why {HOSTILE}" in turn_lines(turn_messages(at)[2])
    for rendered in markdown_strings(at):
        for fragment in ("**bold**", "<script>", "![x]", "javascript:", "<b>"):
            assert fragment not in rendered, rendered


def _reasons(at: AppTest) -> list[str]:
    """The queue's captions that say why a case is high (built from others' labels or
    the judge)."""
    markers = ("disagree", "judge", "contradicts")
    return [plain(c.value) for c in at.caption if any(m in plain(c.value) for m in markers)]


def test_queue_most_informative_first_shows_why_to_policy_owners_only(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ana, a reviewer (ben and chloe label the same cases): the order, never why
    at = open_app(monkeypatch, local="ana")
    before = [row[0] for row in queue_rows(at)]
    at.selectbox(key="_w_queue_order").set_value("informative")
    run(at)
    after = [row[0] for row in queue_rows(at)]
    assert sorted(after) == sorted(before), "the same cases, in another order"
    assert after != before, "the others' disagreements still order the queue"
    assert _reasons(at) == [], "blind: nothing from the others' labels or the judge"
    open_case(at, after[0])
    at.switch_page("views/queue.py")
    run(at)
    assert at.selectbox(key="_w_queue_order").value == "informative", "the order is kept"
    assert _reasons(at) == []

    # olivia, a policy owner with the same cases in her queue: each high case says why
    assign(engine, "olivia", before)
    at = open_app(monkeypatch, local="olivia")
    at.selectbox(key="_w_queue_order").set_value("informative")
    run(at)
    assert any("reviewers disagree on" in reason for reason in _reasons(at))


def test_the_review_link_reopens_the_case_being_reviewed(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_case(open_app(monkeypatch, local="lee"), "support-delayed-refund-violation")
    Keys(at).press("in_role", 2, focus=6)
    at.switch_page("views/queue.py")
    run(at)
    at.query_params.clear()
    at.switch_page("views/review.py")  # the sidebar link: no case in the address
    run(at)
    assert review_heading(at) == "support-delayed-refund-violation"
    assert at.query_params["case"] == "support-delayed-refund-violation"
    assert sidebar_turn(at) == 6, "on the turn it was on"
