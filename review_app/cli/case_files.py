"""Commands over case files: ``inspect`` them (no database) and ``import`` them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from review_app.cli.output import print_json
from review_app.cli.progress import file_progress
from review_app.cli.shared import USER_ERRORS, DbOption, exit_for, open_engine, operator
from review_app.files.limits import MAX_RECORD_BYTES


def inspect(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="Case files (JSON: one case or a list; JSONL: one per line) or directories.",
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the result JSON (no diagnostic line).")
    ] = False,
    summary: Annotated[
        bool, typer.Option("--summary", help="Add a closing line with counts per outcome.")
    ] = False,
) -> None:
    """Deterministic findings for case files; no database needed.

    One file holding one case: the one-line diagnostic, then the result as JSON.
    Several cases (more files, a directory: every .json/.jsonl under it, sorted,
    or a file holding several): one line per case in input order (with --json:
    one JSON object per line); an unreadable input gets its own error line and
    the rest is still inspected. Exit code, the worst over all cases: 0 pass;
    1 a violation; 2 an invalid fixture, no contract or unreadable input.
    """
    from review_app.inspect_command import run

    raise typer.Exit(run(paths, as_json=as_json, summary=summary))


def _json_file(path: Path | None, what: str) -> Any:
    if path is None:
        return None
    from review_app.files.json_records import read_json_object

    return read_json_object(path, what=what)


def import_(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH...", help="Case files or directories of them."),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="native, deepeval, openlayer, galtea or openai (default: detected per file).",
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite stored cases whose content changed.")
    ] = False,
    contract: Annotated[
        Path | None,
        typer.Option("--contract", help="A role contract (JSON) for cases that carry none."),
    ] = None,
    tool_action_map: Annotated[
        Path | None,
        typer.Option("--tool-map", help="JSON object: tool name -> contract action (or null)."),
    ] = None,
    case_id_prefix: Annotated[
        str | None, typer.Option("--case-id-prefix", help="Prefix for generated case ids.")
    ] = None,
    session_column: Annotated[
        str | None,
        typer.Option(
            "--session-column",
            help="Column grouping rows into conversations (openlayer, galtea; default session_id).",
        ),
    ] = None,
    timestamp_column: Annotated[
        str | None,
        typer.Option(
            "--timestamp-column", help="Column of each row's time (openlayer; default timestamp)."
        ),
    ] = None,
    sequence_column: Annotated[
        str | None,
        typer.Option(
            "--sequence-column",
            help="Column of integers ordering rows at one time (openlayer; default sequence).",
        ),
    ] = None,
    input_column: Annotated[
        str | None,
        typer.Option(
            "--input-column",
            help="Column of the user's message (openlayer, galtea; default input).",
        ),
    ] = None,
    output_column: Annotated[
        str | None,
        typer.Option(
            "--output-column",
            help="Column of the chatbot's reply (default: openlayer output, galtea actual_output).",
        ),
    ] = None,
    role_column: Annotated[
        str | None,
        typer.Option(
            "--role-column",
            help="Column of a session's role definition (openlayer; default role_definition).",
        ),
    ] = None,
    product_description_column: Annotated[
        str | None,
        typer.Option(
            "--product-description-column",
            help="Column of a conversation's product description (galtea; default "
            "product_description).",
        ),
    ] = None,
    order_column: Annotated[
        str | None,
        typer.Option(
            "--order-column",
            help="Column of integers ordering a conversation's turns (galtea; default: turn, "
            "else index, else the row order).",
        ),
    ] = None,
    role_definition: Annotated[
        str | None,
        typer.Option("--role-definition", help="Role text for sessions without one (openlayer)."),
    ] = None,
    product_description: Annotated[
        str | None,
        typer.Option("--product-description", help="Product description (galtea)."),
    ] = None,
    max_record_bytes: Annotated[
        int, typer.Option("--max-record-bytes", help="Largest accepted single case, in bytes.")
    ] = MAX_RECORD_BYTES,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    db: DbOption = None,
) -> None:
    """Import case files, each whole: bad input anywhere in a file stores nothing of it.

    Native files (docs/reference.md, "Cases") and other tools' files (docs/reference.md,
    "Foreign formats"): deepeval conversational test cases, Openlayer session rows,
    Galtea-style rows, OpenAI chat-completions message lists. Cases without a contract are
    stored for semantic review only. A changed case under a stored case id is refused
    unless --replace; a contract version stored with a different body is refused.
    Identical cases are skipped. Findings are computed at import.
    """
    from review_app.formats.options import ImportOptions
    from review_app.services.cases.importing import ImportSummary, import_paths

    options = ImportOptions(
        format=format,
        replace=replace,
        max_record_bytes=max_record_bytes,
        contract=_json_file(contract, "a role contract"),
        tool_action_map=_json_file(tool_action_map, "tool name -> action"),
        case_id_prefix=case_id_prefix,
        session_column=session_column,
        timestamp_column=timestamp_column,
        sequence_column=sequence_column,
        input_column=input_column,
        output_column=output_column,
        role_column=role_column,
        product_description_column=product_description_column,
        order_column=order_column,
        role_definition=role_definition,
        product_description=product_description,
    )
    done = ImportSummary()
    engine = open_engine(db)
    with file_progress() as progress:
        try:
            import_paths(
                engine,
                operator(),
                paths,
                options,
                progress=progress,
                on_file_done=done.files.append,
            )
        except USER_ERRORS as error:
            exit_ = exit_for(error)
            if done.files:
                typer.echo(f"stored from the files before it: {done.line()}", err=True)
            raise exit_ from None
    if as_json:
        print_json(done.to_dict())
    else:
        typer.echo(done.line())
