"""``review-app judge``: LLM judges' verdicts in, judge runs, and how far to trust them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from review_app.cli.output import print_json, print_listing, print_report, terminal_safe
from review_app.cli.progress import unit_progress
from review_app.cli.shared import (
    DbOption,
    HostOption,
    JsonOption,
    PortOption,
    RubricOption,
    catalog,
    fail,
    open_engine,
    operator,
)

if TYPE_CHECKING:
    from review_app.services.judging.runs import RunListing

judge_app = typer.Typer(
    help="LLM judges: import verdicts, run a prompt, calibrate.", no_args_is_help=True
)
prompts_app = typer.Typer(
    help="Judge prompt versions stored in the database: list, show, create.",
    no_args_is_help=True,
)
judge_app.add_typer(prompts_app, name="prompts")


@prompts_app.command("list")
def prompts_list(
    rubric: RubricOption,
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge.")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Stored prompt versions of the rubric (its prompt files are read and stored first)."""
    from review_app.services.judging.judge_prompts import list_judge_prompts

    engine = open_engine(db)
    rubric_id = catalog(engine).for_reports(rubric).id
    found = list_judge_prompts(engine, operator(), rubric_id=rubric_id, judge=judge)
    if as_json:
        print_json(
            {
                "rubric_id": rubric_id,
                "prompts": [p.to_dict(with_text=False) for p in found.prompts],
                "refused": found.refused,
            }
        )
        return
    if not found.prompts:
        typer.echo("no judge prompts")
    for stored in found.prompts:
        written_for = (
            f"{rubric_id}@{stored.rubric_version}" if stored.rubric_version else "(its first run)"
        )
        typer.echo(
            terminal_safe(
                f"{stored.ref:<28} written for {written_for:<22} "
                f"{stored.runs:>3} runs  {stored.sha256[:12]}  {stored.credit}"
                f"{'  from ' + stored.derived_from if stored.derived_from else ''}"
            )
        )
    for key, why in sorted(found.refused.items()):
        typer.echo(terminal_safe(f"refused {key}: {why}"), err=True)


