"""The judge page's prompt workbench: pick a prompt version (it opens on the team's
judge), edit it, preview it, save it as the next version, run it on the gold units as a
background job (its requests said first), compare it like for like with an earlier
version, and act on the verdict (docs/reference.md, "Prompt workbench")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import streamlit as st
from sqlalchemy import Engine

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor
from review_app.services.jobs.runner import stop_job
from review_app.services.judging.endpoints import BUNDLED_HOST, list_endpoints
from review_app.services.judging.judge_prompts import (
    PromptCatalog,
    create_judge_prompt,
    list_judge_prompts,
)
from review_app.services.judging.judge_report import few_shot_material
from review_app.services.judging.prompt_workbench import (
    PLACEHOLDER_HELP,
    RunPlan,
    compare_for_workbench,
    current_job,
    plan_run,
    preview_prompt,
    run_on_every_turn,
    run_on_gold_units,
)
from review_app.services.judging.run_defaults import (
    TeamJudgeChoice,
    choose_team_judge,
    team_judge,
)
from review_app.services.judging.runs import RunListing
from review_app.ui import common, readings, registry, session
from review_app.ui.safe import code_span, error_text, escape

if TYPE_CHECKING:
    from review_app.services.judging.judge_compare import RunComparison

REFUSED = (InputError, NotFound, PermissionDenied)


def _fill_text(catalog: PromptCatalog) -> None:
    """Put the chosen version's text in the Prompt area (before the area is drawn)."""
    chosen = st.session_state["workbench_version"]
    if chosen != st.session_state["workbench_text_of"]:
        st.session_state["workbench_text"] = catalog.get(chosen).text
        st.session_state["workbench_text_of"] = chosen


def draw(engine: Engine, actor: Actor, rubric: Rubric) -> None:
    catalog = list_judge_prompts(engine, actor, rubric_id=rubric.id)
    prompts = [p for p in catalog.prompts if p.rubric_version in (None, rubric.version)]
    if not prompts:
        st.info(
            f"No judge prompt is written for {escape(rubric.ref)} yet: add a template file "
            "under rubrics/<rubric-id>/judges/<judge>/v1.txt, or `review-app judge prompts "
            'create` (docs/reference.md, "Judge prompt versions").'
        )
        return
    team = team_judge(engine, actor, rubric=rubric)
    refs = [p.ref for p in prompts]
    saved = st.session_state["workbench_saved"]
    if saved in refs:  # the version saved on the last run is the one selected
        st.session_state["workbench_version"] = saved
        st.session_state["workbench_version_chosen"] = True
        st.session_state["workbench_saved"] = None
    if (
        not st.session_state["workbench_version_chosen"]
        or st.session_state["workbench_version"] not in refs
    ):
        # Opens on the team's judge; without one, on the newest version.
        newest = max(prompts, key=lambda p: (p.created_at, p.id))
        st.session_state["workbench_version"] = (
            team.prompt if team is not None and team.prompt in refs else newest.ref
        )
    _fill_text(catalog)
    if team is not None:
        st.caption(escape(team.sentence()))
    st.selectbox(
        "Prompt version",
        refs,
        key="workbench_version",
        format_func=lambda ref: _version_label(catalog, ref),
        on_change=common.mark_chosen,
        args=("workbench_version_chosen",),
    )
    chosen = catalog.get(st.session_state["workbench_version"])
    for ref, why in catalog.refused.items():
        st.warning(f"{code_span(ref)} is not offered: {escape(why)}")

    editor, aside = st.columns([2, 1])
    with editor:
        st.text_area("Prompt", key="workbench_text", height=360)
        save = st.button("Save as new version", key="workbench_save", type="primary")
    with aside:
        st.caption("Variables a prompt may use:")
        for name, meaning in PLACEHOLDER_HELP.items():
            st.caption(f"{code_span('$' + name)}: {escape(meaning)}")
        with st.popover("Few-shot material", width="stretch"):
            _few_shot(engine, actor, rubric)
    if save:
        text = st.session_state["workbench_text"]
        if text == chosen.text:
            st.warning(f"The text is {code_span(chosen.ref)}'s: change it before saving.")
        else:
            try:
                saved = create_judge_prompt(
                    engine,
                    actor,
                    rubric=rubric,
                    judge=chosen.judge,
                    text=text,
                    derived_from=chosen.ref,
                    source="the workbench",
                )
            except REFUSED as error:
                st.error(error_text(error))
            else:
                st.session_state["workbench_saved"] = saved.ref
                st.session_state["workbench_text_of"] = saved.ref
                session.flash(f"Saved as {saved.ref}")
                st.rerun()

    with st.expander("Preview: the messages for one unit with gold"):
        try:
            preview = preview_prompt(
                engine, actor, rubric=rubric, text=st.session_state["workbench_text"]
            )
        except REFUSED as error:
            st.error(error_text(error))
        else:
            st.caption(f"{code_span(preview.case_id)} · turn {preview.turn:d}")
            for message in preview.messages:
                st.caption(escape(message["role"]))
                st.code(message["content"], language=None, wrap_lines=True)

    _run_section(engine, actor, rubric, chosen.ref, team)
    _compare_section(engine, actor, rubric, chosen.ref)
    _align_section(engine, actor, rubric, chosen.ref)


