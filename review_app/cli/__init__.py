"""The ``review-app`` command line: thin commands over the services.

Each command opens the database (migrating it on first use) and calls one service
function. Bad input gives one sentence on stderr naming the file, line or field,
and exit code 2; never a traceback.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from review_app import __version__
from review_app.errors import InputError, NotFound, PermissionDenied

EXIT_BAD_INPUT = 2
EXIT_FORBIDDEN = 3


class _ErrorsAsMessages(TyperGroup):
    """Every command's bad input as one line on stderr and an exit code, never a traceback.

    ``InputError`` and ``NotFound`` exit with 2, ``PermissionDenied`` with 3 (the one
    place that maps them, as sqlite-utils does with ``click.ClickException``).
    """

    def invoke(self, ctx: Any) -> Any:  # Typer's own (vendored) click.Context
        try:
            return super().invoke(ctx)
        except _USER_ERRORS as error:
            raise _exit_for(error) from None


_USER_ERRORS = (InputError, NotFound, PermissionDenied)


def _exit_for(error: Exception) -> typer.Exit:
    """The error's sentence on stderr; the exit carrying its code."""
    return _fail(
        str(error), EXIT_FORBIDDEN if isinstance(error, PermissionDenied) else EXIT_BAD_INPUT
    )


app = typer.Typer(
    cls=_ErrorsAsMessages,
    name="review-app",
    help=(
        "Role Review: human review of chatbot conversations for role adherence. "
        "Deterministic role-contract findings, per-turn labels against versioned rubrics, "
        "inter-rater agreement, LLM-judge calibration and regression-fixture export."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
cases_app = typer.Typer(help="List and show imported cases.", no_args_is_help=True)
app.add_typer(cases_app, name="cases")
labels_app = typer.Typer(
    help='Human labels in bulk (CSV: docs/reference.md, "Label CSV").', no_args_is_help=True
)
app.add_typer(labels_app, name="labels")
reviewers_app = typer.Typer(help="Reviewers and their roles.", no_args_is_help=True)
app.add_typer(reviewers_app, name="reviewers")
rubrics_app = typer.Typer(help="Rubric versions: list them, compare two.", no_args_is_help=True)
app.add_typer(rubrics_app, name="rubrics")
judge_app = typer.Typer(
    help="LLM judges: import verdicts, run a prompt, calibrate.", no_args_is_help=True
)
app.add_typer(judge_app, name="judge")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=(
            "Database URL (any SQLAlchemy URL). Default: $REVIEW_APP_DATABASE_URL, else the "
            "SQLite file ~/.local/share/role-review/review.db."
        ),
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _engine(db: str | None) -> Any:
    from review_app.services.database import open_database

    try:
        return open_database(db)
    except Exception as error:  # an unreachable server or a bad URL is the user's input
        if isinstance(error, InputError):
            raise
        raise InputError(f"cannot open the database: {_short(error)}", field="--db") from None


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


_C1_AND_DEL = re.compile("[\x7f-\x9f]")


def _print_json(value: Any) -> None:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    # JSON already escapes C0 controls; DEL and C1 (8-bit CSI) pass through raw otherwise.
    typer.echo(_C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _is_printable(ch: str) -> bool:
    code = ord(ch)
    return ch in "\n\t" or (code >= 32 and not 0x7F <= code <= 0x9F)


def terminal_safe(text: str) -> str:
    """Untrusted text for a terminal: control characters (escape sequences) made visible."""
    return "".join(ch if _is_printable(ch) else f"\\x{ord(ch):02x}" for ch in text)


def _operator() -> Any:
    """The command line acts as the operator: an admin, recorded as ``operator``."""
    from review_app.services.people import operator_actor

    return operator_actor()


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"review-app {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Role Review command line."""


# --- inspect -----------------------------------------------------------------


@app.command()
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


# --- import ------------------------------------------------------------------


_PROGRESS_MIN_BYTES = 8 * 1024 * 1024


def _json_file(path: Path | None, what: str) -> Any:
    if path is None:
        return None
    from review_app.cases import parse_json_bytes

    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot be read ({error.strerror})", source=str(path)) from None
    value = parse_json_bytes(data, source=str(path))
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object ({what})", source=str(path))
    return value


@app.command("import")
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
    tool_map: Annotated[
        Path | None,
        typer.Option("--tool-map", help="JSON object: tool name -> contract action (or null)."),
    ] = None,
    case_id_prefix: Annotated[
        str | None, typer.Option("--case-id-prefix", help="Prefix for generated case ids.")
    ] = None,
    session_column: Annotated[str | None, typer.Option("--session-column")] = None,
    timestamp_column: Annotated[str | None, typer.Option("--timestamp-column")] = None,
    sequence_column: Annotated[str | None, typer.Option("--sequence-column")] = None,
    input_column: Annotated[str | None, typer.Option("--input-column")] = None,
    output_column: Annotated[str | None, typer.Option("--output-column")] = None,
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
    ] = 16 * 1024 * 1024,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    db: DbOption = None,
) -> None:
    """Import cases, each whole (a re-run completes a stopped file); identical ones are skipped.

    Native files (docs/reference.md, "Cases") and other tools' files: deepeval
    conversational test cases, Openlayer session rows, Galtea-style rows, OpenAI chat-completions
    message lists. Cases without a contract are stored for semantic review only.
    A changed case under a stored case id is refused unless --replace; a contract
    version stored with a different body is refused. Findings are computed at import.
    """
    from review_app.services.importing import ImportSummary, import_paths

    contract_value = _json_file(contract, "a role contract")
    tool_map_value = _json_file(tool_map, "tool name -> action")
    options = {
        "contract": contract_value,
        "tool_action_map": tool_map_value,
        "case_id_prefix": case_id_prefix,
        "session_column": session_column,
        "timestamp_column": timestamp_column,
        "sequence_column": sequence_column,
        "input_column": input_column,
        "output_column": output_column,
        "role_definition": role_definition,
        "product_description": product_description,
    }
    done = ImportSummary()
    engine = _engine(db)
    with _progress_factory() as progress:
        try:
            import_paths(
                engine,
                _operator(),
                paths,
                replace=replace,
                max_record_bytes=max_record_bytes,
                progress=progress,
                on_file_done=done.files.append,
                format=format,
                options={k: v for k, v in options.items() if v is not None},
            )
        except _USER_ERRORS as error:
            exit_ = _exit_for(error)
            if done.files:
                typer.echo(f"before the error: {done.line()}", err=True)
            raise exit_ from None
    if as_json:
        _print_json(done.to_dict())
    else:
        typer.echo(done.line())


class _unit_progress:
    """A progress bar over units of work, on a terminal only."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.progress: Any = None

    def __enter__(self) -> Callable[[int, int], None] | None:
        if not sys.stderr.isatty():
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self.progress = Progress(
            BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
        )
        self.progress.start()
        task = self.progress.add_task(self.description, total=None)

        def update(done: int, total: int) -> None:
            self.progress.update(task, completed=done, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


class _progress_factory:
    """A progress bar per large file, on a terminal only (CI logs stay clean)."""

    def __enter__(self) -> Callable[[Path, int], Callable[[int], None] | None] | None:
        if not sys.stderr.isatty():
            return None
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            transient=True,
        )
        self.progress.start()

        def factory(path: Path, size: int) -> Callable[[int], None] | None:
            if size < _PROGRESS_MIN_BYTES:
                return None
            task = self.progress.add_task(path.name, total=size)
            return lambda n: self.progress.advance(task, n)

        return factory

    def __exit__(self, *exc: object) -> None:
        progress = getattr(self, "progress", None)
        if progress is not None:
            progress.stop()


# --- cases -------------------------------------------------------------------


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
    from review_app.services.cases import list_cases

    engine = _engine(db)
    rows = list_cases(engine, lane=lane, offset=offset, limit=limit if limit > 0 else None)
    if as_json:
        _print_json([row_to_dict(row) for row in rows])
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
    typer.echo(_format_table(headers, table))


def row_to_dict(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in row.__slots__}


def _format_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(terminal_safe(r[i])) for r in rows)) for i, h in enumerate(headers)]
    widths[-1] = len(headers[-1])  # the last column is not padded
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append(
            "  ".join(terminal_safe(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        )
    return "\n".join(lines)


@cases_app.command("show")
def cases_show(
    case_id: Annotated[str, typer.Argument(metavar="CASE_ID")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the case and its findings as JSON.")
    ] = False,
    db: DbOption = None,
) -> None:
    """One case turn by turn: actor, active role, text, actions and findings."""
    from review_app.services.cases import load_case_view
    from review_app.services.render import case_view_dict, render_case_text

    engine = _engine(db)
    view = load_case_view(engine, _operator(), case_id=case_id)
    if as_json:
        _print_json(case_view_dict(view))
        return
    typer.echo(terminal_safe(render_case_text(view)))


# --- rubrics, reviewers, assignments, labels ------------------------------------------------

RubricOption = Annotated[
    str, typer.Option("--rubric", metavar="ID@V", help="Rubric version, e.g. role-adherence@1.")
]


def _catalog(engine: Any) -> Any:
    from review_app.services.rubric_catalog import sync_rubrics

    return sync_rubrics(engine, _operator())


@rubrics_app.command("list")
def rubrics_list(as_json: JsonOption = False, db: DbOption = None) -> None:
    """Rubric versions: offered, labeled (immutable), or refused and why."""
    engine = _engine(db)
    catalog = _catalog(engine)
    rows = [
        {
            "rubric": ref,
            "status": "labeled" if ref in catalog.labeled else "offered",
            "title": catalog.usable[ref].title,
            "sha256": catalog.usable[ref].sha256,
        }
        for ref in catalog.refs
    ] + [
        {"rubric": ref, "status": "refused", "reason": why}
        for ref, why in sorted(catalog.refused.items())
    ]
    if as_json:
        _print_json(rows)
        return
    for row in rows:
        typer.echo(f"{row['rubric']:<28} {row['status']:<8} {row.get('title') or row['reason']}")


@rubrics_app.command("diff")
def rubrics_diff(
    old: Annotated[str, typer.Argument(metavar="ID@V")],
    new: Annotated[str, typer.Argument(metavar="ID@V")],
    db: DbOption = None,
) -> None:
    """What changed between two rubric versions (JSON)."""
    from review_app.rubrics import diff_rubrics

    engine = _engine(db)
    catalog = _catalog(engine)
    before, after = (catalog.for_reports(old), catalog.for_reports(new))
    _print_json(diff_rubrics(before, after).to_dict())


@reviewers_app.command("list")
def reviewers_list(as_json: JsonOption = False, db: DbOption = None) -> None:
    """Reviewers with their roles."""
    from review_app.services.people import list_people

    people = list_people(_engine(db))
    if as_json:
        _print_json([{"name": p.name, "role": p.role} for p in people])
        return
    for person in people:
        typer.echo(f"{terminal_safe(person.name):<32} {person.role}")


@reviewers_app.command("add")
def reviewers_add(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Sign-in identity (e.g. e-mail).")],
    role: Annotated[
        str, typer.Option("--role", help="reviewer, policy_owner or admin.")
    ] = "reviewer",
    db: DbOption = None,
) -> None:
    """Add a reviewer (or change an existing one's role)."""
    from review_app.services.people import add_person

    engine = _engine(db)
    person = add_person(engine, _operator(), name=name, role=role)
    typer.echo(f"{person.name}: {person.role}")


@app.command()
def assign(
    rubric: RubricOption,
    reviewers: Annotated[str, typer.Option("--reviewers", help="Comma-separated reviewer names.")],
    overlap: Annotated[int, typer.Option("--overlap", help="Reviewers per case.")] = 2,
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
    db: DbOption = None,
) -> None:
    """Fill reviewers' queues: each case goes to OVERLAP reviewers, load balanced."""
    from review_app.services.queue import assign_cases

    engine = _engine(db)
    catalog = _catalog(engine)
    chosen = catalog.get(rubric)
    names = [name.strip() for name in reviewers.split(",") if name.strip()]
    if audit_sample is not None:
        from review_app.services.audit_samples import draw_audit_sample

        drawn = draw_audit_sample(
            engine,
            _operator(),
            rubric=chosen,
            size=audit_sample,
            seed=seed,
            reviewers=names,
            overlap=overlap,
        )
        typer.echo(drawn.line())
        return
    report = assign_cases(
        engine, _operator(), rubric=chosen, reviewers=names, overlap=overlap, lane=lane
    )
    typer.echo(report.line())


@labels_app.command("import")
def labels_import(
    label_file: Annotated[Path, typer.Argument(metavar="FILE.csv|FILE.jsonl")],
    db: DbOption = None,
) -> None:
    """Import labels (case_id,turn,reviewer,label,rubric,rationale); all rows or none."""
    from review_app.services.labels_io import import_labels

    engine = _engine(db)
    catalog = _catalog(engine)
    summary = import_labels(engine, _operator(), label_file, catalog=catalog)
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
    from review_app.services.labels_io import export_labels_csv

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric)
    text = export_labels_csv(engine, _operator(), rubric=chosen, history=history)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {text.count(chr(10)) - 1} labels to {out}")


# --- agreement ------------------------------------------------------------------------


@app.command()
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

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric)
    if resamples < 0:
        raise _fail("--resamples: at least 0")
    report = agreement_report(engine, _operator(), rubric=chosen, n_resamples=resamples, seed=seed)
    if as_json:
        _print_json(report)
    else:
        typer.echo(terminal_safe(render_agreement_text(report)))


