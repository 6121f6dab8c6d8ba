"""``review-app agreement``: inter-rater agreement of a rubric version's labels."""

from __future__ import annotations

from typing import Annotated

import typer

from review_app.cli.output import print_report
from review_app.cli.shared import DbOption, RubricOption, catalog, fail, open_engine, operator


def agreement(
    rubric: RubricOption,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print JSON (docs/reference.md, "Agreement JSON").')
    ] = False,
    resamples: Annotated[
        int, typer.Option("--resamples", help="Bootstrap resamples for the alpha interval.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed (reproducible).")] = 0,
    over_time: Annotated[
        bool,
        typer.Option(
            "--over-time",
            help="Agreement per week (or batch) and late in sessions instead "
            '(docs/reference.md, "Agreement over time JSON").',
        ),
    ] = False,
    batch: Annotated[
        int, typer.Option("--batch", help="With --over-time: labels per batch when weeks are few.")
    ] = 200,
    db: DbOption = None,
) -> None:
    """Inter-rater agreement of the current labels of a rubric version.

    Units are (case, turn) pairs, raters are reviewers. A coefficient that is
    undefined for the data is null with a reason, never a made-up number.
    """
    from review_app.cli.render import render_agreement_text
    from review_app.services.review.agreement_reports import agreement_report

    engine = open_engine(db)
    known = catalog(engine)
    chosen = known.for_reports(rubric)
    if over_time:
        from review_app.cli.render_reviewers import render_over_time
        from review_app.services.review.reliability import agreement_over_time_report

        timed = agreement_over_time_report(engine, operator(), rubric=chosen, batch=batch)
        print_report(timed, as_json=as_json, render=render_over_time)
        return
    if resamples < 0:
        raise fail("--resamples: at least 0")
    report = agreement_report(
        engine,
        operator(),
        rubric=chosen,
        n_resamples=resamples,
        seed=seed,
        previous=known.previous_of(chosen),
    )
    print_report(report, as_json=as_json, render=render_agreement_text)


def drift(
    rubric: RubricOption,
    run: Annotated[
        int | None, typer.Option("--run", help="Only this judge run beside gold (else every run).")
    ] = None,
    min_units: Annotated[
        int, typer.Option("--min-units", help="Pool later answers until each bin has this many.")
    ] = 30,
    resamples: Annotated[
        int, typer.Option("--resamples", help="Conversation-bootstrap resamples.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed (reproducible).")] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print JSON (docs/reference.md, "Drift JSON").')
    ] = False,
    db: DbOption = None,
) -> None:
    """Where in the conversation the role breaks: by answer position and by role.

    Break rates from gold and from each judge run with conversation-bootstrap
    intervals, the first-break distribution, the break odds per later answer, and
    reviewer and judge agreement on the same bins.
    """
    from review_app.cli.render_judging import render_drift
    from review_app.services.judging.drift import drift_report

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    report = drift_report(
        engine,
        operator(),
        rubric=chosen,
        run_id=run,
        min_units=min_units,
        n_resamples=resamples,
        seed=seed,
    )
    print_report(report, as_json=as_json, render=render_drift)