def _version_label(catalog: PromptCatalog, ref: str) -> str:
    """A version as the picker shows it: where it comes from (a file, or who saved it) and
    what it was derived from; nothing that changes while the page is open (a changed
    option would reset the picker)."""
    prompt = catalog.get(ref)
    parts = [ref, prompt.credit]
    if prompt.derived_from:
        parts.append(f"from {prompt.derived_from}")
    return " · ".join(parts)


def _few_shot(engine: Engine, actor: Actor, rubric: Rubric) -> None:
    try:
        examples = few_shot_material(engine, actor, rubric=rubric)
    except REFUSED as error:
        st.error(error_text(error))
        return
    if not examples:
        st.caption("No adjudicated examples yet: adjudicate disagreements first.")
        return
    st.caption(
        "Adjudicated contrasting examples (a pass, a fail and a borderline per code) to "
        "paste into the prompt:"
    )
    st.dataframe(
        [
            {
                "label": example["label"],
                "context": example["context"],
                "reply": example["reply"],
                "why": example["why"],
            }
            for example in examples
        ],
        hide_index=True,
        key="workbench_few_shot",
    )


def _run_section(
    engine: Engine, actor: Actor, rubric: Rubric, prompt_ref: str, team: TeamJudgeChoice | None
) -> None:
    st.subheader("Run on the gold units")
    endpoints = list_endpoints(engine, actor)
    if not endpoints:
        st.info(
            "No judge endpoint is configured on this server: an admin names a TOML file in "
            'REVIEW_APP_JUDGE_ENDPOINTS (docs/reference.md, "Judge endpoints").'
        )
        return
    names = [e.name for e in endpoints]
    if all(e.hosts == (BUNDLED_HOST,) for e in endpoints):
        st.caption(
            "Only the bundled local model is offered: an admin adds endpoints in a TOML file "
            'named by REVIEW_APP_JUDGE_ENDPOINTS (docs/reference.md, "Judge endpoints").'
        )
    if st.session_state["workbench_endpoint"] not in names:
        preferred = team.endpoint if team is not None else None
        st.session_state["workbench_endpoint"] = preferred if preferred in names else names[0]
    job = current_job(engine, actor, rubric=rubric, watched=st.session_state["workbench_job"])
    running = job is not None and not job.finished
    planned = _endpoint_and_plan(
        engine, actor, rubric, prompt_ref, names=names, key="workbench_endpoint", scope="gold"
    )
    if planned is None:
        return
    plan, right = planned
    clicked = right.button(
        f"Run on gold units ({plan.requests:,d} requests)",
        key="workbench_run",
        type="primary",
        disabled=running or not plan.requests,
    )
    st.caption(
        f"{escape(plan.sentence())} Only the turns with gold are asked; each prompt still "
        "shows its conversation up to the turn."
    )
    if clicked:
        try:
            job = run_on_gold_units(
                engine,
                actor,
                rubric=rubric,
                prompt=prompt_ref,
                endpoint=st.session_state["workbench_endpoint"],
            )
        except REFUSED as error:
            st.error(error_text(error))
            return
        st.session_state["workbench_job"] = job.id
        st.rerun()
    if job is not None:
        _job_progress(engine, actor, rubric, job.id)


