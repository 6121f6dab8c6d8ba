"""The examples in the statistics core's docstrings run and give the published values.

Each module of ``review_app.stats`` and ``review_app.agreement`` has its docstring
examples run here (so ``python -m pytest`` runs them without ``--doctest-modules``);
the functions named in ``EXAMPLES_REQUIRED`` must have some.
"""

from __future__ import annotations

import doctest
import importlib
import io
import itertools
import pkgutil
import types

import pytest

import review_app.agreement
import review_app.stats

PACKAGES = (review_app.stats, review_app.agreement)
MODULES = sorted(
    f"{package.__name__}.{info.name}"
    for package in PACKAGES
    for info in pkgutil.iter_modules(package.__path__)
)

EXAMPLES_REQUIRED = {
    "review_app.stats.core": (
        "ratio",
        "kappa_from_confusion",
        "kappa_from_margins",
        "wilson_interval",
        "proportion",
        "percentile_interval",
        "resample_weights",
        "cluster_draws",
        "draw_cluster_counts",
        "bootstrap_confusions",
    ),
    "review_app.stats.confusion": ("confusion_from_codes", "binary_confusion", "binary_metrics"),
    "review_app.agreement.coefficients": (
        "krippendorff_alpha",
        "fleiss_kappa",
        "cohen_kappa_pairs",
    ),
}


def run_examples(module: types.ModuleType) -> tuple[doctest.TestResults, str]:
    """Run every docstring example of ``module``: (failed, attempted) and the report."""
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(module, module.__name__):
        runner.run(test, out=report.write)
    return runner.summarize(verbose=False), report.getvalue()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_pass(name: str) -> None:
    results, report = run_examples(importlib.import_module(name))
    assert results.failed == 0, report


@pytest.mark.parametrize(
    ("module_name", "function"),
    [(module, function) for module, names in EXAMPLES_REQUIRED.items() for function in names],
)
def test_core_functions_show_an_example(module_name: str, function: str) -> None:
    module = importlib.import_module(module_name)
    (test,) = doctest.DocTestFinder(recurse=False).find(getattr(module, function), function)
    assert test.examples, f"{module_name}.{function} has no example in its docstring"
    lines = (test.docstring or "").splitlines()
    sections = {
        line.strip()
        for line, underline in itertools.pairwise(lines)
        if underline.strip().startswith("---")
    }
    assert {"Parameters", "Examples"} <= sections, (function, sections)
    assert sections & {"Returns", "Yields"}, (function, sections)


def test_a_wrong_published_value_fails() -> None:
    module = types.ModuleType("synthetic_stats")
    exec(
        'def kappa():\n    """\n    >>> 1 + 1\n    3\n    """\n',
        module.__dict__,
    )
    results, report = run_examples(module)
    assert results == (1, 1)
    assert "Expected:\n    3\nGot:\n    2" in report
