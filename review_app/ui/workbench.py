"""The judge page's prompt workbench: pick a prompt version, edit it, preview it, save it
as the next version, run it on the gold units as a background job, compare it with the
best earlier run (docs/reference.md, "Prompt workbench")."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st
from sqlalchemy import Engine

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.rubrics import Rubric
from review_app.services.judging.endpoints import BUNDLED_HOST, list_endpoints
from review_app.services.judging.judge_prompts import (
    PromptCatalog,
    create_judge_prompt,
    list_judge_prompts,
)
from review_app.services.judging.judge_report import few_shot_material
from review_app.services.judging.prompt_workbench import (
    PLACEHOLDER_HELP,
    compare_for_workbench,
    current_job,
    preview_prompt,
    run_on_every_turn,
    run_on_gold_units,
)
from review_app.services.judging.runs import list_judge_runs
from review_app.services.operations.jobs import stop_job
from review_app.services.review import readings
from review_app.services.team.people import Actor
from review_app.ui import session
from review_app.ui.safe import code_span, error_text, escape

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
    refs = [p.ref for p in prompts]
    saved = st.session_state["workbench_saved"]
    if saved in refs:  # the version saved on the last run is the one selected
        st.session_state["workbench_version"] = saved
        st.session_state["workbench_saved"] = None
    if st.session_state["workbench_version"] not in refs:
        newest = max(prompts, key=lambda p: (p.created_at, p.id))
        st.session_state["workbench_version"] = newest.ref
    _fill_text(catalog)
    st.selectbox(
        "Prompt version",
        refs,
        key="workbench_version",
        format_func=lambda ref: _version_label(catalog, ref),
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

    _run_section(engine, actor, rubric, chosen.ref)
    _compare_section(engine, actor, rubric)


def _version_label(catalog: PromptCatalog, ref: str) -> str:
    prompt = catalog.get(ref)
    parts = [ref, f"by {prompt.created_by}", prompt.created_at.strftime("%Y-%m-%d")]
    if prompt.derived_from:
        parts.append(f"from {prompt.derived_from}")
    parts.append(f"{prompt.runs} run{'s' if prompt.runs != 1 else ''}")
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


def _run_section(engine: Engine, actor: Actor, rubric: Rubric, prompt_ref: str) -> None:
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
        st.session_state["workbench_endpoint"] = names[0]
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    left.selectbox("Endpoint", names, key="workbench_endpoint")
    job = current_job(engine, actor, rubric=rubric, watched=st.session_state["workbench_job"])
    running = job is not None and not job.finished
    if right.button("Run on gold units", key="workbench_run", type="primary", disabled=running):
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


@st.fragment(run_every=1.0)
def _job_progress(engine: Engine, actor: Actor, rubric: Rubric, job_id: int) -> None:
    job = current_job(engine, actor, rubric=rubric, watched=job_id)
    if job is None:
        return
    done = f"{job.done:d} of {job.total:d} turns" if job.total is not None else "starting"
    st.progress(
        job.fraction,
        text=f"Job {job.id:d}: {escape(job.parameters.get('prompt', ''))} on "
        f"{escape(job.parameters.get('endpoint', ''))}, {escape(job.status)}, {done}",
    )
    if job.error:
        st.error(escape(job.error))
    if not job.finished:
        if st.button("Stop", key="workbench_stop"):
            stop_job(engine, actor, job_id=job.id)
    elif st.session_state.get("workbench_seen_end") != job.id:
        st.session_state["workbench_seen_end"] = job.id
        st.session_state["workbench_new_run"] = True  # compare the new run by default
        st.rerun(scope="app")


def _compare_section(engine: Engine, actor: Actor, rubric: Rubric) -> None:
    st.subheader("Is the new version better?")
    runs = {run.id: run.name for run in list_judge_runs(engine, actor, rubric=rubric)}
    if st.session_state["workbench_new_run"]:
        st.session_state["workbench_new_run"] = False
        st.session_state["workbench_first"] = st.session_state["workbench_second"] = None
    chosen = (st.session_state["workbench_first"], st.session_state["workbench_second"])
    pair = chosen if all(i in runs for i in chosen) and chosen[0] != chosen[1] else None
    try:
        report = compare_for_workbench(engine, actor, rubric=rubric, run_ids=pair)
    except REFUSED as error:
        st.error(error_text(error))
        return
    if report is None:
        st.info("One judge run so far: save a new version and run it to compare the two.")
        return
    if pair is None:
        st.session_state["workbench_first"] = report["runs"][0]["id"]
        st.session_state["workbench_second"] = report["runs"][1]["id"]
    left, right = st.columns(2)
    left.selectbox("Earlier run", list(runs), key="workbench_first", format_func=lambda i: runs[i])
    right.selectbox("Newer run", list(runs), key="workbench_second", format_func=lambda i: runs[i])
    headline = report["headline"]
    st.markdown(escape(headline[:1].upper() + headline[1:]))
    source = report["gold_source"]
    st.caption(
        f"On {report['n_units']:d} gold units both runs judged, in "
        f"{report['n_conversations']:d} conversations (gold: {source['adjudicated']:d} "
        f"adjudicated, {source['unanimous']:d} unanimous, {source['in_audit_samples']:d} in "
        "audit samples); the difference is paired, by a cluster bootstrap over conversations "
        "with the same resamples for both runs."
    )
    st.dataframe(readings.comparison_rows(report), hide_index=True, key="workbench_compare")
    if report["differing"]:
        a, b = report["first"], report["second"]
        st.caption("Units where they differ:")
        st.dataframe(
            [
                {
                    "case": item["case_id"],
                    "turn": item["turn"],
                    "gold": item["gold"],
                    a: item["first"]["code"],
                    b: item["second"]["code"],
                    f"{a}'s reason": item["first"]["reason"] or "",
                    f"{b}'s reason": item["second"]["reason"] or "",
                }
                for item in report["differing"]
            ],
            hide_index=True,
            key="workbench_differing",
        )


def run_everywhere_form(
    engine: Engine, actor: Actor, rubric: Rubric, run: Mapping[str, object]
) -> None:
    """The decision card's second action: run the chosen run's prompt on every turn."""
    prompt = f"{run['judge']}@{run['prompt_version']}"
    endpoints = [e.name for e in list_endpoints(engine, actor)]
    job = current_job(engine, actor, rubric=rubric, watched=st.session_state["workbench_job"])
    if job is not None and not job.finished:
        _job_progress(engine, actor, rubric, job.id)
        return
    if not endpoints:
        return
    st.markdown(
        f"Or let the judge label the rest: run {code_span(prompt)} on every turn (turns it "
        "has answered at that endpoint's model are not asked again)."
    )
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    if st.session_state["judge_everywhere_endpoint"] not in endpoints:
        st.session_state["judge_everywhere_endpoint"] = endpoints[0]
    left.selectbox("Endpoint", endpoints, key="judge_everywhere_endpoint")
    if right.button("Run on every turn", key="judge_everywhere"):
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