def _endpoint_and_plan(
    engine: Engine,
    actor: Actor,
    rubric: Rubric,
    prompt: str,
    *,
    names: list[str],
    key: str,
    scope: str,
) -> tuple[RunPlan, Any] | None:
    """The endpoint picker and what a run of ``prompt`` there would ask (``scope``
    ``gold`` or ``all``), with the column left for the button; ``None`` after an error."""
    left, right = st.columns([2, 1], vertical_alignment="bottom")
    left.selectbox("Endpoint", names, key=key)
    try:
        plan = plan_run(
            engine, actor, rubric=rubric, prompt=prompt, endpoint=st.session_state[key], scope=scope
        )
    except REFUSED as error:
        st.error(error_text(error))
        return None
    return plan, right


@st.fragment(run_every=1.0)
def _job_progress(engine: Engine, actor: Actor, rubric: Rubric, job_id: int) -> None:
    job = current_job(engine, actor, rubric=rubric, watched=job_id)
    if job is None:
        return
    done = f"{job.done:d} of {job.total:d} turns" if job.total is not None else "starting"
    failures = f" ({job.failures})" if job.failures else ""
    st.progress(
        job.fraction,
        text=f"Job {job.id:d}: {escape(job.parameters.get('prompt', ''))} on "
        f"{escape(job.parameters.get('endpoint', ''))}, {escape(job.status)}, {done}"
        f"{escape(failures)}",
    )
    if job.error:
        st.error(escape(job.error))
    if not job.finished:
        if st.button("Stop", key="workbench_stop"):
            stop_job(engine, actor, job_id=job.id)
    elif st.session_state.get("workbench_seen_end") != job.id:
        st.session_state["workbench_seen_end"] = job.id
        st.rerun(scope="app")


def _align_section(engine: Engine, actor: Actor, rubric: Rubric, prompt_ref: str) -> None:
    """ "Suggest a better prompt": GEPA from ``prompt_ref`` on the optimisation gold, the
    best candidate confirmed once on the confirmation set (docs/reference.md,
    "Suggesting a prompt")."""
    from review_app.services.judging.align import (
        confirmation_budget,
        current_align_job,
        plan_align,
        start_align_job,
    )

    st.subheader("Suggest a better prompt")
    st.caption(
        f"An optimiser model rewrites {code_span(prompt_ref)} from the gold units the judge "
        "gets wrong (with the reviewers' labels and rationales); only its best candidate is "
        "run on a confirmation set of gold it never sees, against this version, by the "
        "paired test above. Every candidate is kept as a prompt version."
    )
    listed = list_endpoints(engine, actor)
    endpoints = [e.name for e in listed]
    budget = confirmation_budget(engine, actor, rubric=rubric)
    if budget is not None:
        st.caption(escape(budget.sentence()))
    if not endpoints:
        st.info("No endpoint is configured: the judge and the optimiser are named endpoints.")
        return
    if st.session_state["align_endpoint"] not in endpoints:
        st.session_state["align_endpoint"] = st.session_state["workbench_endpoint"] or endpoints[0]
    if st.session_state["align_optimizer"] not in endpoints:
        # another endpoint than the judge's, a configured one before the bundled model
        others = [e for e in listed if e.name != st.session_state["align_endpoint"]]
        others.sort(key=lambda e: e.hosts == (BUNDLED_HOST,))
        st.session_state["align_optimizer"] = (others or listed)[0].name
    left, middle, right = st.columns(3)
    left.selectbox("Judge endpoint", endpoints, key="align_endpoint")
    middle.selectbox("Optimiser endpoint", endpoints, key="align_optimizer")
    right.number_input(
        "Budget (units judged)", min_value=10, max_value=100_000, step=10, key="align_budget"
    )
    left.number_input(
        "Share set aside to confirm",
        min_value=0.05,
        max_value=0.8,
        step=0.05,
        key="align_confirm_share",
        help="Used when the rubric version has no confirmation set yet.",
    )
    middle.number_input("Seed", min_value=0, step=1, key="align_seed")
    job = current_align_job(engine, actor, rubric=rubric, watched=st.session_state["align_job"])
    running = job is not None and not job.finished
    options: dict[str, Any] = {
        "rubric": rubric,
        "start": prompt_ref,
        "endpoint": st.session_state["align_endpoint"],
        "optimizer": st.session_state["align_optimizer"],
        "budget": int(st.session_state["align_budget"]),
        "confirm_share": float(st.session_state["align_confirm_share"]),
        "seed": int(st.session_state["align_seed"]),
    }
    try:
        plan = plan_align(engine, actor, **options)
    except REFUSED as error:
        st.error(error_text(error))
        if budget is not None and budget.spent:
            st.page_link(
                registry.page("team"), label="Draw fresh gold: an audit sample on the team page"
            )
        plan = None
    if plan is not None:
        st.caption(escape(plan.sentence()))
        clicked = st.button(
            f"Suggest a better prompt (at most {plan.judge_requests_at_most:,d} + "
            f"{plan.optimiser_requests_at_most:,d} requests)",
            key="align_start",
            disabled=running,
        )
        if clicked:
            try:
                started = start_align_job(engine, actor, **options)
            except REFUSED as error:
                st.error(error_text(error))
                return
            st.session_state["align_job"] = started.id
            st.rerun()
    if job is not None:
        _align_progress(engine, actor, rubric, job.id)


