"""``review-app labels``: human labels in and out in bulk."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from review_app.cli.shared import DbOption, RubricOption, catalog, open_engine, operator

labels_app = typer.Typer(
    help='Human labels in bulk (CSV: docs/reference.md, "Label CSV").', no_args_is_help=True
)


@labels_app.command("import")
def labels_import(
    label_file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE.csv|FILE.jsonl",
            help='The labels (docs/reference.md, "Label CSV"); JSONL with the same keys.',
        ),
    ],
    db: DbOption = None,
) -> None:
    """Import labels (case_id,turn,reviewer,label,rubric,rationale); all rows or none."""
    from review_app.services.exchange.labels_io import import_labels

    engine = open_engine(db)
    summary = import_labels(engine, operator(), label_file, catalog=catalog(engine))
    typer.echo(summary.line())


@labels_app.command("export")
def labels_export(
    rubric: RubricOption,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file instead of stdout.")
    ] = None,
    history: Annotated[
        bool, typer.Option("--history", help="Every label ever given, not only current ones.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Export labels of a rubric version as CSV (same columns as labels import)."""
    from review_app.services.exchange.labels_io import export_labels_csv

    engine = open_engine(db)
    chosen = catalog(engine).for_reports(rubric)
    text = export_labels_csv(engine, operator(), rubric=chosen, history=history)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {text.count(chr(10)) - 1} labels to {out}")
