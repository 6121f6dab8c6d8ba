"""Agreement over time and by position in a session (the pure core)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import krippendorff
import numpy as np
import pytest

from review_app.agreement.over_time import agreement_over_time, session_agreement

MONDAY = datetime(2026, 10, 5, 9, tzinfo=UTC)
CODES = ["in_role", "tone_break", "scope_break"]


def weekly_labels(*, weeks: int, per_week: int, seed: int, slipping: str | None = None):
    """Three reviewers label every unit; ``slipping`` errs more each week."""
    rng = np.random.default_rng(seed)
    rows = []
    truth: dict[int, str] = {}
    unit = 0
    for week in range(weeks):
        for k in range(per_week):
            truth[unit] = str(rng.choice(CODES, p=[0.6, 0.2, 0.2]))
            moment = MONDAY + timedelta(weeks=week, minutes=3 * k)
            for name in ("ana", "bo", "cy"):
                slip = 0.05 + (0.15 * week if name == slipping else 0.0)
                code = truth[unit]
                if rng.random() < slip:
                    code = str(rng.choice([c for c in CODES if c != code]))
                rows.append((unit, name, code, moment + timedelta(seconds=10 * len(name))))
            unit += 1
    return rows, truth


def over_time(rows, gold, **kwargs):
    return agreement_over_time(
        units=[r[0] for r in rows],
        reviewers=[r[1] for r in rows],
        codes=[r[2] for r in rows],
        times=[r[3] for r in rows],
        versions=["role-adherence@1"] * len(rows),
        gold=gold,
        **kwargs,
    )


def test_weekly_alpha_is_krippendorff_on_the_units_completed_that_week() -> None:
    rows, truth = weekly_labels(weeks=5, per_week=60, seed=1, slipping="cy")
    gold = {("role-adherence@1", u): code for u, code in truth.items() if u % 3 == 0}
    publication = MONDAY + timedelta(weeks=2, hours=1)
    result = over_time(rows, gold, publications=[("role-adherence@2", publication)])
    assert result.by == "week"
    assert [p.label for p in result.periods] == [
        f"week of {(MONDAY + timedelta(weeks=w)).date().isoformat()}" for w in range(5)
    ]
    for week, period in enumerate(result.periods):
        units = range(60 * week, 60 * (week + 1))
        data = np.array(
            [[CODES.index(c) for u, n, c, _ in rows if n == name and u in units]
             for name in ("ana", "bo", "cy")],
            dtype=float,
        )  # fmt: skip
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert period.alpha["role-adherence@1"].value == pytest.approx(expected)
        assert period.labels == 180
    cy = [p.with_gold["cy"].value for p in result.periods]
    assert cy[-1] < cy[0] - 0.3
    ana = [p.with_gold["ana"] for p in result.periods]
    assert all(share.n == 20 for share in ana) and all(share.ci95 for share in ana)
    assert result.publications == [
        {"rubric": "role-adherence@2", "at": publication.isoformat(),
         "period": result.periods[2].label}
    ]  # fmt: skip
    assert result.sentences[0].startswith("Reviewers' alpha falls: ")
    assert "sharpen those definitions" in result.sentences[0]


def test_few_weeks_make_batches_of_labels() -> None:
    rows, _ = weekly_labels(weeks=2, per_week=50, seed=2)
    result = over_time(rows, {}, batch=90)
    assert result.by == "batch"
    assert [p.labels for p in result.periods] == [90, 90, 90, 30]
    assert result.periods[0].label == "labels 1-90" and result.periods[-1].label == "labels 271-300"
    assert "batches of 90 labels" in result.warnings[0]


def sessions(*, tired: tuple[str, ...], seed: int, opposite: bool = True):
    """Two reviewers label the same 60 units a day in two-hour sessions on five days, ana
    in the opposite order to bo (or the same); the ``tired`` err far more after the first
    hour."""
    rng = np.random.default_rng(seed)
    rows = []
    for day in range(5):
        start = MONDAY + timedelta(days=day)
        truth = [str(rng.choice(CODES)) for _ in range(60)]
        for k, code in enumerate(truth):
            for name, slot in (("ana", 59 - k if opposite else k), ("bo", k)):
                minute = 2 * slot
                slip = 0.45 if (name in tired and minute >= 60) else 0.05
                wrong = str(rng.choice([c for c in CODES if c != code]))
                given = code if rng.random() >= slip else wrong
                rows.append((60 * day + k, name, given, start + timedelta(minutes=minute)))
    return rows


def session_figures(rows):
    return session_agreement(
        units=[r[0] for r in rows], reviewers=[r[1] for r in rows], codes=[r[2] for r in rows],
        times=[r[3] for r in rows],
    )  # fmt: skip


def test_agreement_falls_late_in_a_session_and_is_said() -> None:
    rows = sessions(tired=("bo",), seed=3)
    pooled, by_reviewer = session_figures(rows)
    assert pooled.first_hour.n + pooled.later.n == len(rows)
    assert by_reviewer["bo"].falls and not by_reviewer["ana"].falls
    assert over_time(rows, {}).sentences[1].endswith("; it falls for bo.")
    everyone = sessions(tired=("ana", "bo"), seed=3, opposite=False)
    pooled, _ = session_figures(everyone)
    assert pooled.falls and pooled.difference is not None and pooled.difference[1] < 0
    sentence = over_time(everyone, {}).sentences[1]
    assert "agreement falls after the first hour" in sentence
    assert "suggest shorter sessions or a break each hour" in sentence
    steady = over_time(sessions(tired=(), seed=3), {})
    assert not steady.session.falls and not any(
        f.falls for f in steady.session_by_reviewer.values()
    )
    assert steady.sentences[1].endswith("no fall after the first hour that the data show.")


def test_labels_outside_sessions_are_partners_only() -> None:
    rows = sessions(tired=(), seed=4)
    in_sessions = [name == "ana" for _, name, _, _ in rows]
    pooled, by_reviewer = session_agreement(
        units=[r[0] for r in rows], reviewers=[r[1] for r in rows], codes=[r[2] for r in rows],
        times=[r[3] for r in rows], in_sessions=in_sessions,
    )  # fmt: skip
    assert set(by_reviewer) == {"ana"}
    assert pooled.first_hour.n + pooled.later.n == len(rows) // 2


def test_bad_input() -> None:
    with pytest.raises(ValueError) as caught:
        agreement_over_time(units=[1], reviewers=[], codes=[], times=[], versions=[], gold={})
    assert str(caught.value) == (
        "units, reviewers, codes, times and versions must have the same length"
    )
    with pytest.raises(ValueError, match="batch must be an integer >= 1, got 0"):
        agreement_over_time(units=[], reviewers=[], codes=[], times=[], versions=[], gold={},
                            batch=0)  # fmt: skip


def test_alpha_moving_within_its_noise_holds_steady() -> None:
    rows, _ = weekly_labels(weeks=5, per_week=60, seed=5)
    result = over_time(rows, {})
    first = result.periods[0].alpha["role-adherence@1"]
    assert first.ci95 is not None and first.ci95[0] < first.value < first.ci95[1]
    assert result.sentences[0].startswith("Reviewers' alpha holds steady within its uncertainty: ")
    assert result.sentences[0].endswith("; nothing to do.")
