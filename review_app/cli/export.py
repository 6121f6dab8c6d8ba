"""``review-app export``: labeled regression fixtures and data exports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from review_app.cli.shared import DbOption, RubricOption, catalog, open_engine, operator


def export(
    rubric: RubricOption,
    format: Annotated[
        str, typer.Option("--format", help="fixtures, jsonl, csv or deepeval.")
    ] = "fixtures",
    out: Annotated[Path, typer.Option("--out", help="Directory to write to.")] = Path("export"),
    redact: Annotated[
        bool, typer.Option("--redact", help="Mask transcript text; keep events and labels.")
    ] = False,
    lane: Annotated[str | None, typer.Option("--lane", help="Only cases of this lane.")] = None,
    case: Annotated[
        list[str] | None, typer.Option("--case", help="Only this case (repeatable).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Labeled regression fixtures and data exports (deterministic: same data, same bytes).

    fixtures: one JSON case per file with an expected block (deterministic result,
    gold labels per turn, first semantic break), a pytest module replaying them, and
    a manifest with honest denominators. jsonl / csv: labels with case and turn
    context. deepeval: conversational test cases with the gold verdict.
    """
    from review_app.services.exchange.export import export_data, write_export

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    result = export_data(
        engine,
        operator(),
        rubric=chosen,
        format=format,
        redact=redact,
        lane=lane,
        case_ids=case,
    )
    written = write_export(result, out)
    typer.echo(f"wrote {len(written)} files to {out}: {result.line()}")
