"""``review-app reviewers`` (who reviews, in which role) and ``assign`` (their queues)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from review_app.cli.output import print_json, print_listing, terminal_safe
from review_app.cli.shared import (
    DbOption,
    JsonOption,
    RubricOption,
    catalog,
    open_engine,
    operator,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from review_app.rubrics.model import Rubric

reviewers_app = typer.Typer(help="Reviewers and their roles.", no_args_is_help=True)


@reviewers_app.command("list")
def reviewers_list(as_json: JsonOption = False, db: DbOption = None) -> None:
    """Reviewers with their roles; deactivated ones are marked ``inactive``."""
    from review_app.services.team.people import list_people

    people = [
        {"name": p.name, "role": p.role, "active": p.active}
        for p in list_people(open_engine(db), include_inactive=True)
    ]
    print_listing(
        people,
        as_json=as_json,
        line=lambda person: (
            f"{terminal_safe(person['name']):<32} {person['role']}"
            + ("" if person["active"] else " inactive")
        ),
    )


@reviewers_app.command("add")
def reviewers_add(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Sign-in identity (e.g. e-mail).")],
    role: Annotated[
        str, typer.Option("--role", help="reviewer, policy_owner or admin.")
    ] = "reviewer",
    db: DbOption = None,
) -> None:
    """Add a reviewer (or change an existing one's role)."""
    from review_app.services.team.people import add_person

    person = add_person(open_engine(db), operator(), name=name, role=role)
    typer.echo(f"{person.name}: {person.role}")


@reviewers_app.command("reliability")
def reviewers_reliability(
    rubric: RubricOption,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print JSON (docs/reference.md, "Reviewer reliability JSON").'),
    ] = False,
    resamples: Annotated[
        int, typer.Option("--resamples", help="Conversation-bootstrap resamples (0: none).")
    ] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed (reproducible).")] = 0,
    db: DbOption = None,
) -> None:
    """Which reviewer to trust on which codes: each one's confusion matrix and accuracy.

    Dawid-Skene over every current label of the rubric version, adjudicated gold fixing
    its units' true codes; a reviewer below the others is named with the codes responsible.
    """
    from review_app.cli.output import print_report
    from review_app.cli.render_reviewers import render_reliability
    from review_app.services.review.reliability import reliability_report

    engine = open_engine(db)
    report = reliability_report(
        engine,
        operator(),
        rubric=catalog(engine).for_reports(rubric),
        n_resamples=resamples,
        seed=seed,
    )
    print_report(report, as_json=as_json, render=render_reliability)


NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="The person's sign-in identity (any case).")
]


@reviewers_app.command("deactivate")
def reviewers_deactivate(name: NameArgument, db: DbOption = None) -> None:
    """Take every right away from a person from their next action on; their labels stay.

    The last active admin cannot be deactivated.
    """
    from review_app.services.team.people import deactivate_person

    typer.echo(deactivate_person(open_engine(db), operator(), name=name).line())


@reviewers_app.command("reactivate")
def reviewers_reactivate(name: NameArgument, db: DbOption = None) -> None:
    """Give a deactivated person their role's rights back."""
    from review_app.services.team.people import reactivate_person

    typer.echo(reactivate_person(open_engine(db), operator(), name=name).line())


