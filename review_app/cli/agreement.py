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
    db: DbOption = None,
) -> None:
    """Inter-rater agreement of the current labels of a rubric version.

    Units are (case, turn) pairs, raters are reviewers. A coefficient that is
    undefined for the data is null with a reason, never a made-up number.
    """
    from review_app.services.agreement_reports import agreement_report
    from review_app.services.render import render_agreement_text

    engine = open_engine(db)
    known = catalog(engine)
    chosen = known.for_reports(rubric)
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
