"""Publishing rubric version 2 over version 1 (SQLite and PostgreSQL): what is carried,
what goes to re-review and to whom, version 1 untouched, nothing carried twice, and a
version that drops a used code refused (docs/reference.md, "Rubric versions: mapping and
carry-over").

Expected figures are counted from the rows the test itself wrote, not from the app.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session, col

from review_app.errors import InputError, PermissionDenied
from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import export_labels_csv, import_labels
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.labels.adjudication import record_gold
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_carry import publish_rubric, re_review_queue
from review_app.services.rubrics.rubric_catalog import RubricCatalog, sync_rubrics
from storage.cases import actor_units
from storage.models import GoldLabel, JudgeVerdict, Label
from tests.actors import signed_in
from tests.builders import write_label_csv
from tests.carry_support import V2, V2_DROPPING, write_rubrics
from tests.conftest import DEMO_CASES, Database

REVIEWERS = ("ana", "ben", "cy")
V1_CODES = (
    "in_role",
    "persona_break",
    "scope_break",
    "authority_break",
    "tone_break",
    "cannot_judge",
)
CARRIED = ("in_role", "scope_break", "authority_break", "tone_break", "cannot_judge")


@dataclass
class World:
    db: Database
    root: Path
    rows: list[tuple[str, int, str, str]]
    """(case_id, turn, reviewer, code) of every label written to version 1."""
    gold: dict[tuple[str, int], str]
    verdicts: list[tuple[str, int, str]]

    def catalog(self) -> RubricCatalog:
        return sync_rubrics(self.db.engine, operator_actor(), directory=self.root)


def _build(db: Database, tmp_path: Path, *, v2: str = V2) -> World:
    engine, op = db.engine, operator_actor()
    import_paths(engine, op, [DEMO_CASES])
    root = write_rubrics(tmp_path / "rubrics", v2=None)
    catalog = sync_rubrics(engine, op, directory=root)
    for name in REVIEWERS:
        signed_in(engine, name, role="reviewer")
    with Session(engine) as session:
        case_ids = sorted({c for c, _ in actor_units(session, case_ids=_case_ids(engine))})
        units = actor_units(session, case_ids=case_ids[:6])
    rows: list[tuple[str, int, str, str]] = []
    for index, (case_id, turn) in enumerate(units):
        for offset, reviewer in enumerate(REVIEWERS):
            if (index + offset) % 4 == 3:
                continue  # not every reviewer labels every unit
            rows.append((case_id, turn, reviewer, V1_CODES[(index * 2 + offset) % 6]))
    csv_path = write_label_csv(
        tmp_path / "labels.csv",
        [(c, t, r, code, "carry@1", f"why {c} {t}") for c, t, r, code in rows],
    )
    import_labels(engine, op, csv_path, catalog=catalog)
    gold = {units[i]: V1_CODES[i % 6] for i in range(0, 12)}
    for (case_id, turn), code in gold.items():
        record_gold(
            engine,
            op,
            rubric=catalog.get("carry@1"),
            case_id=case_id,
            turn=turn,
            code=code,
            rubric_ambiguity="persona vs scope unclear" if code == "persona_break" else None,
        )
    verdicts = [(c, t, V1_CODES[(i + i // 4) % 6]) for i, (c, t) in enumerate(units[:15])]
    verdict_file = tmp_path / "verdicts.jsonl"
    verdict_file.write_text(
        "".join(
            json.dumps(
                {
                    "case_id": c,
                    "turn": t,
                    "judge": "j",
                    "prompt_version": "v1",
                    "model": "m",
                    "label": code,
                    "score": 0.5,
                }
            )
            + "\n"
            for c, t, code in verdicts
        ),
        encoding="utf-8",
    )
    import_verdicts(engine, op, verdict_file, rubric=catalog.get("carry@1"))
    (root / "carry" / "v2.yaml").write_text(v2, encoding="utf-8")
    return World(db, root, rows, gold, verdicts)


def _case_ids(engine) -> list[str]:  # type: ignore[no-untyped-def]
    from storage.models import Case

    with Session(engine) as session:
        return list(session.scalars(select(col(Case.case_id)).order_by(col(Case.case_id))))


@pytest.fixture
def world(database: Database, tmp_path: Path) -> World:
    return _build(database, tmp_path)


def _export(world: World, ref: str) -> str:
    catalog = world.catalog()
    return export_labels_csv(
        world.db.engine, operator_actor(), rubric=catalog.get(ref), history=True
    )


def test_publish_carries_exact_counts_and_queues_the_split_code(world: World) -> None:
    engine = world.db.engine
    before_v1 = _export(world, "carry@1")
    report = publish_rubric(engine, operator_actor(), catalog=world.catalog(), ref="carry@2")

    by_code = Counter(code for _, _, _, code in world.rows)
    assert report.to_dict() == {
        "rubric": "carry@2",
        "from": "carry@1",
        "carried": {code: by_code[code] for code in CARRIED if by_code[code]},
        "not_carried": {"persona_break": by_code["persona_break"]},
        "re_review_units": len({(c, t) for c, t, _, code in world.rows if code == "persona_break"}),
        "re_review": dict(Counter(r for _, _, r, code in world.rows if code == "persona_break")),
    }
    assert by_code["persona_break"] > 0 and all(by_code[c] > 0 for c in CARRIED)
    gold_expected = Counter(code for code in world.gold.values() if code != "persona_break")
    assert report.gold_carried == dict(gold_expected)
    assert report.judge_carried == dict(
        Counter(code for _, _, code in world.verdicts if code != "persona_break")
    )

    # version 1 unchanged byte for byte; version 2 holds exactly the carried labels
    assert _export(world, "carry@1") == before_v1
    with Session(engine) as session:
        v2 = session.execute(
            select(col(Label.code), func.count())
            .where(
                col(Label.rubric_id) == "carry", col(Label.rubric_version) == 2, col(Label.current)
            )
            .group_by(col(Label.code))
        ).all()
        assert dict(v2) == report.carried
        carried_gold = session.scalars(
            select(GoldLabel).where(col(GoldLabel.rubric_version) == 2)
        ).all()
        assert all(g.carry_id is not None and g.rubric_ambiguity is None for g in carried_gold)

    # the re-review queue: exactly the reviewers who gave persona_break, their units only
    catalog = world.catalog()
    for name in REVIEWERS:
        actor = signed_in(engine, name)
        items = re_review_queue(engine, actor, catalog=catalog, rubric=catalog.get("carry@2"))
        mine = sorted(
            (c, t) for c, t, r, code in world.rows if r == name and code == "persona_break"
        )
        assert sorted((i.case_id, i.turn) for i in items) == mine
        assert all(
            i.old_code == "persona_break"
            and i.new_codes == ("persona_swap", "prompt_leak")
            and i.old_definition == "Drops the persona."
            and not i.done
            for i in items
        )

    # one audit entry for the act, with the counts
    entries = [
        e
        for e in audit_entries(engine, operator_actor(), action="rubric_publish")
        if "carried" in e.summary
    ]
    assert len(entries) == 1 and entries[0].summary["carried"] == report.carried
    assert entries[0].summary["after"] == world.catalog().get("carry@2").sha256
    assert not audit_entries(engine, operator_actor(), action="rubric_carry")

    # publishing twice carries nothing twice
    again = publish_rubric(engine, operator_actor(), catalog=world.catalog(), ref="carry@2")
    assert again.carried == {} and again.re_review == {} and again.re_review_units == 0
    assert again.gold_carried == {} and again.judge_carried == {}
    assert _export(world, "carry@1") == before_v1
    with Session(engine) as session:
        n_v2 = session.scalar(
            select(func.count()).select_from(Label).where(col(Label.rubric_version) == 2)
        )
        assert n_v2 == sum(report.carried.values())
        n_verdicts = session.scalar(select(func.count()).select_from(JudgeVerdict))
        assert n_verdicts == len(world.verdicts) + sum(report.judge_carried.values())


def test_the_database_refuses_carrying_a_label_twice(world: World) -> None:
    engine = world.db.engine
    publish_rubric(engine, operator_actor(), catalog=world.catalog(), ref="carry@2")
    with Session(engine) as session:
        carried = session.scalars(select(Label).where(col(Label.rubric_version) == 2)).first()
        assert carried is not None
        twin = Label(
            case_id=carried.case_id,
            turn=carried.turn,
            rubric_id="carry",
            rubric_version=3,
            code=carried.code,
            reviewer_id=carried.reviewer_id,
            carried_from_id=carried.carried_from_id,
        )
        session.add(twin)
        with pytest.raises(Exception, match=r"(?i)unique"):
            session.flush()


def test_relabeling_finishes_a_re_review_unit(world: World) -> None:
    from review_app.services.labels.labeling import record_label

    engine = world.db.engine
    publish_rubric(engine, operator_actor(), catalog=world.catalog(), ref="carry@2")
    case_id, turn, name, _ = next(r for r in world.rows if r[3] == "persona_break")
    actor = signed_in(engine, name)
    catalog = world.catalog()
    rubric = catalog.get("carry@2")
    record_label(engine, actor, case_id=case_id, turn=turn, rubric=rubric, code="prompt_leak")
    items = re_review_queue(engine, actor, catalog=catalog, rubric=rubric, case_id=case_id)
    assert [i.done for i in items if i.turn == turn] == [True]


def test_a_version_dropping_a_used_code_is_refused(database: Database, tmp_path: Path) -> None:
    world = _build(database, tmp_path, v2=V2_DROPPING)
    before = _export(world, "carry@1")
    with pytest.raises(InputError) as caught:
        publish_rubric(database.engine, operator_actor(), catalog=world.catalog(), ref="carry@2")
    message = str(caught.value)
    assert "\n" not in message
    assert "carry@2 leaves used codes of carry@1 unaccounted for: persona_break (" in message
    assert _export(world, "carry@1") == before
    with Session(database.engine) as session:
        assert (
            session.scalar(
                select(func.count()).select_from(Label).where(col(Label.rubric_version) == 2)
            )
            == 0
        )


def test_reviewers_do_not_publish(world: World) -> None:
    """Issue 34: policy owners and admins publish; a reviewer is refused (nothing stored)."""
    reviewer = signed_in(world.db.engine, "rita", role="reviewer")
    with pytest.raises(PermissionDenied):
        publish_rubric(world.db.engine, reviewer, catalog=world.catalog(), ref="carry@2")
    assert "carry@2" in world.catalog().drafts


def test_the_command_line_publishes_and_refuses(  # type: ignore[no-untyped-def]
    sqlite_database: Database, tmp_path: Path, run_cli
) -> None:
    world = _build(sqlite_database, tmp_path / "ok")
    env = {"REVIEW_APP_RUBRICS_DIR": str(world.root)}
    diff = run_cli("rubrics", "diff", "carry@1", "carry@2", db=sqlite_database.url, env=env)
    assert diff.returncode == 0, diff.stderr
    assert json.loads(diff.stdout)["mapping"]["carried"]["scope_break"] == "scope_break"
    result = run_cli("rubrics", "publish", "carry@2", "--json", db=sqlite_database.url, env=env)
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)) == {
        "rubric",
        "from",
        "carried",
        "not_carried",
        "re_review_units",
        "re_review",
    }
    dropping = _build(sqlite_database_two(tmp_path), tmp_path / "dropping", v2=V2_DROPPING)
    env = {"REVIEW_APP_RUBRICS_DIR": str(dropping.root)}
    refused = run_cli("rubrics", "publish", "carry@2", db=dropping.db.url, env=env)
    assert refused.returncode == 2
    assert refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "unaccounted for: persona_break (" in lines[0]


def sqlite_database_two(tmp_path: Path) -> Database:
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    url = f"sqlite:///{tmp_path / 'second.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    return Database("sqlite", url, engine)


def _alpha(rows: list[tuple[str, int, str, str]], units: set[tuple[str, int]]) -> float:
    """Krippendorff's nominal alpha from the ``krippendorff`` package (an independent check)."""
    import krippendorff
    import numpy as np

    unit_list = sorted(units)
    codes = sorted({code for *_, code in rows})
    matrix = np.full((len(REVIEWERS), len(unit_list)), np.nan)
    for case_id, turn, reviewer, code in rows:
        if (case_id, turn) in units:
            matrix[REVIEWERS.index(reviewer), unit_list.index((case_id, turn))] = codes.index(code)
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))


