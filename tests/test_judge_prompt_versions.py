"""A judge prompt written for one rubric version is not silently reused for the next
(docs/reference.md, "Rubric versions: mapping and carry-over"), and a new prompt version
run against N+1 answers with the codes of N+1 (SQLite and PostgreSQL)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from review_app.errors import InputError
from review_app.judging import find_judge_prompt
from review_app.rubrics.parsing import parse_rubric_text
from review_app.services.access.actors import operator_actor
from review_app.services.judging.judge_runner import run_judge
from tests.conftest import Database
from tests.judge_support import FakeChatServer, serve
from tests.test_judge_service import BREAKS, RUBRICS, UNITS, make_world, stored_verdicts

SHIPPED_V1 = Path(__file__).resolve().parents[1] / "rubrics" / "role-adherence" / "v1.yaml"


def _v2() -> str:
    """role-adherence@2: authority_break reworded under a new code, forbidden_action."""
    text = SHIPPED_V1.read_text(encoding="utf-8").replace("\nversion: 1\n", "\nversion: 2\n")
    head = "  - code: authority_break\n    verdict: fail\n"
    assert head in text
    text = text.replace(
        head,
        "  - code: forbidden_action\n    verdict: fail\n"
        "    from: [authority_break]\n    change: reworded\n",
    )
    return text.replace("label: authority_break", "label: forbidden_action")


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    yield from serve()


def test_a_prompt_run_for_version_1_is_refused_for_version_2(
    database: Database, server: FakeChatServer, tmp_path: Path
) -> None:
    world = make_world(database, server, tmp_path)
    world.run()  # role-judge@v1 is now written for role-adherence@1
    v2 = parse_rubric_text(_v2(), source="v2.yaml")
    server.reset_log()
    with pytest.raises(InputError) as caught:
        run_judge(
            world.engine,
            operator_actor(),
            rubric=v2,
            prompt=world.prompt,
            settings=world.settings(),
            case_ids=world.case_ids,
        )
    assert caught.value.field == "--prompt"
    assert caught.value.message.startswith(
        "role-judge@v1 was written for role-adherence@1 (its first run, "
    )
    assert "save it as a new prompt version" in caught.value.message
    assert server.requests == []

    # a new prompt version (a copy of the text) runs, and answers use version 2's codes
    copy = tmp_path / "prompts" / "role-judge" / "v7.txt"
    copy.parent.mkdir(parents=True)
    shutil.copy(world.prompt.source, copy)
    new_prompt = find_judge_prompt(RUBRICS, v2.id, str(copy))
    summary = run_judge(
        world.engine,
        operator_actor(),
        rubric=v2,
        prompt=new_prompt,
        settings=world.settings(),
        case_ids=world.case_ids,
    )
    assert summary.name == f"role-judge@v7/fake at 127.0.0.1:{server.port}"
    for request in server.requests:
        codes = request.prompt.split('"<one of: ', 1)[1].split(">", 1)[0].split(", ")
        assert codes == list(v2.codes) and "authority_break" not in codes
    stored = stored_verdicts(world.engine, summary.run_id)
    assert sorted(stored) == sorted(UNITS)
    for unit, verdict in stored.items():
        if unit in BREAKS:  # the fake judge still says authority_break: not a v2 code
            assert verdict.label is None and verdict.error_kind == "answer"
        else:
            assert verdict.label == "in_role"
    # and the first prompt still runs against the version it was written for
    assert world.run().skipped == len(UNITS)