def assign(
    rubric: RubricOption,
    reviewers: Annotated[str, typer.Option("--reviewers", help="Comma-separated reviewer names.")],
    fill: Annotated[
        int | None,
        typer.Option(
            "--fill",
            "--overlap",
            metavar="N",
            help="Fill each case up to N reviewers (default 2): everyone already assigned "
            "counts, so a case that has N or more gets nobody new; the chosen reviewers with "
            "the least load fill the rest.",
        ),
    ] = None,
    add: Annotated[
        bool,
        typer.Option(
            "--add",
            help="Add these reviewers to each chosen case, however many others have it "
            "(instead of --fill).",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the (case, reviewer) pairs it would assign (with --by-uncertainty: "
            "the draw it would make, with its pairs); write nothing.",
        ),
    ] = False,
    lane: Annotated[str | None, typer.Option("--lane", help="Only cases of this lane.")] = None,
    audit_sample: Annotated[
        int | None,
        typer.Option(
            "--audit-sample",
            help="Draw this many turns uniformly at random, record the draw and queue "
            "their cases: gold on them is a random sample, as `judge estimate` needs.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the audit draw.")] = 0,
    by_uncertainty: Annotated[
        int | None,
        typer.Option(
            "--by-uncertainty",
            metavar="RUN",
            help="With --audit-sample K: draw each turn RUN judged with a probability that "
            "grows with the judge's uncertainty (about K in all); `judge estimate --run RUN` "
            "then reports the active estimate.",
        ),
    ] = None,
    mix: Annotated[
        float,
        typer.Option("--mix", help="With --by-uncertainty: the uniform share tau (0 to 1)."),
    ] = 0.5,
    by_stratum: Annotated[
        str | None,
        typer.Option(
            "--by-stratum",
            metavar="BY",
            help="With --audit-sample K --run RUN: place the K audits across the strata of BY "
            "(position, lane, code or finding) by Neyman allocation from the audits so far.",
        ),
    ] = None,
    run: Annotated[
        int | None, typer.Option("--run", help="With --by-stratum: the judge run to stratify.")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="With --by-uncertainty or --by-stratum: print the draw as JSON."
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Fill reviewers' queues in one of two modes: fill each case up to N reviewers
    (--fill N, the default with N = 2), or add these reviewers to each chosen case (--add).

    With --dry-run it prints the (case, reviewer) pairs it would assign and writes nothing.
    """
    from review_app.errors import InputError
    from review_app.services.team.queue import assign_cases, plan_assignment

    engine = open_engine(db)
    chosen = catalog(engine).get(rubric)
    names = [name.strip() for name in reviewers.split(",") if name.strip()]
    if add and fill is not None:
        raise InputError(
            "add these reviewers (--add) or fill up to N (--fill N), not both", field="--add"
        )
    drawing = audit_sample is not None or by_stratum is not None or run is not None
    if add and drawing:
        raise InputError("an audit draw fills its cases up to --fill N reviewers", field="--add")
    if dry_run and drawing and by_uncertainty is None:
        raise InputError("only for an assignment or a draw by uncertainty", field="--dry-run")
    overlap = 2 if fill is None else fill
    if by_stratum is not None or run is not None:
        _assign_by_stratum(
            engine, chosen, by=by_stratum, run=run, size=audit_sample, seed=seed, names=names,
            overlap=overlap, as_json=as_json, uncertainty=by_uncertainty,
        )  # fmt: skip
        return
    if by_uncertainty is None and (as_json or mix != 0.5):
        raise InputError("only with --by-uncertainty RUN", field="--json" if as_json else "--mix")
    if by_uncertainty is not None:
        from review_app.services.judging.uncertainty_audit import (
            draw_uncertainty_sample,
            preview_uncertainty_sample,
        )

        if audit_sample is None:
            raise InputError(
                "needs --audit-sample K (the expected number of turns)", field="--by-uncertainty"
            )
        sample = (preview_uncertainty_sample if dry_run else draw_uncertainty_sample)(
            engine,
            operator(),
            rubric=chosen,
            run_id=by_uncertainty,
            size=audit_sample,
            seed=seed,
            reviewers=names,
            mix=mix,
            overlap=overlap,
        )
        if as_json:
            print_json(sample.to_dict())
            return
        if dry_run and sample.assignment is not None:
            for case_id, name in sample.assignment.pairs:
                typer.echo(f"{terminal_safe(case_id)}\t{terminal_safe(name)}")
        typer.echo(sample.line())
        return
    if audit_sample is not None:
        from review_app.services.team.audit_samples import draw_audit_sample

        drawn = draw_audit_sample(
            engine,
            operator(),
            rubric=chosen,
            size=audit_sample,
            seed=seed,
            reviewers=names,
            overlap=overlap,
        )
        typer.echo(drawn.line())
        return
    mode = "add" if add else "fill"
    if dry_run:
        plan = plan_assignment(
            engine, operator(), rubric=chosen, reviewers=names, mode=mode,
            overlap=None if add else overlap, lane=lane,
        )  # fmt: skip
        for case_id, name in plan.pairs:
            typer.echo(f"{terminal_safe(case_id)}\t{terminal_safe(name)}")
        typer.echo(plan.line())
        return
    report = assign_cases(
        engine, operator(), rubric=chosen, reviewers=names, mode=mode,
        overlap=None if add else overlap, lane=lane,
    )  # fmt: skip
    typer.echo(report.line())


def _assign_by_stratum(
    engine: Engine,
    rubric: Rubric,
    *,
    by: str | None,
    run: int | None,
    size: int | None,
    seed: int,
    names: list[str],
    overlap: int,
    as_json: bool,
    uncertainty: int | None,
) -> None:
    """``assign --audit-sample K --by-stratum BY --run RUN``: a draw by stratum."""
    from review_app.errors import InputError
    from review_app.services.judging.stratified_audit import draw_stratified_sample

    if uncertainty is not None:
        raise InputError("draw by uncertainty or by stratum, not both", field="--by-stratum")
    if by is None:
        raise InputError("only with --by-stratum BY", field="--run")
    if run is None:
        raise InputError(
            "needs --run RUN (the judge run whose errors to weigh)", field="--by-stratum"
        )
    if size is None:
        raise InputError("needs --audit-sample K (the turns to draw)", field="--by-stratum")
    sample = draw_stratified_sample(
        engine,
        operator(),
        rubric=rubric,
        run_id=run,
        by=by,
        size=size,
        seed=seed,
        reviewers=names,
        overlap=overlap,
    )
    if as_json:
        print_json(sample.to_dict())
    else:
        typer.echo(sample.line())