# --- export -----------------------------------------------------------------------------


@app.command()
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
    from review_app.services.export import export_data, write_export

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric)
    result = export_data(
        engine,
        _operator(),
        rubric=chosen,
        format=format,
        redact=redact,
        lane=lane,
        case_ids=case,
    )
    written = write_export(result, out)
    typer.echo(f"wrote {len(written)} files to {out}: {result.line()}")


# --- judge -----------------------------------------------------------------------------------


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
    from review_app.services.judge_import import import_verdicts

    engine = _engine(db)
    chosen = _catalog(engine).get(rubric)
    summary = import_verdicts(
        engine, _operator(), verdict_file, rubric=chosen, score_means=score_means
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
    """Stored judge runs with their verdict and error counts."""
    from review_app.services.judge_import import list_judge_runs

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric) if rubric else None
    runs = list_judge_runs(engine, _operator(), rubric=chosen)
    if as_json:
        _print_json(runs)
        return
    if not runs:
        typer.echo("no judge runs")
    for run in runs:
        typer.echo(
            f"{run['id']:>4}  {terminal_safe(run['name']):<48} {run['rubric']:<20} "
            f"{run['verdicts']:>6} verdicts  {run['errors']:>4} errors  {run['status']}"
        )


@judge_app.command("run")
def judge_run(
    rubric: RubricOption,
    prompt: Annotated[
        str,
        typer.Option("--prompt", help="judge@vN from rubrics/<id>/judges/, or a template path."),
    ],
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (or $REVIEW_APP_JUDGE_MODEL).")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="OpenAI-compatible API base, e.g. "
            "http://127.0.0.1:8080/v1 (or $REVIEW_APP_JUDGE_BASE_URL).",
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
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests at once.")] = 4,
    retries: Annotated[int, typer.Option("--retries", help="Retries per request.")] = 3,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request.")] = 120.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Answer length cap.")] = 300,
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
    from review_app.judging import find_judge_prompt
    from review_app.rubrics import default_rubrics_dir
    from review_app.services.judge_runner import EndpointSettings, run_judge, select_case_ids

    engine = _engine(db)
    chosen = _catalog(engine).get(rubric)
    template = find_judge_prompt(default_rubrics_dir(), chosen.id, prompt)
    settings = EndpointSettings.from_options(
        base_url=base_url,
        model=model,
        api_key=api_key,
        concurrency=concurrency,
        retries=retries,
        timeout=timeout,
        max_tokens=max_tokens,
        response_format=response_format,
    )
    case_ids = select_case_ids(engine, case_ids=case, lane=lane, limit=limit)
    with _unit_progress(f"judging with {template.ref}") as callback:
        summary = run_judge(
            engine,
            _operator(),
            rubric=chosen,
            prompt=template,
            settings=settings,
            case_ids=case_ids,
            progress=callback,
        )
    typer.echo(summary.line())


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
    from review_app.services.judge_report import calibration_report
    from review_app.services.render import render_judge_report

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric)
    report = calibration_report(
        engine,
        _operator(),
        rubric=chosen,
        run_ids=run,
        n_resamples=resamples,
        seed=seed,
        epsilon=epsilon,
    )
    if as_json:
        _print_json(report)
    else:
        typer.echo(terminal_safe(render_judge_report(report)))