@st.fragment(run_every=1.0)
def _align_progress(engine: Engine, actor: Actor, rubric: Rubric, job_id: int) -> None:
    from review_app.services.judging.align import current_align_job, result_lines

    job = current_align_job(engine, actor, rubric=rubric, watched=job_id)
    if job is None:
        return
    done = f"{job.done:d} of {job.total:d} units judged" if job.total else "starting"
    st.progress(
        job.fraction,
        text=f"Align job {job.id:d} from {escape(job.parameters.get('prompt', ''))}: "
        f"{escape(job.status)}, {done}",
    )
    if job.error:
        st.error(escape(job.error))
    if not job.finished:
        if st.button("Stop", key="align_stop"):
            stop_job(engine, actor, job_id=job.id)
        return
    if job.result is not None:
        with st.container(border=True):  # the result panel: it stays on the page
            for line in result_lines(job.result):
                st.text(line)
    if st.session_state.get("align_seen_end") != job.id:
        st.session_state["align_seen_end"] = job.id
        st.rerun(scope="app")


def _compare_section(engine: Engine, actor: Actor, rubric: Rubric, prompt_ref: str) -> None:
    st.subheader("Is the new version better?")
    chosen = (st.session_state["workbench_first"], st.session_state["workbench_second"])
    pair = chosen if st.session_state["workbench_pair_chosen"] and chosen[0] != chosen[1] else None
    try:
        shown = compare_for_workbench(
            engine,
            actor,
            rubric=rubric,
            prompt=prompt_ref,
            endpoint=st.session_state["workbench_endpoint"],
            run_ids=pair,
        )
    except REFUSED as error:
        st.error(error_text(error))
        st.session_state["workbench_pair_chosen"] = False
        return
    runs = {run.id: run for run in shown.runs}
    if shown.note:
        st.caption(escape(shown.note) + ".")
    report = shown.report
    if report is None:
        pairing = shown.pairing
        how = pairing.how if pairing is not None else "nothing to compare yet"
        st.info(escape(how[:1].upper() + how[1:]) + ".")
        if pairing is not None and pairing.baseline and pairing.second is not None:
            _baseline_button(engine, actor, rubric, pairing.baseline, pairing.second.endpoint)
    else:
        _verdict(engine, actor, rubric, report, runs, shown.pairing is None)
    if len(runs) >= 2:
        if not st.session_state["workbench_pair_chosen"] and report is not None:
            st.session_state["workbench_first"] = report["runs"][0]["id"]
            st.session_state["workbench_second"] = report["runs"][1]["id"]
        with st.expander("Compare two other runs"):
            left, right = st.columns(2)
            for column, key, title in (
                (left, "workbench_first", "Earlier run"),
                (right, "workbench_second", "Newer run"),
            ):
                column.selectbox(
                    escape(title),
                    list(runs),
                    key=key,
                    format_func=lambda i: runs[i].picker_label,
                    on_change=common.mark_chosen,
                    args=("workbench_pair_chosen",),
                    placeholder="Choose a run",
                )
            if st.session_state["workbench_pair_chosen"]:
                st.button(
                    "Back to the default pair", key="workbench_default_pair", on_click=_unchoose
                )


