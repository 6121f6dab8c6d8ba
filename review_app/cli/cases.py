"""``review-app cases``: list and show imported cases."""

from __future__ import annotations

from typing import Annotated

import typer

from review_app.cli.output import format_table, print_json, print_report, row_to_dict
from review_app.cli.shared import DbOption, JsonOption, open_engine, operator

cases_app = typer.Typer(help="List and show imported cases.", no_args_is_help=True)


@cases_app.command("list")
def cases_list(
    lane: Annotated[
        str | None,
        typer.Option(
            "--lane",
            help="Only cases in this lane: violation, invalid, missing-context, no-contract, pass.",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (0: all).")] = 50,
    offset: Annotated[int, typer.Option("--offset", help="Skip this many first.")] = 0,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Imported cases with their lane and first violation, ordered by case id."""
    from review_app.services.cases.case_views import list_cases

    engine = open_engine(db)
    rows = list_cases(engine, lane=lane, offset=offset, limit=limit if limit > 0 else None)
    if as_json:
        print_json([row_to_dict(row) for row in rows])
        return
    if not rows:
        typer.echo("no cases" + (f" in lane {lane}" if lane else ""))
        return
    headers = ("case_id", "lane", "contract", "events", "first_violation", "diagnostic")
    table = [
        (
            row.case_id,
            row.lane or "-",
            row.contract_version or "-",
            str(row.n_events),
            "-" if row.first_violation_turn is None else str(row.first_violation_turn),
            row.diagnostic or "",
        )
        for row in rows
    ]
    typer.echo(format_table(headers, table))


@cases_app.command("show")
def cases_show(
    case_id: Annotated[str, typer.Argument(metavar="CASE_ID", help="The case to show.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the case and its findings as JSON.")
    ] = False,
    db: DbOption = None,
) -> None:
    """One case turn by turn: actor, active role, text, actions and findings."""
    from review_app.cli.render import case_view_dict, render_case_text
    from review_app.services.cases.case_views import load_case_view

    view = load_case_view(open_engine(db), operator(), case_id=case_id)
    print_report(view, as_json=as_json, render=render_case_text, to_json=case_view_dict)
