"""The compiled evaluator gives exactly what its source gives (README, "The compiled
evaluator").

An install asked for with ``HATCH_BUILD_HOOK_ENABLE_MYPYC=1`` compiles
``review_app/evaluator.py`` with mypyc, and Python then imports the compiled module
in its place. mypyc checks the types the source declares as it runs, so a compiled
build could raise, or part ways, where the source does not. Here the installed
(compiled) module and the source, loaded as a second module, evaluate the same cases,
and their results are compared as JSON text with their diagnostic lines and lanes.

The tests skip where the evaluator is not compiled, unless
``REVIEW_APP_REQUIRE_COMPILED_EVALUATOR=1`` (.ci/run sets it, and builds it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

import review_app.evaluator as installed
from benchmarks.bench_foundation import python_build_evaluator
from tests.test_evaluator_equivalence import corpus_lines, edited_corpus_cases
from tests.test_evaluator_properties import (
    PROPERTY_SETTINGS,
    corrupted_cases,
    json_values,
    well_formed_cases,
)

SOURCE = Path(installed.__file__).with_name("evaluator.py")
REQUIRED = os.environ.get("REVIEW_APP_REQUIRE_COMPILED_EVALUATOR") == "1"

pytestmark = pytest.mark.skipif(
    not installed.compiled() and not REQUIRED,
    reason="the evaluator is not compiled here "
    "(HATCH_BUILD_HOOK_ENABLE_MYPYC=1 pip install -e . compiles it; the wheel builds are "
    "in tests/test_packaging.py)",
)


source = python_build_evaluator()


def assert_same(case: Any) -> None:
    expected = source.evaluate_case(case)
    result = installed.evaluate_case(case)
    assert json.dumps(result) == json.dumps(expected)
    assert installed.diagnostic(result) == source.diagnostic(expected)
    assert installed.lane(result) == source.lane(expected)


def test_the_installed_evaluator_is_the_compiled_build_and_the_source_is_not() -> None:
    assert installed.compiled(), f"{installed.__file__} is not a compiled module"
    assert not source.compiled()
    assert installed.EVALUATOR_VERSION == source.EVALUATOR_VERSION


def test_the_compiled_module_is_newer_than_its_source() -> None:
    # Python imports the compiled module in place of the source beside it, so an edit
    # of the source after the build would go unseen until the next install.
    assert Path(installed.__file__).stat().st_mtime >= SOURCE.stat().st_mtime, (
        f"{SOURCE} changed after it was compiled: install again with "
        "HATCH_BUILD_HOOK_ENABLE_MYPYC=1, or delete review_app/evaluator*.so"
    )


def test_the_benchmark_corpus_with_random_edits_gives_what_the_source_gives() -> None:
    for line in corpus_lines(200):
        assert_same(json.loads(line))
    statuses = set()
    for case in edited_corpus_cases(seed=29):
        assert_same(case)
        statuses.add(installed.evaluate_case(case)["status"])
    assert statuses == {"pass", "fail", "invalid", "no_contract"}


@PROPERTY_SETTINGS
@given(well_formed_cases())
def test_generated_cases_give_what_the_source_gives(case: dict[str, Any]) -> None:
    assert_same(case)


@PROPERTY_SETTINGS
@given(corrupted_cases())
def test_corrupted_cases_give_what_the_source_gives(case: Any) -> None:
    assert_same(case)


@PROPERTY_SETTINGS
@given(json_values)
def test_any_json_value_gives_what_the_source_gives(value: Any) -> None:
    assert_same(value)