def _unchoose() -> None:
    st.session_state["workbench_pair_chosen"] = False


def _verdict(
    engine: Engine,
    actor: Actor,
    rubric: Rubric,
    report: RunComparison,
    runs: dict[int, RunListing],
    chosen: bool,
) -> None:
    """The verdict sentence, what it rests on, the next steps, then the figures."""
    st.markdown(f"**{escape(report['verdict'])}**")
    if report["confound"]:
        st.warning(escape(report["confound"]))
    first, second = (runs[entry["id"]] for entry in report["runs"])
    a, b = report["first"], report["second"]
    st.caption(
        f"{escape(a)}: {escape(first.label)}. {escape(b)}: {escape(second.label)}. "
        + (
            "Chosen by hand."
            if chosen
            else f"The default pair: {escape(report['pairing'].removeprefix('default: '))}."
        )
    )
    winner = {
        "second_better": second,
        "second_likely_better": second,
        "first_better": first,
        "first_likely_better": first,
    }.get(report["outcome"])
    if winner is not None and winner.complete:
        _next_steps(engine, actor, rubric, winner)
    source = report["gold_source"]
    st.caption(
        f"On {report['n_units']:d} gold units both runs judged, in "
        f"{report['n_conversations']:d} conversations (gold: {source['adjudicated']:d} "
        f"adjudicated, {source['unanimous']:d} unanimous, {source['in_audit_samples']:d} in "
        "audit samples); the difference is paired, by a cluster bootstrap over conversations "
        "with the same resamples for both runs."
    )
    with st.expander("The paired numbers"):
        st.dataframe(readings.comparison_rows(report), hide_index=True, key="workbench_compare")
        st.caption(escape(readings.mcnemar_sentence(report)))
    differing = report["differing"]
    if differing:
        with st.expander(f"The {len(differing):d} units where they differ, with both reasons"):
            for item in differing[: common.FIRST_ROWS]:
                st.markdown(
                    f"{code_span(item['case_id'])} turn {item['turn']:d} · gold "
                    f"{code_span(item['gold'])} · {escape(a)} {code_span(item['first']['code'])}"
                    f" · {escape(b)} {code_span(item['second']['code'])}"
                )
                for name, side in ((a, item["first"]), (b, item["second"])):
                    if side["reason"]:
                        st.text(f"{name}: {side['reason']}")
            if len(differing) > common.FIRST_ROWS:
                st.caption(
                    f"The first {common.FIRST_ROWS:d} of {len(differing):,d}; `review-app "
                    "judge compare --json` lists them all."
                )


def _next_steps(engine: Engine, actor: Actor, rubric: Rubric, winner: RunListing) -> None:
    """After a verdict: make the better run the team's judge; run it on every turn (a
    background job, its requests and tokens said first)."""
    team = team_judge(engine, actor, rubric=rubric)
    configured = {e.name for e in list_endpoints(engine, actor)}
    plan = (
        plan_run(
            engine,
            actor,
            rubric=rubric,
            prompt=winner.prompt,
            endpoint=winner.endpoint,
            scope="all",
        )
        if winner.endpoint in configured
        else None
    )
    use, everywhere = st.columns(2, vertical_alignment="center")
    with use:
        if team is None or not team.matches(winner):
            use_as_judge_button(engine, actor, rubric, winner, key="workbench_use")
        else:
            st.caption(f"{escape(winner.prompt)} is the team's judge.")
    if plan is None:
        return
    if not plan.requests:
        everywhere.caption(
            f"{escape(winner.prompt)} has judged every turn at {escape(winner.endpoint)}."
        )
        return
    clicked = everywhere.button(
        f"Run {escape(winner.prompt_version)} on every turn", key="workbench_everywhere"
    )
    st.caption(f"Run on every turn is a background job: {escape(plan.sentence())}")
    if clicked:
        try:
            job = run_on_every_turn(
                engine, actor, rubric=rubric, prompt=winner.prompt, endpoint=winner.endpoint
            )
        except REFUSED as error:
            st.error(error_text(error))
            return
        st.session_state["workbench_job"] = job.id
        session.flash(f"Job {job.id} queued: {winner.prompt} on every turn")
        st.rerun()