@prompts_app.command("show")
def prompts_show(
    ref: Annotated[
        str, typer.Argument(metavar="JUDGE@vN", help="The version, e.g. role-judge@v2.")
    ],
    rubric: RubricOption,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Print a stored prompt version's full text."""
    from review_app.services.judging.judge_prompts import show_judge_prompt

    engine = open_engine(db)
    rubric_id = catalog(engine).for_reports(rubric).id
    stored = show_judge_prompt(engine, operator(), rubric_id=rubric_id, ref=ref)
    if as_json:
        print_json(stored.to_dict())
        return
    typer.echo(stored.text, nl=not stored.text.endswith("\n"))


@prompts_app.command("create")
def prompts_create(
    rubric: RubricOption,
    judge: Annotated[str, typer.Option("--judge", help="The judge it is a version of.")],
    derived_from: Annotated[
        str | None,
        typer.Option("--from", metavar="JUDGE@vN", help="The version it was derived from."),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="The template text (default: read from standard input)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Store a template as the next version of a judge; prints its JUDGE@vN.

    The text is checked as a template file is: known placeholders only, $codes, and
    some of the conversation ($conversation, $recent or $reply).
    """
    from review_app.files.limits import MAX_RUBRIC_FILE_BYTES
    from review_app.files.text import read_short_text
    from review_app.services.judging.judge_prompts import create_judge_prompt

    if file is not None:
        text = read_short_text(file, limit=MAX_RUBRIC_FILE_BYTES, kind="a judge prompt")
        source = str(file)
    else:
        text, source = sys.stdin.read(), "<stdin>"
    engine = open_engine(db)
    chosen = catalog(engine).get(rubric)
    stored = create_judge_prompt(
        engine,
        operator(),
        rubric=chosen,
        judge=judge,
        text=text,
        derived_from=derived_from,
        source=source,
    )
    typer.echo(stored.ref)


@judge_app.command("import")
def judge_import(
    verdict_file: Annotated[
        Path,
        typer.Argument(metavar="FILE", help='CSV or JSONL (docs/reference.md, "Judge verdicts").'),
    ],
    rubric: RubricOption,
    score_means: Annotated[
        str,
        typer.Option(
            "--score-means",
            help='break (1 = breaks the role; docs/reference.md, "Judge verdicts") or adherence '
            "(1 = stays in "
            "role, as deepeval, Galtea and Openlayer report).",
        ),
    ] = "break",
    db: DbOption = None,
) -> None:
    """Import judge verdicts (per turn, or per conversation with an empty turn)."""
    from review_app.services.judging.judge_import import import_verdicts

    engine = open_engine(db)
    chosen = catalog(engine).get(rubric)
    summary = import_verdicts(
        engine, operator(), verdict_file, rubric=chosen, score_means=score_means
    )
    typer.echo(summary.line())


@judge_app.command("runs")
def judge_runs(
    rubric: Annotated[
        str | None, typer.Option("--rubric", metavar="ID@V", help="Only this rubric version.")
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Stored judge runs: prompt version, model, endpoint, rubric version, state (complete,
    stopped at k of n, failed) and counts; the team's judge is marked."""
    from review_app.services.judging.run_defaults import team_judge_runs
    from review_app.services.judging.runs import list_judge_runs

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric) if rubric else None
    runs = list_judge_runs(engine, operator(), rubric=chosen)
    marked = team_judge_runs(engine, operator(), runs=runs)
    if as_json:
        print_json([{**run.to_dict(), "team_judge": run.id in marked} for run in runs])
        return
    print_listing(
        runs,
        as_json=False,
        line=lambda run: _run_line(run, team=run.id in marked),
        empty="no judge runs",
    )


def _run_line(run: RunListing, *, team: bool) -> str:
    return terminal_safe(
        f"{run.id:>4}  {run.label}; {run.verdicts} verdicts, {run.errors} errors"
        + ("  [the team's judge]" if team else "")
    )


@judge_app.command("use")
def judge_use(
    rubric: RubricOption,
    run: Annotated[int, typer.Option("--run", help="The complete run to use as the judge.")],
    db: DbOption = None,
) -> None:
    """Make a run's prompt version, model and endpoint the rubric version's judge (the
    team's judge): pages and commands default to it. Audited (team_judge)."""
    from review_app.services.judging.run_defaults import choose_team_judge

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    typer.echo(choose_team_judge(engine, operator(), rubric=chosen, run_id=run).sentence())


@judge_app.command("run")
def judge_run(
    rubric: RubricOption,
    prompt: Annotated[
        str,
        typer.Option(
            "--prompt",
            help="A stored prompt version judge@vN (see `judge prompts list`), or a template "
            "file's path (stored as NAME@vN when the run starts).",
        ),
    ],
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="The judge's name for a template path (its runs are named NAME@vN); "
            "default: the template's folder when it is a judge's folder (any other folder "
            "is refused until --judge names it).",
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            metavar="NAME",
            help="An endpoint of $REVIEW_APP_JUDGE_ENDPOINTS by name: its URL, model, key, "
            "response format and concurrency come from the file (--concurrency and "
            "--response-format are not used); 'local': the bundled model.",
        ),
    ] = None,
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Queue the run as a background job (needs --endpoint) and print its id; "
            "a worker runs it (review-app serve, or review-app jobs work).",
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (or $REVIEW_APP_JUDGE_MODEL).")
    ] = None,
    base_url: Annotated[
        list[str] | None,
        typer.Option(
            "--base-url",
            help="OpenAI-compatible API base, e.g. "
            "http://127.0.0.1:8080/v1 (or $REVIEW_APP_JUDGE_BASE_URL). Repeat it for "
            "several replicas of one model: units go to whichever has a slot free, "
            "each with its own --concurrency and backoff.",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", help="API key (or $REVIEW_APP_JUDGE_API_KEY / $OPENAI_API_KEY)."),
    ] = None,
    case: Annotated[
        list[str] | None, typer.Option("--case", help="Only this case (repeatable).")
    ] = None,
    lane: Annotated[str | None, typer.Option("--lane", help="Only cases of this lane.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many cases.")] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Requests at once (per endpoint).")
    ] = 4,
    retries: Annotated[int, typer.Option("--retries", help="Retries per request.")] = 3,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request.")] = 120.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Answer length cap.")] = 300,
    max_prompt_bytes: Annotated[
        int,
        typer.Option(
            "--max-prompt-bytes",
            help="With --base-url: a unit whose rendered prompt is larger is not sent "
            "(a named endpoint's limit is its max_prompt_bytes).",
        ),
    ] = 256 * 1024,
    response_format: Annotated[
        str,
        typer.Option(
            "--response-format",
            help="text, json_object (OpenAI, vLLM, llama.cpp), json_object_schema (llama.cpp: "
            "constrained to the verdict schema) or json_schema (OpenAI structured outputs).",
        ),
    ] = "json_object",
    db: DbOption = None,
) -> None:
    """Run a judge prompt over cases against an OpenAI-compatible chat endpoint.

    Verdicts are stored as they arrive; running the same judge, prompt version and
    model again resumes where it stopped. Unparseable answers are stored as errors.
    """
    from review_app.errors import InputError
    from review_app.services.judging.judge_jobs import resolve_rubric_and_prompt, run_judge_job
    from review_app.services.judging.judge_runner import JudgeRunInterrupted
    from review_app.services.judging.transport import EndpointSettings

    if endpoint is not None and (base_url or model or api_key):
        raise InputError(
            "give --endpoint NAME or --base-url/--model/--api-key, not both", field="--endpoint"
        )
    engine = open_engine(db)
    if background:
        if endpoint is None:
            raise InputError(
                "--background runs on a named endpoint (keys stay in the endpoints file): "
                "give --endpoint NAME",
                field="--background",
            )
        from review_app.services.judging.judge_run_kind import start_judge_job

        job = start_judge_job(
            engine,
            operator(),
            rubric=rubric,
            prompt=prompt,
            judge=judge,
            endpoint=endpoint,
            case_ids=case,
            lane=lane,
            limit=limit,
            retries=retries,
            timeout=timeout,
            max_tokens=max_tokens,
        )
        typer.echo(f"job {job.id} queued: review-app jobs  (stop: review-app jobs stop {job.id})")
        return
    chosen, template = resolve_rubric_and_prompt(
        engine, operator(), rubric=rubric, prompt=prompt, judge=judge
    )
    if endpoint is not None:
        from review_app.services.judging.endpoints import endpoint_settings

        settings = endpoint_settings(
            endpoint, retries=retries, timeout=timeout, max_tokens=max_tokens
        )
    else:
        settings = [
            EndpointSettings.from_options(
                base_url=url,
                model=model,
                api_key=api_key,
                concurrency=concurrency,
                retries=retries,
                timeout=timeout,
                max_tokens=max_tokens,
                response_format=response_format,
                max_prompt_bytes=max_prompt_bytes,
            )
            for url in (list[str | None](base_url) if base_url else [None])
        ]
    try:
        with unit_progress(f"judging with {template.ref}") as callback:
            summary = run_judge_job(
                engine,
                operator(),
                rubric=chosen,
                prompt=template,
                asked={"case_ids": case, "lane": lane, "limit": limit},
                settings=settings,
                progress=callback,
            )
    except JudgeRunInterrupted as interrupted:
        typer.echo(interrupted.summary.line())
        typer.echo("interrupted: run the same command again to ask the units left", err=True)
        raise typer.Exit(130) from None
    typer.echo(summary.line())