@judge_app.command("estimate")
def judge_estimate(
    rubric: RubricOption,
    run: Annotated[int, typer.Option("--run", help="The judge run whose verdicts to use.")],
    level: Annotated[
        str, typer.Option("--level", help="turn or conversation: what a unit is.")
    ] = "turn",
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")] = False,
    db: DbOption = None,
) -> None:
    """How often the chatbot breaks role: PPI++ from the judge's verdicts and gold."""
    from review_app.services.estimate import break_rate_estimate, render_estimate

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric)
    estimate = break_rate_estimate(engine, _operator(), rubric=chosen, run_id=run, level=level)
    if as_json:
        _print_json(estimate)
    else:
        typer.echo(terminal_safe(render_estimate(estimate)))


@judge_app.command("calibrate")
def judge_calibrate(
    rubric: RubricOption,
    run: Annotated[int, typer.Option("--run", help="The judge run whose scores to calibrate.")],
    method: Annotated[str, typer.Option("--method", help="isotonic or platt.")] = "isotonic",
    db: DbOption = None,
) -> None:
    """Fit a score calibration map on gold labels (cross-validated) and store it with the run."""
    from review_app.services.judge_report import fit_run_calibration

    engine = _engine(db)
    chosen = _catalog(engine).get(rubric)
    fitted = fit_run_calibration(engine, _operator(), rubric=chosen, run_id=run, method=method)
    before, after = fitted.get("heldout_brier_before"), fitted.get("heldout_brier_after")
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
    from review_app.services.judge_report import few_shot_material

    engine = _engine(db)
    chosen = _catalog(engine).for_reports(rubric)
    examples = few_shot_material(
        engine, _operator(), rubric=chosen, run_id=run, per_label=per_label
    )
    _print_json(examples)


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

    from review_app.services.local_judge import local_server_command, local_server_environment

    command = local_server_command(host=host, port=port, n_ctx=n_ctx)
    typer.echo(f"llama.cpp server on http://{host}:{port}/v1 (model gemma-3-270m)")
    sys.stdout.flush()
    os.execve(command[0], command, local_server_environment())


