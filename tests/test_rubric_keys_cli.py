"""``review-app rubrics show ID@V [--json]``: each code with its key, before and after a
new version is published with a code inserted before others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Database
from tests.keys_support import NARROWED, NEW_CODE, write_rubrics_with_v2


def _shown(run_cli: Any, ref: str, db: str, env: dict[str, str]) -> dict[str, Any]:
    result = run_cli("rubrics", "show", ref, "--json", db=db, env=env)
    assert result.returncode == 0, result.stderr
    shown: dict[str, Any] = json.loads(result.stdout)
    return shown


def test_rubrics_show_lists_each_code_with_a_key_that_survives_a_new_version(
    run_cli: Any, tmp_path: Path, sqlite_database: Database
) -> None:
    env = {"REVIEW_APP_RUBRICS_DIR": str(write_rubrics_with_v2(tmp_path / "rubrics"))}
    db = sqlite_database.url
    published = run_cli("rubrics", "publish", "role-adherence@2", "--json", db=db, env=env)
    assert published.returncode == 0, published.stderr

    v1 = _shown(run_cli, "role-adherence@1", db, env)
    v2 = _shown(run_cli, "role-adherence@v2", db, env)
    assert v1["rubric"] == "role-adherence@1" and v2["rubric"] == "role-adherence@2"
    old = {row["code"]: row for row in v1["labels"]}
    new = {row["code"]: row for row in v2["labels"]}
    assert [row["key"] for row in v1["labels"]] == list("123456789")
    assert set(new) == set(old) | {NEW_CODE}
    for code, row in old.items():
        assert new[code]["key"] == row["key"], code
        how = "kept" if code == NARROWED else "carried"  # narrowed: its key stays its own
        assert (new[code]["key_source"], new[code]["key_from"]) == (how, code)
        assert (new[code]["title"], new[code]["verdict"]) == (row["title"], row["verdict"])
    assert new[NARROWED]["definition"] != old[NARROWED]["definition"]
    assert new[NEW_CODE]["key"] == "0" and new[NEW_CODE]["key_source"] == "free"
    assert new[NEW_CODE]["verdict"] == "fail"
    assert [row["code"] for row in v2["labels"]][2] == NEW_CODE  # inserted third
    assert len({row["key"] for row in v2["labels"]}) == len(v2["labels"]) == 10

    text = run_cli("rubrics", "show", "role-adherence@2", db=db, env=env)
    assert text.returncode == 0, text.stderr
    assert any(line.split()[:2] == ["0", NEW_CODE] for line in text.stdout.splitlines())
    assert any(line.split()[:2] == ["3", "scope_break"] for line in text.stdout.splitlines())


def test_rubrics_show_refuses_an_unknown_version_in_one_line(
    run_cli: Any, tmp_path: Path, sqlite_database: Database
) -> None:
    env = {"REVIEW_APP_RUBRICS_DIR": str(write_rubrics_with_v2(tmp_path / "rubrics"))}
    result = run_cli("rubrics", "show", "role-adherence@9", db=sqlite_database.url, env=env)
    assert result.returncode != 0 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no rubric role-adherence@9" in result.stderr