@judge_app.command("endpoints")
def judge_endpoints(as_json: JsonOption = False, db: DbOption = None) -> None:
    """The judge endpoints of $REVIEW_APP_JUDGE_ENDPOINTS by name (never their keys)."""
    from review_app.services.judging.endpoints import list_endpoints

    engine = open_engine(db)
    found = list_endpoints(engine, operator())
    print_listing(
        found,
        as_json=as_json,
        line=lambda e: terminal_safe(
            f"{e.name:<16} {e.model:<28} {', '.join(e.hosts)}  "
            f"(concurrency {e.concurrency}, {e.response_format})"
        ),
        empty="no judge endpoints (set REVIEW_APP_JUDGE_ENDPOINTS to a TOML file)",
    )


@judge_app.command("report")
def judge_report(
    rubric: RubricOption,
    run: Annotated[
        list[int] | None, typer.Option("--run", help="Only this run id (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    resamples: Annotated[int, typer.Option("--resamples", help="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    epsilon: Annotated[
        float,
        typer.Option(
            "--epsilon",
            help="Alternative annotator test margin: how much worse than a reviewer the "
            "judge may be, for being cheaper and faster (0.2 as in the paper).",
        ),
    ] = 0.2,
    db: DbOption = None,
) -> None:
    """May the judge replace a reviewer (alternative annotator test), and how it agrees."""
    from review_app.cli.render import render_judge_report
    from review_app.services.judging.judge_report import calibration_report

    engine = open_engine(db)
    known = catalog(engine)
    chosen = known.for_reports(rubric)
    report = calibration_report(
        engine,
        operator(),
        rubric=chosen,
        run_ids=run,
        n_resamples=resamples,
        seed=seed,
        epsilon=epsilon,
        previous=known.previous_of(chosen),
    )
    print_report(report, as_json=as_json, render=render_judge_report)


@judge_app.command("compare")
def judge_compare(
    rubric: RubricOption,
    runs: Annotated[
        str | None,
        typer.Option(
            "--runs",
            metavar="A,B",
            help="Two run ids; the difference is B - A (default: the newest complete run "
            "and a complete run of an earlier prompt version with the same model at the "
            'same endpoint; docs/reference.md, "Which run by default").',
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    resamples: Annotated[int, typer.Option("--resamples", help="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    confirmation_set: Annotated[
        bool,
        typer.Option(
            "--confirmation-set",
            help="Compare on the rubric version's confirmation set only (needs --runs), "
            "spending the next share of its error budget as an align job's confirmation "
            'does (docs/reference.md, "Suggesting a prompt").',
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Is one judge run better than another? A verdict on the gold units both judged.

    Kappa and accuracy against gold with intervals, their paired difference (cluster
    bootstrap over conversations, the same resamples for both), an exact McNemar test,
    each run's alternative annotator test, and the units where they differ.
    """
    from review_app.cli.render_judging import render_run_comparison
    from review_app.errors import InputError
    from review_app.services.judging.judge_compare import compare_judge_runs

    run_ids: list[int] | None = None
    if runs is not None:
        try:
            run_ids = [int(part) for part in runs.split(",")]
        except ValueError:
            raise InputError(
                f"must be two run ids separated by a comma, got {runs!r}", field="--runs"
            ) from None
    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    if confirmation_set:
        from review_app.services.judging.align import confirm_by_hand

        if run_ids is None or len(run_ids) != 2:
            raise InputError(
                "--confirmation-set compares two runs: give --runs A,B", field="--runs"
            )
        tested = confirm_by_hand(
            engine,
            operator(),
            rubric=chosen,
            run_ids=(run_ids[0], run_ids[1]),
            n_resamples=resamples,
            seed=seed,
        )
        if as_json:
            print_json(tested)
            return
        found = tested["confirmation"]
        typer.echo(
            terminal_safe(
                f"{tested['verdict']}: {tested['second']} against {tested['first']} on "
                f"{found['units']} confirmation units, p = {found['p_value']:.3g} at this "
                f"test's level {found['alpha_spent']:.4g}"
            )
        )
        typer.echo(terminal_safe(found["budget"]["sentence"]))
        return
    report = compare_judge_runs(
        engine, operator(), rubric=chosen, run_ids=run_ids, n_resamples=resamples, seed=seed
    )
    print_report(report, as_json=as_json, render=render_run_comparison)


@judge_app.command("align")
def judge_align(
    rubric: RubricOption,
    start: Annotated[
        str,
        typer.Option(
            "--from",
            metavar="JUDGE@vN",
            help="The stored prompt version to improve (see `judge prompts list`).",
        ),
    ],
    endpoint: Annotated[
        str,
        typer.Option(
            "--endpoint",
            metavar="NAME",
            help="The judge's endpoint (by name in the endpoints file).",
        ),
    ],
    optimizer: Annotated[
        str,
        typer.Option(
            "--optimizer-endpoint",
            metavar="NAME",
            help="The optimiser model's endpoint (by name): it proposes the new prompts.",
        ),
    ],
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            metavar="CALLS",
            help="Units the optimiser may have judged in all (verdicts already stored for a "
            "prompt text cost no request); the confirmation comes on top.",
        ),
    ] = 200,
    confirm_share: Annotated[
        float,
        typer.Option(
            "--confirm-share",
            help="Share of the gold conversations set aside to confirm (when the rubric "
            "version has no confirmation set yet).",
        ),
    ] = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sets and the optimiser.")] = 0,
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Queue the job and print its id; a worker runs it (review-app serve, or "
            "review-app jobs work).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (the keys of the reference).")
    ] = False,
    db: DbOption = None,
) -> None:
    """Suggest a better judge prompt and confirm it on gold the optimiser never saw.

    GEPA proposes prompts from the units the judge gets wrong (train and validation
    gold); only the best is run on the confirmation set, against the starting version,
    by the paired test of `judge compare`, at the level the set's error budget still
    allows. Every candidate is kept as a prompt version (docs/reference.md, "Suggesting
    a prompt").
    """
    import time

    from review_app.services.jobs.runner import job_status, run_worker, stop_job
    from review_app.services.judging.align import (
        ALIGN_JOB,
        align_json,
        plan_align,
        result_lines,
        start_align_job,
    )

    engine = open_engine(db)
    chosen = catalog(engine).get(rubric)
    options: dict[str, Any] = {
        "rubric": chosen,
        "start": start,
        "endpoint": endpoint,
        "optimizer": optimizer,
        "budget": budget,
        "confirm_share": confirm_share,
        "seed": seed,
    }
    plan = plan_align(engine, operator(), **options)
    typer.echo(terminal_safe(plan.sentence()), err=as_json)
    job = start_align_job(engine, operator(), **options)
    if background:
        typer.echo(f"job {job.id} queued: review-app jobs  (stop: review-app jobs stop {job.id})")
        return
    try:
        while True:
            run_worker(engine, until_idle=True, poll_seconds=0.2, kinds=[ALIGN_JOB])
            view = job_status(engine, operator(), job_id=job.id)
            if view.finished:
                break
            time.sleep(0.5)  # another worker (a server's) runs it
    except KeyboardInterrupt:
        stop_job(engine, operator(), job_id=job.id)
        typer.echo(f"stopping job {job.id}: its candidates are kept", err=True)
        raise typer.Exit(130) from None
    if view.status != "done" or view.result is None:
        raise fail(f"job {view.id} {view.status}: {view.error or 'no result'}")
    if as_json:
        print_json(align_json(view.result))
        return
    for line in result_lines(view.result):
        typer.echo(terminal_safe(line))


@judge_app.command("estimate")
def judge_estimate(
    rubric: RubricOption,
    run: Annotated[
        int | None,
        typer.Option(
            "--run",
            help="The judge run whose verdicts to use (default: the team's judge, else the "
            "newest complete run).",
        ),
    ] = None,
    level: Annotated[
        str, typer.Option("--level", help="turn or conversation: what a unit is.")
    ] = "turn",
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")] = False,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="Also by stratum (position, lane, code or finding): stratified PPI++ and "
            "the judge's agreement with gold in each.",
        ),
    ] = None,
    resamples: Annotated[
        int, typer.Option("--resamples", help="With --by: bootstrap resamples for the kappas.")
    ] = 300,
    db: DbOption = None,
) -> None:
    """How often the chatbot breaks role: PPI++ from the judge's verdicts and gold."""
    from review_app.cli.render_judging import render_estimate
    from review_app.cli.render_strata import with_strata
    from review_app.services.judging.estimate import break_rate_estimate
    from review_app.services.judging.run_defaults import run_or_default

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    if resamples < 0:
        raise fail("--resamples: at least 0")
    run_id = run_or_default(engine, operator(), rubric=chosen, run_id=run).id
    estimate = break_rate_estimate(
        engine, operator(), rubric=chosen, run_id=run_id, level=level, by=by, n_resamples=resamples
    )
    print_report(estimate, as_json=as_json, render=with_strata(render_estimate))


@judge_app.command("route")
def judge_route(
    rubric: RubricOption,
    alpha: Annotated[
        float, typer.Option("--alpha", help="Most disagreement with gold allowed on decided units.")
    ],
    delta: Annotated[
        float, typer.Option("--delta", help="Chance the guarantee may fail (e.g. 0.1).")
    ],
    runs: Annotated[
        str | None,
        typer.Option(
            "--runs",
            help="Judge run ids, comma-separated, cheapest first (a cascade); default: the "
            "team's judge, else the newest complete run.",
        ),
    ] = None,
    min_units: Annotated[
        int, typer.Option("--min-units", help="Skip thresholds keeping fewer gold units.")
    ] = 30,
    on: Annotated[
        str, typer.Option("--on", help="verdict (break / no break) or code: what disagreement is.")
    ] = "verdict",
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Mark decided verdicts certified and queue escalated units' cases.",
        ),
    ] = False,
    reviewers: Annotated[
        str | None, typer.Option("--reviewers", help="With --apply: comma-separated names.")
    ] = None,
    overlap: Annotated[int, typer.Option("--overlap", help="Reviewers per queued case.")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the routing as JSON.")] = False,
    db: DbOption = None,
) -> None:
    """Certified selective judging: the judge decides where it is provably right enough.

    Thresholds are certified on gold (audit samples when there are any) so that the
    judge's disagreement on the units it decides is at most ALPHA with probability at
    least 1 - DELTA; the other units are escalated to reviewers.
    """
    from review_app.cli.render_judging import render_route
    from review_app.errors import InputError
    from review_app.services.judging.run_defaults import run_or_default
    from review_app.services.judging.selective import route_judges

    try:
        run_ids = [int(part) for part in (runs or "").split(",") if part.strip()]
    except ValueError:
        raise InputError(
            f"must be run ids separated by commas, got {runs!r}", field="--runs"
        ) from None
    names = [n.strip() for n in (reviewers or "").split(",") if n.strip()]
    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    if runs is None:
        run_ids = [run_or_default(engine, operator(), rubric=chosen, run_id=None).id]
    report = route_judges(
        engine,
        operator(),
        rubric=chosen,
        run_ids=run_ids,
        alpha=alpha,
        delta=delta,
        min_units=min_units,
        on=on,
        apply=apply,
        reviewers=names,
        overlap=overlap,
    )
    print_report(report, as_json=as_json, render=render_route)


@judge_app.command("calibrate")
def judge_calibrate(
    rubric: RubricOption,
    run: Annotated[int, typer.Option("--run", help="The judge run whose scores to calibrate.")],
    method: Annotated[str, typer.Option("--method", help="isotonic or platt.")] = "isotonic",
    db: DbOption = None,
) -> None:
    """Fit a score calibration map on gold labels (cross-validated) and store it with the run."""
    from review_app.services.judging.judge_report import fit_run_calibration

    engine = open_engine(db)
    chosen = catalog(engine).get(rubric)
    fitted = fit_run_calibration(engine, operator(), rubric=chosen, run_id=run, method=method)
    before, after = fitted.heldout_brier_before, fitted.heldout_brier_after
    typer.echo(
        f"stored a {method} map with run {run}; held-out Brier {before:.4f} -> {after:.4f}"
        if before is not None and after is not None
        else f"stored a {method} map with run {run}"
    )


@judge_app.command("few-shot")
def judge_few_shot(
    rubric: RubricOption,
    run: Annotated[
        int | None, typer.Option("--run", help="Prefer units this run got wrong.")
    ] = None,
    per_label: Annotated[int, typer.Option("--per-label", help="Examples per label.")] = 1,
    db: DbOption = None,
) -> None:
    """Adjudicated contrasting examples (pass / fail / borderline per label) as YAML-ready JSON."""
    from review_app.services.judging.judge_report import few_shot_material

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    examples = few_shot_material(engine, operator(), rubric=chosen, run_id=run, per_label=per_label)
    print_json(examples)


@judge_app.command("local-server")
def judge_local_server(
    port: PortOption = 8080,
    host: HostOption = "127.0.0.1",
    n_ctx: Annotated[int, typer.Option("--n-ctx", help="Context window in tokens.")] = 4096,
) -> None:
    """Serve the bundled Gemma 3 270M model with llama.cpp (needs the local-judge extra).

    Then: review-app judge run --base-url http://HOST:PORT/v1 --model gemma-3-270m ...
    """
    import os

    from review_app.services.judging.local_judge import (
        local_server_command,
        local_server_environment,
    )

    command = local_server_command(host=host, port=port, n_ctx=n_ctx)
    typer.echo(f"llama.cpp server on http://{host}:{port}/v1 (model gemma-3-270m)")
    sys.stdout.flush()
    os.execve(command[0], command, local_server_environment())