def use_as_judge_button(
    engine: Engine, actor: Actor, rubric: Rubric, run: RunListing, *, key: str
) -> None:
    """ "Use vN as the judge": the run's prompt version, model and endpoint become the
    rubric version's judge (audited); the page then opens on it."""
    if st.button(f"Use {escape(run.prompt_version)} as the judge", key=key, type="primary"):
        try:
            choice = choose_team_judge(engine, actor, rubric=rubric, run_id=run.id)
        except REFUSED as error:
            st.error(error_text(error))
            return
        session.flash(choice.sentence())
        st.rerun()


def _baseline_button(
    engine: Engine, actor: Actor, rubric: Rubric, baseline: str, endpoint: str
) -> None:
    """One click to run the baseline on the newer run's endpoint (gold units only)."""
    configured = {e.name for e in list_endpoints(engine, actor)}
    if endpoint not in configured:
        st.caption(
            f"Run {escape(baseline)} where the newer run ran to compare like with like "
            f"(`review-app judge run --prompt {escape(baseline)}`)."
        )
        return
    plan = plan_run(engine, actor, rubric=rubric, prompt=baseline, endpoint=endpoint, scope="gold")
    left, right = st.columns([3, 2], vertical_alignment="center")
    left.caption(escape(plan.sentence()))
    if right.button(
        f"Run {escape(baseline)} on {escape(endpoint)}", key="workbench_baseline", type="primary"
    ):
        try:
            job = run_on_gold_units(
                engine, actor, rubric=rubric, prompt=baseline, endpoint=endpoint
            )
        except REFUSED as error:
            st.error(error_text(error))
            return
        st.session_state["workbench_job"] = job.id
        st.rerun()


def run_everywhere_form(
    engine: Engine, actor: Actor, rubric: Rubric, run: Mapping[str, object]
) -> None:
    """The decision card's second action: run the chosen run's prompt on every turn, its
    requests and cost said first."""
    prompt = f"{run['judge']}@{run['prompt_version']}"
    listed = list_endpoints(engine, actor)
    endpoints = [e.name for e in listed]
    job = current_job(engine, actor, rubric=rubric, watched=st.session_state["workbench_job"])
    if job is not None and not job.finished:
        _job_progress(engine, actor, rubric, job.id)
        return
    if not endpoints:
        return
    st.markdown(
        f"Or let the judge label the rest: run {code_span(prompt)} on every turn (turns it "
        "has answered at that endpoint are not asked again)."
    )
    if st.session_state["judge_everywhere_endpoint"] not in endpoints:
        st.session_state["judge_everywhere_endpoint"] = (
            run["endpoint"] if run.get("endpoint") in endpoints else endpoints[0]
        )
    planned = _endpoint_and_plan(
        engine, actor, rubric, prompt, names=endpoints, key="judge_everywhere_endpoint", scope="all"
    )
    if planned is None:
        return
    plan, right = planned
    clicked = right.button("Run on every turn", key="judge_everywhere", disabled=not plan.requests)
    st.caption(escape(plan.sentence()))
    if clicked:
        try:
            started = run_on_every_turn(
                engine,
                actor,
                rubric=rubric,
                prompt=prompt,
                endpoint=st.session_state["judge_everywhere_endpoint"],
            )
        except REFUSED as error:
            st.error(error_text(error))
            return
        st.session_state["workbench_job"] = started.id
        st.rerun()
