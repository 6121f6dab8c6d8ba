"""The typed figures of a report come back from their JSON form unchanged: pages read a
stored report's figures as the dataclasses the statistics made (issue 39)."""

from __future__ import annotations

import json
from typing import Any

from review_app.calibration.scores import (
    ReliabilityReport,
    ThresholdSweep,
    reliability,
    threshold_sweep,
)
from review_app.stats.alt_test import AltTestResult, alt_test
from review_app.stats.core import Estimate
from review_app.stats.paired import McNemarResult


def _through_json(value: object) -> Any:
    return json.loads(json.dumps(value))


def test_an_estimate_comes_back_from_either_form() -> None:
    estimate = Estimate(0.42, 31, (0.3, 0.55), None, "few units", "cluster bootstrap")
    assert Estimate.from_dict(_through_json(estimate.to_dict())) == estimate
    agreement = Estimate.from_dict(_through_json(estimate.to_dict(count_key="n_units")))
    assert agreement == Estimate(0.42, 31, (0.3, 0.55), None, "few units")
    undefined = Estimate(None, 0, None, "no shared units")
    assert Estimate.from_dict(undefined.to_dict()) == undefined


def test_the_alt_test_comes_back_from_its_json() -> None:
    labels = {
        reviewer: {(f"case-{i}", 1): "break" if (i + k) % 3 else "in_role" for i in range(40)}
        for k, reviewer in enumerate(["ana", "bo", "cy"])
    }
    judged = {(f"case-{i}", 1): "break" if i % 3 else "in_role" for i in range(40)}
    result = alt_test(labels, judged, break_codes={"break"}, baseline=True)
    back = AltTestResult.from_dict(_through_json(result.to_dict()))
    assert back.to_dict() == result.to_dict()
    assert [r.reviewer for r in back.reviewers] == [r.reviewer for r in result.reviewers]


def test_the_sweep_and_the_reliability_come_back_from_their_json() -> None:
    y = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0] * 3
    scores = [0.9, 0.2, 0.7, 0.6, 0.4, 0.1, 0.8, 0.3, 0.55, 0.45] * 3
    sweep = threshold_sweep(y_true=y, scores=scores)
    assert ThresholdSweep.from_dict(_through_json(sweep.to_dict())) == sweep
    report = reliability(y_true=y, probabilities=scores)
    assert ReliabilityReport.from_dict(_through_json(report.to_dict())) == report


def test_mcnemar_comes_back_from_its_json() -> None:
    test = McNemarResult(((30, 4), (11, 5)), 4, 0.118)
    back = McNemarResult.from_dict(_through_json(test.to_dict()))
    assert back == test and back.n == 50