# --- audit log -------------------------------------------------------------------------------


@app.command()
def audit(
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="ISO", help="Only entries at or after this UTC time."),
    ] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", metavar="NAME", help="Only this person's entries.")
    ] = None,
    action: Annotated[
        str | None,
        typer.Option("--action", metavar="A", help="Only this action (label, gold, export...)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many entries.")
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """The audit log, newest first: who changed or exported what, and when.

    Entries: label and gold changes, case imports (with the file's sha256) and
    --replace, label and verdict imports, rubric publication, exports, people and
    role changes, assignments, calibration fits. See docs/reference.md, "Audit log".
    """
    from review_app.services.audit import audit_entries, audit_line, parse_since

    engine = _engine(db)
    moment = parse_since(since) if since else None
    entries = audit_entries(engine, _operator(), since=moment, by=actor, action=action, limit=limit)
    if as_json:
        _print_json(entries)
        return
    if not entries:
        typer.echo("no audit entries")
    for entry in entries:
        typer.echo(terminal_safe(audit_line(entry)))


# --- serving the app ------------------------------------------------------------------

PortOption = Annotated[int, typer.Option("--port", help="Port to listen on.")]
HostOption = Annotated[
    str, typer.Option("--host", help="Address to listen on (127.0.0.1: this machine only).")
]


def _serve(db: str | None, port: int, host: str) -> None:
    import os

    from review_app.services.database import database_url

    _engine(db)  # migrate (and check the database) before the server starts
    app_path = Path(__file__).resolve().parents[1] / "ui" / "app.py"
    env = dict(os.environ)
    env["REVIEW_APP_DATABASE_URL"] = database_url(db)
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path),
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "viewer",
        # A traceback (file paths, code) never reaches a browser; the server logs it.
        "--client.showErrorDetails",
        "false",
        # A full gc.collect() after every run costs a label key hundreds of ms on a
        # busy machine; Python's own collector still runs.
        "--runner.postScriptGC",
        "false",
    ]
    typer.echo(
        f"Role Review on http://{host}:{port}/  (database: {env['REVIEW_APP_DATABASE_URL']})"
    )
    sys.stdout.flush()
    os.execve(sys.executable, command, env)