def test_reports_count_carried_units_and_set_versions_side_by_side(world: World) -> None:
    from review_app.services.judging.judge_report import calibration_report
    from review_app.services.review.agreement_reports import agreement_report

    engine, op = world.db.engine, operator_actor()
    publish = publish_rubric(engine, op, catalog=world.catalog(), ref="carry@2")
    catalog = world.catalog()
    v1, v2 = catalog.get("carry@1"), catalog.get("carry@2")
    report = agreement_report(engine, op, rubric=v2, previous=v1, n_resamples=0)
    kept = [r for r in world.rows if r[3] != "persona_break"]
    carried_units = {(c, t) for c, t, _, _ in kept}
    assert report["ratings"] == len(kept) == sum(publish.carried.values())
    assert report["carried_units"] == len(carried_units)
    versions = report["versions"]
    assert versions["units"] == len(carried_units)
    old, new = versions["compared"]
    assert (old["rubric"], new["rubric"]) == ("carry@1", "carry@2")
    assert new["krippendorff_alpha"]["value"] == pytest.approx(_alpha(kept, carried_units))
    assert old["krippendorff_alpha"]["value"] == pytest.approx(_alpha(world.rows, carried_units))
    assert agreement_report(engine, op, rubric=v1, n_resamples=0)["versions"] is None

    judged = calibration_report(engine, op, rubric=v2, n_resamples=0, previous=v1)
    (run,) = judged["runs"]
    assert run["carried_verdicts"] == run["verdicts"] == sum(publish.judge_carried.values())
    assert judged["carried_units"] == {
        "labels": len(carried_units),
        "gold_labels": sum(publish.gold_carried.values()),
    }
    # judge kappa against each version's gold, side by side on the units gold has in both
    from sklearn.metrics import cohen_kappa_score

    side = judged["rubric_versions"]
    common = {unit for unit, code in world.gold.items() if code != "persona_break"}
    assert side["units"] == len(common)
    for compared, ref in zip(side["compared"], ("carry@1", "carry@2"), strict=True):
        # version 2's run holds only the carried verdicts (persona_break was split)
        verdict_of = {
            (c, t): code
            for c, t, code in world.verdicts
            if ref == "carry@1" or code != "persona_break"
        }
        shared = sorted(
            unit
            for unit in common
            if unit in verdict_of and "cannot_judge" not in (world.gold[unit], verdict_of[unit])
        )
        expected = cohen_kappa_score(
            [world.gold[u] for u in shared], [verdict_of[u] for u in shared]
        )
        assert compared["rubric"] == ref
        (figures,) = compared["runs"].values()
        assert figures["n_compared"] == len(shared)
        assert figures["kappa"]["value"] == pytest.approx(expected)
    assert 0 < expected < 1
    assert calibration_report(engine, op, rubric=v1, n_resamples=0)["rubric_versions"] is None


def test_the_first_version_has_nothing_to_carry(world: World) -> None:
    with pytest.raises(InputError, match="carry@1 is the first version: there is nothing to carry"):
        publish_rubric(world.db.engine, operator_actor(), catalog=world.catalog(), ref="carry@1")
