"""Every public service function: who may call it, enumerated so none is forgotten.

Each public function of ``review_app.services.*`` is either GUARDED (it reads or
writes labels, gold, verdicts, exports, agreement or assignments: it takes the
issued actor and checks the role) or EXEMPT with a reason. A new service function
that is neither fails here. Guarded functions are called as a forged actor (built by
hand, with an admin role and a real reviewer's id), as an actor issued by another
process, and as a reviewer who has labeled nothing yet.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

import review_app.services as services_package
from review_app.errors import PermissionDenied
from review_app.formats.options import ImportOptions
from review_app.rubrics.model import Rubric
from review_app.services.access import actors, case_access
from review_app.services.access.actors import Actor
from review_app.services.cases import case_views as cases
from review_app.services.cases import importing
from review_app.services.exchange import demo, export, labels_io, uploads
from review_app.services.exchange.demo import DEMO_CASES, DEMO_LABELS, DEMO_VERDICTS, load_demo
from review_app.services.jobs import runner as jobs
from review_app.services.judging import (
    align,
    drift,
    endpoints,
    estimate,
    judge_compare,
    judge_import,
    judge_jobs,
    judge_prompts,
    judge_report,
    judge_run_kind,
    judge_runner,
    prompt_workbench,
    run_defaults,
    runs,
    selective,
    strata,
    stratified_audit,
    uncertainty_audit,
    unit_with_judge,
)
from review_app.services.labels import adjudication, key_events, labeling
from review_app.services.operations import audit, backup
from review_app.services.reports import report_jobs, report_store
from review_app.services.review import agreement_reports, reliability
from review_app.services.rubrics import rubric_carry, rubric_catalog, rubric_drafts
from review_app.services.team import audit_samples, people, queue, rights, team
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.actors import operator, signed_in

RUBRIC = "role-adherence@1"
CASE = "support-delayed-refund-violation"


@dataclass
class World:
    engine: Engine
    rubric: Rubric
    tmp: Path
    run_id: int


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("authz")
    engine = create_database_engine(f"sqlite:///{tmp / 'review.db'}")
    upgrade_database(engine)
    load_demo(engine, operator())
    rubric = rubric_catalog.sync_rubrics(engine, operator()).get(RUBRIC)
    run_id = runs.list_judge_runs(engine, operator(), rubric=rubric)[0].id
    yield World(engine, rubric, tmp, run_id)
    engine.dispose()


Call = Callable[[World, Actor], Any]

# name -> (call, what a reviewer who has labeled nothing gets: "denied" or a check)
GUARDED: dict[str, tuple[Call, str]] = {
    "audit_samples.audited_units": (
        lambda w, a: audit_samples.audited_units(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "uncertainty_audit.draw_uncertainty_sample": (
        lambda w, a: uncertainty_audit.draw_uncertainty_sample(
            w.engine, a, rubric=w.rubric, run_id=w.run_id, size=1, seed=0, reviewers=["ana"]
        ),
        "denied",
    ),
    "uncertainty_audit.uncertainty_sample": (
        lambda w, a: uncertainty_audit.uncertainty_sample(
            w.engine, a, rubric=w.rubric, run_id=w.run_id
        ),
        "denied",
    ),
    "drift.drift_report": (
        lambda w, a: drift.drift_report(w.engine, a, rubric=w.rubric, n_resamples=10),
        "denied",
    ),
    "selective.route_units": (
        lambda w, a: selective.route_units(
            w.engine, a, rubric=w.rubric, run_ids=[w.run_id], alpha=0.1, delta=0.1
        ),
        "denied",
    ),
    "selective.route_judges": (
        lambda w, a: selective.route_judges(
            w.engine, a, rubric=w.rubric, run_ids=[w.run_id], alpha=0.1, delta=0.1
        ),
        "denied",
    ),
    "selective.certified_verdicts": (
        lambda w, a: selective.certified_verdicts(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "selective.coverage_curve": (
        lambda w, a: selective.coverage_curve(
            w.engine, a, rubric=w.rubric, run_ids=[w.run_id], delta=0.1, alphas=[0.1]
        ),
        "denied",
    ),
    "audit_samples.draw_audit_sample": (
        lambda w, a: audit_samples.draw_audit_sample(
            w.engine, a, rubric=w.rubric, size=1, seed=0, reviewers=["ana"]
        ),
        "denied",
    ),
    "backup.backup_database": (
        lambda w, a: backup.backup_database(a, db=str(w.engine.url), path=w.tmp / "copy.db"),
        "denied",
    ),
    "backup.restore_database": (
        lambda w, a: backup.restore_database(a, db=str(w.engine.url), path=w.tmp / "none.db"),
        "denied",
    ),
    "reliability.reliability_report": (
        lambda w, a: reliability.reliability_report(w.engine, a, rubric=w.rubric, n_resamples=0),
        "denied",
    ),
    "reliability.agreement_over_time_report": (
        lambda w, a: reliability.agreement_over_time_report(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.reviewer_reliability": (
        lambda w, a: report_store.reviewer_reliability(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.agreement_over_time": (
        lambda w, a: report_store.agreement_over_time(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.run_strata": (
        lambda w, a: report_store.run_strata(
            w.engine, a, rubric=w.rubric, run_id=w.run_id, by="lane"
        ),
        "denied",
    ),
    "strata.design_cells": (
        lambda w, a: strata.design_cells(w.engine, a, w.rubric, [], codes_of_run={}),
        "denied",
    ),
    "strata.fit_strata": (
        lambda w, a: strata.fit_strata(w.engine, a, rubric=w.rubric, run_id=w.run_id, by="lane"),
        "denied",
    ),
    "strata.stratified_estimate": (
        lambda w, a: strata.stratified_estimate(
            w.engine, a, rubric=w.rubric, run_id=w.run_id, by="lane", n_resamples=0
        ),
        "denied",
    ),
    "stratified_audit.allocation_plan": (
        lambda w, a: stratified_audit.allocation_plan(
            w.engine, a, rubric=w.rubric, run_id=w.run_id, by="lane", size=1
        ),
        "denied",
    ),
    "stratified_audit.draw_stratified_sample": (
        lambda w, a: stratified_audit.draw_stratified_sample(
            w.engine,
            a,
            rubric=w.rubric,
            run_id=w.run_id,
            by="lane",
            size=1,
            seed=0,
            reviewers=["ana"],
        ),
        "denied",
    ),
    "estimate.break_rate_estimate": (
        lambda w, a: estimate.break_rate_estimate(w.engine, a, rubric=w.rubric, run_id=w.run_id),
        "denied",
    ),
    "adjudication.ambiguity_notes": (
        lambda w, a: adjudication.ambiguity_notes(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "adjudication.disagreement_queue": (
        lambda w, a: adjudication.disagreement_queue(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "adjudication.gold_labels": (
        lambda w, a: adjudication.gold_labels(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "adjudication.record_gold": (
        lambda w, a: adjudication.record_gold(
            w.engine, a, rubric=w.rubric, case_id=CASE, turn=2, code="in_role"
        ),
        "denied",
    ),
    "unit_with_judge.unit_detail_with_judge": (
        lambda w, a: unit_with_judge.unit_detail_with_judge(
            w.engine, a, rubric=w.rubric, case_id=CASE, turn=2
        ),
        "denied",
    ),
    "judge_jobs.run_judge_job": (
        lambda w, a: judge_jobs.run_judge_job(
            w.engine,
            a,
            rubric=w.rubric,
            prompt=None,
            asked={"scope": "gold"},
            settings=[],  # type: ignore[arg-type]
        ),
        "denied",
    ),
    "judge_jobs.resolve_rubric_and_prompt": (
        lambda w, a: judge_jobs.resolve_rubric_and_prompt(
            w.engine, a, rubric=RUBRIC, prompt="role-judge@v1", judge=None
        ),
        "denied",
    ),
    "adjudication.unit_detail": (
        lambda w, a: adjudication.unit_detail(w.engine, a, rubric=w.rubric, case_id=CASE, turn=2),
        "denied",
    ),
    "agreement_reports.agreement_report": (
        lambda w, a: agreement_reports.agreement_report(
            w.engine, a, rubric=w.rubric, n_resamples=10
        ),
        "denied",
    ),
    "agreement_reports.confusion_between": (
        lambda w, a: agreement_reports.confusion_between(
            w.engine, a, rubric=w.rubric, reviewer_a="ana", reviewer_b="ben"
        ),
        "denied",
    ),
    "agreement_reports.dashboard_data": (
        lambda w, a: agreement_reports.dashboard_data(w.engine, a, rubric=w.rubric, n_resamples=10),
        "denied",
    ),
    "agreement_reports.label_token": (
        lambda w, a: agreement_reports.label_token(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "agreement_reports.load_label_columns": (
        lambda w, a: agreement_reports.load_label_columns(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "audit.audit_entries": (lambda w, a: audit.audit_entries(w.engine, a), "denied"),
    "case_views.case_fingerprint": (
        lambda w, a: cases.case_fingerprint(w.engine, a, case_id=CASE),
        "denied",
    ),
    "case_views.load_case_view": (
        lambda w, a: cases.load_case_view(w.engine, a, case_id=CASE),
        "denied",
    ),
    "case_access.may_open_case": (
        lambda w, a: case_access.may_open_case(w.engine, a, case_id=CASE),
        "denied",
    ),
    "demo.load_demo": (lambda w, a: demo.load_demo(w.engine, a), "denied"),
    "export.export_data": (
        lambda w, a: export.export_data(w.engine, a, rubric=w.rubric, format="csv"),
        "denied",
    ),
    "importing.import_paths": (
        lambda w, a: importing.import_paths(w.engine, a, [DEMO_CASES]),
        "denied",
    ),
    "importing.import_records": (
        lambda w, a: importing.import_records(w.engine, a, [], source="none.jsonl"),
        "denied",
    ),
    "judge_report.calibrated_probability": (
        lambda w, a: judge_report.calibrated_probability(
            w.engine, a, run_id=w.run_id, scores=[0.5]
        ),
        "denied",
    ),
    "judge_report.calibration_report": (
        lambda w, a: judge_report.calibration_report(w.engine, a, rubric=w.rubric, n_resamples=10),
        "denied",
    ),
    "judge_report.disagreement_explorer": (
        lambda w, a: judge_report.disagreement_explorer(
            w.engine, a, rubric=w.rubric, report_run={"disagreements": []}
        ),
        "denied",
    ),
    "judge_report.few_shot_material": (
        lambda w, a: judge_report.few_shot_material(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "judge_report.fit_run_calibration": (
        lambda w, a: judge_report.fit_run_calibration(
            w.engine, a, rubric=w.rubric, run_id=w.run_id
        ),
        "denied",
    ),
    "judge_import.import_verdicts": (
        lambda w, a: judge_import.import_verdicts(w.engine, a, DEMO_VERDICTS, rubric=w.rubric),
        "denied",
    ),
    "runs.judge_token": (
        lambda w, a: runs.judge_token(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "runs.list_judge_runs": (
        lambda w, a: runs.list_judge_runs(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "endpoints.list_endpoints": (lambda w, a: endpoints.list_endpoints(w.engine, a), "denied"),
    "judge_run_kind.start_judge_job": (
        lambda w, a: judge_run_kind.start_judge_job(
            w.engine, a, rubric=RUBRIC, prompt="role-judge@v1", endpoint="nowhere"
        ),
        "denied",
    ),
    "prompt_workbench.preview_prompt": (
        lambda w, a: prompt_workbench.preview_prompt(
            w.engine, a, rubric=w.rubric, text="$codes $reply"
        ),
        "denied",
    ),
    "prompt_workbench.run_on_gold_units": (
        lambda w, a: prompt_workbench.run_on_gold_units(
            w.engine, a, rubric=w.rubric, prompt="role-judge@v1", endpoint="nowhere"
        ),
        "denied",
    ),
    "prompt_workbench.run_on_every_turn": (
        lambda w, a: prompt_workbench.run_on_every_turn(
            w.engine, a, rubric=w.rubric, prompt="role-judge@v1", endpoint="nowhere"
        ),
        "denied",
    ),
    "prompt_workbench.current_job": (
        lambda w, a: prompt_workbench.current_job(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "prompt_workbench.compare_for_workbench": (
        lambda w, a: prompt_workbench.compare_for_workbench(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_jobs.queue_report_job": (
        lambda w, a: report_jobs.queue_report_job(
            w.engine, a, parameters={"report": "drift", "rubric": RUBRIC, "parameters": {}}
        ),
        "denied",
    ),
    "report_jobs.latest_report_job": (
        lambda w, a: report_jobs.latest_report_job(w.engine, a, parameters={"report": "drift"}),
        "denied",
    ),
    "report_store.agreement_dashboard": (
        lambda w, a: report_store.agreement_dashboard(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.judge_calibration": (
        lambda w, a: report_store.judge_calibration(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.drift": (
        lambda w, a: report_store.drift(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.run_estimate": (
        lambda w, a: report_store.run_estimate(w.engine, a, rubric=w.rubric, run_id=w.run_id),
        "denied",
    ),
    "report_store.run_coverage": (
        lambda w, a: report_store.run_coverage(
            w.engine, a, rubric=w.rubric, run_id=w.run_id, delta=0.1, alphas=[0.1]
        ),
        "denied",
    ),
    "report_store.open_disagreements": (
        lambda w, a: report_store.open_disagreements(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "report_store.run_few_shot": (
        lambda w, a: report_store.run_few_shot(w.engine, a, rubric=w.rubric, run_id=w.run_id),
        "denied",
    ),
    "report_store.intervals_ready": (
        lambda w, a: report_store.intervals_ready(
            w.engine,
            a,
            waiting={"report": "drift", "rubric": RUBRIC, "parameters": {}, "token": "x"},
        ),
        "denied",
    ),
    "report_store.compute_report": (
        lambda w, a: report_store.compute_report(
            w.engine, a, parameters={"report": "drift", "rubric": RUBRIC, "parameters": {}}
        ),
        "denied",
    ),
    "runner.job_status": (lambda w, a: jobs.job_status(w.engine, a, job_id=1), "denied"),
    "runner.list_jobs": (lambda w, a: jobs.list_jobs(w.engine, a), "denied"),
    "runner.stop_job": (lambda w, a: jobs.stop_job(w.engine, a, job_id=1), "denied"),
    "judge_compare.compare_judge_runs": (
        lambda w, a: judge_compare.compare_judge_runs(w.engine, a, rubric=w.rubric, n_resamples=10),
        "denied",
    ),
    "judge_prompts.prompt_refs_for": (
        lambda w, a: judge_prompts.prompt_refs_for(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "prompt_workbench.plan_run": (
        lambda w, a: prompt_workbench.plan_run(
            w.engine, a, rubric=w.rubric, prompt="role-judge@v2", endpoint="x", scope="gold"
        ),
        "denied",
    ),
    "run_defaults.team_judge": (
        lambda w, a: run_defaults.team_judge(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "run_defaults.team_judge_runs": (
        lambda w, a: run_defaults.team_judge_runs(w.engine, a, runs=[]),
        "denied",
    ),
    "run_defaults.choose_team_judge": (
        lambda w, a: run_defaults.choose_team_judge(w.engine, a, rubric=w.rubric, run_id=w.run_id),
        "denied",
    ),
    "run_defaults.run_choices": (
        lambda w, a: run_defaults.run_choices(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "run_defaults.run_or_default": (
        lambda w, a: run_defaults.run_or_default(w.engine, a, rubric=w.rubric, run_id=None),
        "denied",
    ),
    "judge_prompts.list_judge_prompts": (
        lambda w, a: judge_prompts.list_judge_prompts(w.engine, a, rubric_id=w.rubric.id),
        "denied",
    ),
    "judge_prompts.show_judge_prompt": (
        lambda w, a: judge_prompts.show_judge_prompt(
            w.engine, a, rubric_id=w.rubric.id, ref="role-judge@v1"
        ),
        "denied",
    ),
    "judge_prompts.create_judge_prompt": (
        lambda w, a: judge_prompts.create_judge_prompt(
            w.engine, a, rubric=w.rubric, judge="role-judge", text="$codes $reply"
        ),
        "denied",
    ),
    "judge_prompts.preview_messages": (
        lambda w, a: judge_prompts.preview_messages(
            w.engine, a, rubric=w.rubric, text="$codes $reply", case_id=CASE, turn=2
        ),
        "denied",
    ),
    "judge_prompts.prompt_for_run": (
        lambda w, a: judge_prompts.prompt_for_run(
            w.engine, a, rubric=w.rubric, ref="role-judge@v1"
        ),
        "denied",
    ),
    "judge_runner.run_judge": (
        lambda w, a: judge_runner.run_judge(
            w.engine, a, rubric=w.rubric, prompt=None, settings=None, case_ids=[]
        ),
        "denied",
    ),
    "labeling.case_labels": (
        lambda w, a: labeling.case_labels(w.engine, a, case_id=CASE, rubric=w.rubric),
        "denied",  # a case outside the reviewer's queue (the others see it "blind")
    ),
    "labeling.record_label": (
        lambda w, a: labeling.record_label(
            w.engine, a, case_id=CASE, turn=2, rubric=w.rubric, code="in_role"
        ),
        "denied",  # a case outside the reviewer's queue
    ),
    "labels_io.export_labels_csv": (
        lambda w, a: labels_io.export_labels_csv(w.engine, a, rubric=w.rubric, history=True),
        "denied",
    ),
    "labels_io.import_labels": (
        lambda w, a: labels_io.import_labels(
            w.engine, a, DEMO_LABELS, catalog=rubric_catalog.sync_rubrics(w.engine, operator())
        ),
        "denied",  # the demo file holds other reviewers' labels
    ),
    "people.add_person": (
        lambda w, a: people.add_person(w.engine, a, name="mallory", role="admin"),
        "denied",
    ),
    "actors.authorize": (lambda w, a: actors.authorize(w.engine, a, "policy_owner"), "denied"),
    "people.set_role": (
        lambda w, a: people.set_role(w.engine, a, name="ana", role="admin"),
        "denied",
    ),
    "people.deactivate_person": (
        lambda w, a: people.deactivate_person(w.engine, a, name="ana"),
        "denied",
    ),
    "people.reactivate_person": (
        lambda w, a: people.reactivate_person(w.engine, a, name="ana"),
        "denied",
    ),
    "rights.preview_rights_change": (
        lambda w, a: rights.preview_rights_change(w.engine, a, name="ana", change="deactivate"),
        "denied",
    ),
    "queue.plan_assignment": (
        lambda w, a: queue.plan_assignment(
            w.engine, a, rubric=w.rubric, reviewers=["ana"], mode="add", case_ids=[CASE]
        ),
        "denied",
    ),
    "uncertainty_audit.preview_uncertainty_sample": (
        lambda w, a: uncertainty_audit.preview_uncertainty_sample(
            w.engine, a, rubric=w.rubric, run_id=w.run_id, size=1, seed=0, reviewers=["ana"]
        ),
        "denied",
    ),
    "align.plan_align": (
        lambda w, a: align.plan_align(
            w.engine, a, rubric=w.rubric, start="role-judge@v1", endpoint="e", optimizer="o"
        ),
        "denied",
    ),
    "align.start_align_job": (
        lambda w, a: align.start_align_job(
            w.engine, a, rubric=w.rubric, start="role-judge@v1", endpoint="e", optimizer="o"
        ),
        "denied",
    ),
    "align.run_align_job": (
        lambda w, a: align.run_align_job(
            w.engine,
            a,
            job_id=1,
            parameters={"rubric": w.rubric.ref},
            stop=lambda: False,
            progress=lambda done, total: None,
        ),
        "denied",
    ),
    "align.confirm_by_hand": (
        lambda w, a: align.confirm_by_hand(w.engine, a, rubric=w.rubric, run_ids=(w.run_id, 1)),
        "denied",
    ),
    "align.confirmation_cases": (
        lambda w, a: align.confirmation_cases(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "align.current_align_job": (
        lambda w, a: align.current_align_job(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "align.confirmation_budget": (
        lambda w, a: align.confirmation_budget(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "rubric_catalog.catalog_token": (
        lambda w, a: rubric_catalog.catalog_token(w.engine, a),
        "own",
    ),
    "team.team_view": (
        lambda w, a: team.team_view(w.engine, a, rubric=w.rubric),
        "denied",
    ),
    "queue.assign_cases": (
        lambda w, a: queue.assign_cases(
            w.engine, a, rubric=w.rubric, reviewers=["ana"], overlap=1, case_ids=[CASE]
        ),
        "denied",
    ),
    "key_events.apply_key_events": (
        lambda w, a: key_events.apply_key_events(
            w.engine, a, case_id=CASE, rubric=w.rubric, client_id="t", events=[]
        ),
        "own",
    ),
    "queue.informative_queue": (
        lambda w, a: queue.informative_queue(w.engine, a, rubric=w.rubric),
        "own",
    ),
    "queue.open_review_work": (
        lambda w, a: queue.open_review_work(w.engine, a, rubric=w.rubric),
        "own",
    ),
    "queue.next_case": (
        lambda w, a: queue.next_case(w.engine, a, rubric=w.rubric, after=None),
        "own",
    ),
    "queue.queue_page": (lambda w, a: queue.queue_page(w.engine, a, rubric=w.rubric), "own"),
    "rubric_carry.publish_rubric": (
        lambda w, a: rubric_carry.publish_rubric(
            w.engine, a, catalog=rubric_catalog.sync_rubrics(w.engine, operator()), ref=RUBRIC
        ),
        "denied",
    ),
    "rubric_carry.carry_history": (
        lambda w, a: rubric_carry.carry_history(w.engine, a, rubric_id=w.rubric.id),
        "denied",
    ),
    "rubric_carry.re_review_queue": (
        lambda w, a: rubric_carry.re_review_queue(
            w.engine, a, catalog=rubric_catalog.sync_rubrics(w.engine, operator()), rubric=w.rubric
        ),
        "own",
    ),
    "rubric_catalog.has_labels": (
        lambda w, a: rubric_catalog.has_labels(w.engine, a, w.rubric),
        "own",
    ),
    "rubric_catalog.sync_rubrics": (
        lambda w, a: rubric_catalog.sync_rubrics(w.engine, a),
        "own",
    ),
    "rubric_catalog.default_ref_for": (
        lambda w, a: rubric_catalog.default_ref_for(
            w.engine, a, rubric_catalog.sync_rubrics(w.engine, operator())
        ),
        "own",
    ),
    "rubric_drafts.draft_text": (
        lambda w, a: rubric_drafts.draft_text(
            w.engine,
            a,
            catalog=rubric_catalog.sync_rubrics(w.engine, operator()),
            rubric_id=w.rubric.id,
        ),
        "denied",
    ),
    "rubric_drafts.check_draft": (
        lambda w, a: rubric_drafts.check_draft(
            w.engine,
            a,
            catalog=rubric_catalog.sync_rubrics(w.engine, operator()),
            rubric_id=w.rubric.id,
            text="id: x",
        ),
        "denied",
    ),
    "rubric_drafts.edit_code": (
        lambda w, a: rubric_drafts.edit_code(
            w.engine,
            a,
            catalog=rubric_catalog.sync_rubrics(w.engine, operator()),
            rubric_id=w.rubric.id,
            text="id: x\nlabels: []\n",
            code="x",
            title="X",
            definition="X.",
            verdict="fail",
            from_codes=None,
            change="new",
        ),
        "denied",
    ),
    "rubric_drafts.save_draft": (
        lambda w, a: rubric_drafts.save_draft(
            w.engine,
            a,
            catalog=rubric_catalog.sync_rubrics(w.engine, operator()),
            rubric_id=w.rubric.id,
            text="id: x",
        ),
        "denied",
    ),
    "rubric_drafts.preview_publish": (
        lambda w, a: rubric_drafts.preview_publish(
            w.engine, a, catalog=rubric_catalog.sync_rubrics(w.engine, operator()), ref=RUBRIC
        ),
        "denied",
    ),
    "rubric_drafts.export_text": (
        lambda w, a: rubric_drafts.export_text(
            w.engine, a, catalog=rubric_catalog.sync_rubrics(w.engine, operator()), ref=RUBRIC
        ),
        "own",
    ),
    "uploads.import_label_upload": (
        lambda w, a: uploads.import_label_upload(
            w.engine,
            a,
            name="labels.csv",
            data=DEMO_LABELS.read_bytes(),
            catalog=rubric_catalog.sync_rubrics(w.engine, operator()),
            sign_in_enabled=True,
        ),
        "denied",
    ),
    "uploads.import_upload": (
        lambda w, a: uploads.import_upload(
            w.engine, a, name="case.json", data=b"{}", options=ImportOptions()
        ),
        "denied",
    ),
    "uploads.import_verdict_upload": (
        lambda w, a: uploads.import_verdict_upload(
            w.engine,
            a,
            name="v.jsonl",
            data=DEMO_VERDICTS.read_bytes(),
            rubric=w.rubric,
            score_means="break",
        ),
        "denied",
    ),
    "uploads.validate_upload": (
        lambda w, a: uploads.validate_upload(
            w.engine, a, name="c.json", data=b"{}", options=ImportOptions()
        ),
        "denied",
    ),
    "uploads.zip_export": (
        lambda w, a: uploads.zip_export(w.engine, a, export.ExportResult({}, {})),
        "denied",
    ),
}

# Functions that take no actor: pure computations over values the caller already
# has, helpers over an open storage Session (their service callers authorize), and
# case metadata without labels.
EXEMPT: dict[str, str] = {
    "adjudication.gold_counts": "pure: counts over a rating table the caller read",
    "adjudication.gold_set_from_table": "pure: over a rating table the caller read",
    "adjudication.first_open_unit": "pure: over a disagreement queue the caller read",
    "adjudication.next_open_unit": "pure: over a disagreement queue the caller read",
    "adjudication.queue_place": "pure: over a disagreement queue the caller read",
    "agreement_reports.report_from_table": "pure: coefficients over a table the caller read",
    "agreement_reports.versions_side_by_side": "pure: coefficients over tables the caller read",
    "rubric_carry.mapping_for": "pure: the mapping between rubric versions the caller has",
    "rubric_keys.key_map_for": "pure: the keys of a rubric version in the caller's catalog",
    "rubric_keys.rubric_with_keys": "pure: a rubric version of the caller's catalog, keyed",
    "transport.check_key": "pure: checks a key's characters",
    "transport.control_character": "pure: finds a control character in a text",
    "transport.url_problem": "pure: checks an endpoint's URL",
    "transport.without_credentials": "pure: an URL without the credentials written in it",
    "case_window.turn_window": "pure: which positions of a long case the review page draws",
    "local_judge_lease.main": "no data: runs the bundled judge's server in its own process",
    "rubric_catalog.refusal_name": "pure: names a refused rubric file without directories",
    "rubric_catalog.file_name": "pure: names a version's file as <id>/v<N>.yaml",
    "actors.check_new_person_name": "pure: checks a name a person signs in or is added with",
    "actors.proxy_identity": "pure: decodes a proxy's identity header",
    "rubric_catalog.source_name": "pure: names a rubric's source without the server's paths",
    "rubric_catalog.store_rubric_version": "takes an open Session: a building block of publishing",
    "audit.audit_line": "pure: formats an entry the caller read",
    "case_selection.selected_cases": "case ids by lane (metadata), for authorized services",
    "file_import.file_sha256": "pure: hashes a local file",
    "file_import.record_error": "pure: builds an error",
    "file_import.with_stored_turns": "takes an open Session: a building block of the imports",
    "audit.parse_since": "pure: parses a timestamp",
    "uncertainty_audit.scored_turns": "pure: scores from verdict columns the caller read",
    "export.export_file_name": "pure: a file name from the page's choices",
    "case_rows.prepare_case": "pure: builds one case's rows in memory",
    "people.assignable_people": "takes an open Session: checks names for authorized assigners",
    "case_views.case_view": "takes an open Session: a building block of authorized services",
    "case_access.check_case_access": "checks an actor it is given against a row the caller read",
    "case_views.check_lane": "pure: validates a lane name",
    "case_access.not_in_queue": "pure: builds the refusal for a case outside a reviewer's queue",
    "case_views.claims_role_change": "pure: a regular expression over text",
    "case_views.list_cases": "case metadata only (ids, lanes, findings), no labels",
    "export.write_export": "writes an ExportResult that export_data authorized",
    "runs.find_or_create_run": "takes an open Session: a building block",
    "runs.listing_of": "takes an open Session: a building block of the authorized listings",
    "runs.listings_of": "takes an open Session: a building block of the authorized listings",
    "runs.rubric_listings": "takes an open Session: a building block of the authorized listings",
    "page_run.token_part": "takes an open Session: a part of the tokens, for authorized reads",
    "run_defaults.confound": "pure: words for two runs the caller listed",
    "run_defaults.default_pair": "pure: picks from runs the caller listed",
    "run_defaults.default_run": "pure: picks from runs the caller listed",
    "run_defaults.team_run": "pure: picks from runs the caller listed",
    "run_defaults.why_default": "pure: words for a run the caller picked",
    "judge_jobs.scope_words": "pure: words for a judge run's parameters",
    "judge_jobs.prompt_source": "pure: a prompt reference, a template's path made absolute",
    "runner.register_job_kind": "no data: adds a kind's handler to this process's registry",
    "runner.registered_kinds": "no data: the kinds this process's workers can run",
    "runner.job_view": "pure: a job row the caller read, as the faces show it",
    "runner.job_actor": "issues the actor of a stored job's creator to the worker (through "
    "actors.actor_for_job, which reads their current role)",
    "report_jobs.prune_report_jobs": "the report worker's housekeeping after a report job "
    "(deletes finished report jobs past the retention; no person's data)",
    "transport.url_host": "pure: host and port of a URL",
    "transport.event_loop_factory": "no data: uvloop's event loop, if installed",
    "transport.open_endpoints": "no data: client sessions to endpoints a run was given",
    "selective.units_needed": "pure: a number from alpha and delta",
    "runs.run_name": "pure: formats a run",
    "runs.run_verdicts": "a building block: every use case calling it authorized its actor first",
    "judge_prompts.parse_prompt_ref": "pure: parses a judge@vN reference",
    "judge_prompts.store_for_run": "takes an open Session: a building block of run_judge",
    "judge_runner.select_case_ids": "case ids by lane (metadata), used by the authorized run_judge",
    "transport.verdict_schema": "pure: a JSON schema from the rubric",
    "unit_prompts.unit_messages": "a building block of preview_prompt, which authorizes",
    "unit_prompts.case_batches": "a building block of run_judge and unit_messages, whose "
    "callers authorize",
    "unit_prompts.case_prompts": "pure: renders the prompts of a case the caller read",
    "strata.budget_sentence": "pure: words for a figure the caller computed",
    "strata.check_by": "pure: validates a stratification's name",
    "strata.judged_codes": "pure: codes from verdict columns the caller read",
    "strata.strata_of": "takes an open Session: a building block of authorized services",
    "strata.strata_order": "no data: the order strata are listed in",
    "label_table.load_rating_table": "takes an open Session: a building block",
    "label_table.rating_table": "pure: over label columns the caller read",
    "labels_io.parse_label_file": "pure: parses a local file",
    "actors.local_user_name": "no data: the local user's name from the environment",
    "align.align_json": "pure: the --json document of an align result",
    "page_run.run_memo": "no data of its own: calls the read it is given once per page "
    "run (the caller's read authorizes)",
    "align.ceiling": "pure: over gold and verdicts the caller read",
    "align.confirmation_level": "pure: the level of a confirmation set's k-th test",
    "align.conversation_stratum": "pure: a conversation's stratum from its gold codes",
    "align.first_fenced_block": "pure: text",
    "align.reflection_request": "pure: the optimiser's request from a prompt and records",
    "align.result_lines": "pure: words for an align result",
    "align.split_by_conversation": "pure: splits units the caller read",
    "align.verdict_sentence": "pure: words for an align result",
    "runner.add_job_row": "takes an open Session: the caller authorized and commits",
    "actors.sign_in_configured": "no data: the sign-in setting from the environment and files",
    "rights.rights_of": "pure: words for a role's rights",
    "audit_samples.earlier_draw": "takes an open Session: a building block of the draws",
    "local_judge.local_judge_available": "no data: whether a package is installed",
    "local_judge.local_server_command": "no data: a command line",
    "local_judge.local_server_environment": "no data: environment variables",
    "local_judge.model_path": "no data: a file path",
    "actors.check_reviewer_name": "pure: validates a name",
    "actors.display_of": "pure: the display form of a typed name",
    "actors.check_role_name": "pure: validates a role",
    "actors.role_with_article": "pure: a role's name with its article, for sentences",
    "actors.role_words": "pure: a role's name as words",
    "actors.is_self": "pure: whether a name is the acting person's",
    "database.database_url": "no data: which database URL to use",
    "database.open_database": "opens and migrates the database; reads no rows",
    "actors.configured_admins": "reads an environment variable",
    "actors.one_role_read": "no data: scopes authorize's role reads to one page run",
    "actors.is_issued": "the seal check itself",
    "people.list_people": "names and roles of people, no labels",
    "actors.operator_actor": "issues the command line's actor",
    "actors.require_reviewer_id": "checks an actor it is given",
    "actors.sign_in": "issues actors",
    "key_events.parse_key_events": "pure: checks the review page's queued key presses",
    "case_access.checked_case_id": "pure: checks a case id given by a face (the address)",
    "queue.summarise": "pure: sums up per turn the signals the caller read",
    "queue.score_summary": "pure: scores a summary the caller computed",
    "queue.order_informative_first": "pure: orders case ids by scores the caller computed",
    "queue.score_case": "pure: scores signals the caller read",
    "uploads.uploaded_file": "a temporary file for an upload",
    "endpoints.parse_endpoints": "no data: parses the admin's endpoints file",
    "endpoints.configured_endpoints": "no data: the admin's endpoints (services never echo keys)",
    "endpoints.find_endpoint": "no data: one configured endpoint, for authorized runs",
    "endpoints.endpoint_settings": "no data: an endpoint's settings for authorized runs",
    "endpoints.ensure_local_server": "no data: starts the bundled model's server",
    "report_store.encode_report": "pure: a report the caller computed, as JSON text",
    "report_store.decode_report": "pure: the report in JSON text the caller read",
    "report_store.report_key": "pure: names a report from its kind and parameters",
    "report_store.inline_rows": "no data: a setting from the environment",
    "report_store.wait_seconds": "no data: a setting from the environment",
    "page_run.one_token_read": "no data: scopes the reports' token reads to one page run",
    "report_store.page_seconds": "no data: a setting from the environment",
    "report_store.page_budget": "no data: scopes the seconds of reports computed at once to "
    "one page run",
    "runner.worker_name": "no data: this worker's lease owner name",
    "runner.run_worker": "the worker: runs each job as the person who started it, authorized "
    "again by the job's services",
    "runner.start_process_worker": "starts this process's worker thread (run_worker)",
    "actors.actor_for_job": "issues the actor of a stored job's creator to the worker; "
    "authorize still checks their current role",
}

# Exempt functions that nevertheless reach the database, each for the reason above.
EXEMPT_WITH_DATABASE = {
    "runs.run_verdicts",
    "case_selection.selected_cases",
    "file_import.with_stored_turns",
    "case_views.case_view",
    "database.open_database",
    "case_views.list_cases",
    "runs.find_or_create_run",
    "runs.listing_of",
    "runs.listings_of",
    "runs.rubric_listings",
    "page_run.token_part",
    "judge_prompts.store_for_run",
    "rubric_catalog.store_rubric_version",
    "judge_runner.select_case_ids",
    "unit_prompts.unit_messages",
    "unit_prompts.case_batches",
    "label_table.load_rating_table",
    "people.assignable_people",
    "people.list_people",
    "actors.sign_in",
    "runner.run_worker",
    "runner.start_process_worker",
    "actors.actor_for_job",
    "strata.strata_of",
    "audit_samples.earlier_draw",
    "runner.add_job_row",
    "page_run.run_memo",
    "runner.job_actor",
    "report_jobs.prune_report_jobs",
}


def _public_functions() -> dict[str, Callable[..., Any]]:
    found: dict[str, Callable[..., Any]] = {}
    for info in pkgutil.walk_packages(services_package.__path__, "review_app.services."):
        if info.ispkg:
            continue
        module = importlib.import_module(info.name)
        leaf = info.name.rpartition(".")[2]
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ == module.__name__ and not name.startswith("_"):
                found[f"{leaf}.{name}"] = function
    return found


def test_every_public_service_function_is_guarded_or_exempt_with_a_reason() -> None:
    functions = _public_functions()
    unclassified = sorted(set(functions) - set(GUARDED) - set(EXEMPT))
    assert unclassified == [], f"classify these in GUARDED or EXEMPT: {unclassified}"
    assert sorted((set(GUARDED) | set(EXEMPT)) - set(functions)) == []
    assert not set(GUARDED) & set(EXEMPT)
    for name in GUARDED:
        parameters = inspect.signature(functions[name]).parameters
        assert "actor" in parameters, f"{name} touches guarded data but takes no actor"
    for name in EXEMPT:
        parameters = inspect.signature(functions[name]).parameters
        if name not in EXEMPT_WITH_DATABASE:
            assert not {"engine", "session"} & set(parameters), (
                f"{name} reaches the database without an actor"
            )


def _forged(world: World) -> Actor:
    ana = signed_in(world.engine, "ana")
    return Actor(reviewer_id=ana.reviewer_id, name="ana", role="admin", auth_mode="oidc")


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_a_forged_actor_is_refused(world: World, name: str) -> None:
    call, _ = GUARDED[name]
    with pytest.raises(PermissionDenied):
        call(world, _forged(world))


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_an_actor_with_a_copied_or_stale_seal_is_refused(world: World, name: str) -> None:
    call, _ = GUARDED[name]
    ana = signed_in(world.engine, "ana")
    # The seal of a real reviewer, on another identity: refused.
    stolen = replace(operator(), seal=ana.seal)
    with pytest.raises(PermissionDenied):
        call(world, stolen)
    # A reviewer's own seal with the role raised by hand: the database's role counts.
    if GUARDED[name][1] == "denied":
        nora = signed_in(world.engine, "nora", role="reviewer")
        with pytest.raises(PermissionDenied):
            call(world, replace(nora, role="admin"))


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_a_reviewer_who_has_labeled_nothing(world: World, name: str) -> None:
    call, expected = GUARDED[name]
    newcomer = signed_in(world.engine, f"new-{name.replace('.', '-')}", role="reviewer")
    if expected == "denied":
        with pytest.raises(PermissionDenied):
            call(world, newcomer)
        return
    result = call(world, newcomer)
    if name == "queue.queue_page":
        assert result.rows == [] and result.assigned == 0
    elif name == "rubric_carry.re_review_queue":
        assert result == []  # only one's own units, and a newcomer has none


def test_the_operator_and_a_policy_owner_pass_every_read(world: World) -> None:
    owner = signed_in(world.engine, "olivia")
    assert owner.role == "policy_owner"
    for actor in (operator(), owner):
        assert agreement_reports.agreement_report(
            world.engine, actor, rubric=world.rubric, n_resamples=10
        )
        assert adjudication.gold_labels(world.engine, actor, rubric=world.rubric).labels
        assert labels_io.export_labels_csv(world.engine, actor, rubric=world.rubric, history=True)
        assert cases.load_case_view(world.engine, actor, case_id=CASE).turns


def test_a_reviewer_opens_only_cases_in_their_queue_or_labeled_by_them(world: World) -> None:
    rita = signed_in(world.engine, "rita-queue", role="reviewer")
    with pytest.raises(PermissionDenied, match="not in rita-queue's queue"):
        cases.load_case_view(world.engine, rita, case_id=CASE)
    queue.assign_cases(
        world.engine,
        operator(),
        rubric=world.rubric,
        reviewers=["rita-queue"],
        overlap=9,
        case_ids=[CASE],
    )
    assert cases.load_case_view(world.engine, rita, case_id=CASE).case_id == CASE
    # in her queue, nothing labeled yet: blind to the others' labels
    mine = labeling.case_labels(world.engine, rita, case_id=CASE, rubric=world.rubric)
    assert mine.blind and mine.others is None and mine.other_reviewers == []
    other = "support-clean-late-parcel"
    with pytest.raises(PermissionDenied):
        cases.case_fingerprint(world.engine, rita, case_id=other)


def test_a_demoted_or_deactivated_person_loses_rights_at_once(world: World) -> None:
    paula = signed_in(world.engine, "paula", role="policy_owner")
    assert agreement_reports.label_token(world.engine, paula, rubric=world.rubric)
    people.set_role(world.engine, operator(), name="paula", role="reviewer")
    with pytest.raises(PermissionDenied, match="paula is a reviewer"):
        agreement_reports.label_token(world.engine, paula, rubric=world.rubric)
    people.set_role(world.engine, operator(), name="paula", role="admin")
    assert actors.authorize(world.engine, paula, "admin").role == "admin"
    signed_in(world.engine, "adele", role="admin")  # so paula is not the last admin
    people.deactivate_person(world.engine, operator(), name="paula")
    with pytest.raises(PermissionDenied, match="deactivated"):
        queue.queue_page(world.engine, paula, rubric=world.rubric)
    people.reactivate_person(world.engine, operator(), name="paula")
    assert actors.authorize(world.engine, paula, "admin").role == "admin"


def test_one_role_read_reads_a_role_once_per_run_and_still_checks(world: World) -> None:
    """Inside one run of a page the role is read once: a demotion applies from the next
    run. The seal and the role are still checked at every call."""
    quinn = signed_in(world.engine, "quinn", role="policy_owner")
    with actors.one_role_read():
        assert actors.authorize(world.engine, quinn, "policy_owner").role == "policy_owner"
        people.set_role(world.engine, operator(), name="quinn", role="reviewer")
        # the same run: the role read at its start
        assert actors.authorize(world.engine, quinn, "policy_owner").role == "policy_owner"
        with pytest.raises(PermissionDenied, match="quinn is a policy owner; this needs a"):
            actors.authorize(world.engine, quinn, "admin")
        with pytest.raises(PermissionDenied, match="not issued"):
            actors.authorize(world.engine, replace(quinn, seal=""), "reviewer")
    # the next run reads the role again
    with actors.one_role_read(), pytest.raises(PermissionDenied, match="quinn is a reviewer"):
        actors.authorize(world.engine, quinn, "policy_owner")
    with pytest.raises(PermissionDenied, match="quinn is a reviewer"):
        actors.authorize(world.engine, quinn, "policy_owner")


def test_the_case_fingerprint_checks_the_queue_under_any_rubric_version(world: World) -> None:
    """The fingerprint's access check seeks the reviewer's rows per stored rubric version;
    a row under a version never stored in rubric_versions still counts (fallback)."""
    from sqlmodel import Session

    from storage.models import Assignment

    gus = signed_in(world.engine, "gus-ghost", role="reviewer")
    with pytest.raises(PermissionDenied, match="not in gus-ghost's queue"):
        cases.case_fingerprint(world.engine, gus, case_id=CASE)
    with Session(world.engine) as session:
        session.add(
            Assignment(
                case_id=CASE,
                reviewer_id=gus.reviewer_id,
                rubric_id="ghost-rubric",
                rubric_version=9,
            )
        )
        session.commit()
    assert cases.case_fingerprint(world.engine, gus, case_id=CASE)
    with pytest.raises(PermissionDenied, match="not in gus-ghost's queue"):
        cases.case_fingerprint(world.engine, gus, case_id="support-clean-late-parcel")