@app.command()
def serve(port: PortOption = 8501, host: HostOption = "127.0.0.1", db: DbOption = None) -> None:
    """Serve the review application (Streamlit)."""
    _serve(db, port, host)


@app.command()
def demo(
    port: PortOption = 8501,
    host: HostOption = "127.0.0.1",
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="Only load the sample set; do not start the app.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Load the bundled sample conversations into the database, then serve the app.

    The sample set: 17 conversations over three products (support refunds, an
    interview coach, a travel persona), reviewers ana, ben and chloe, policy owner
    olivia. Loading is idempotent.
    """
    from review_app.services.demo import load_demo
    from review_app.services.people import local_user_name

    engine = _engine(db)
    report = load_demo(engine, _operator(), local_user=local_user_name())
    for line in report.lines():
        typer.echo(line)
    if not no_serve:
        _serve(db, port, host)


# --- backup and restore -----------------------------------------------------------


@app.command()
def backup(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="The backup file to write.")],
    db: DbOption = None,
) -> None:
    """Back up the database: a consistent SQLite snapshot while servers keep running
    (PostgreSQL: prints the pg_dump command to run)."""
    from review_app.services.backup import backup_database

    outcome = backup_database(_operator(), db=db, path=path)
    typer.echo(outcome.message)


@app.command()
def restore(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="A file written by backup.")],
    db: DbOption = None,
) -> None:
    """Restore a backup into the database; the current content is saved first as
    <database>.before-restore (PostgreSQL: prints the pg_restore command to run)."""
    from review_app.services.backup import restore_database

    outcome = restore_database(_operator(), db=db, path=path)
    if outcome.done:
        _engine(db)  # an older backup is migrated now, not by the next command
    typer.echo(outcome.message)


def main() -> None:
    app()
