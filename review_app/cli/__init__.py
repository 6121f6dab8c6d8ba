"""The ``review-app`` command line: thin commands over the services.

Each command opens the database (migrating it on first use) and calls one service
function. Bad input gives one sentence on stderr naming the file, line or field,
and exit code 2; never a traceback (:class:`~review_app.cli.shared.ErrorsAsMessages`).

This module assembles the application; the commands live in one module per concern.
``review-app inspect`` without ``--help`` never comes here (``review_app.__main__``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from review_app import __version__
from review_app.cli import (
    admin,
    agreement,
    case_files,
    cases,
    export,
    jobs,
    judge,
    labels,
    reviewers,
    rubrics,
    server,
)
from review_app.cli.shared import ErrorsAsMessages

__all__ = ["app", "main"]

app = typer.Typer(
    cls=ErrorsAsMessages,
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


def evaluator_build() -> str:
    """How the evaluator runs here: ``evaluator compiled with mypyc``, or ``evaluator in
    pure Python`` with the reason the install recorded (hatch_build.py: no compiler, no
    headers, mypyc failed, or asked for)."""
    from review_app.evaluator import compiled

    if compiled():
        return "evaluator compiled with mypyc"
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        note = distribution("role-review").read_text("extra_metadata/evaluator-build.txt")
    except (PackageNotFoundError, OSError):
        note = None
    note = (note or "").strip()
    # The installed build may be compiled while this process runs a checkout's source.
    return note if note.startswith("evaluator in pure Python (") else "evaluator in pure Python"


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"review-app {__version__} ({evaluator_build()})")
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


# --help lists the commands in this order, then the groups in theirs.
app.command()(case_files.inspect)
app.command("import")(case_files.import_)
app.command()(reviewers.assign)
app.command()(agreement.agreement)
app.command()(agreement.drift)
app.command()(export.export)
app.command()(admin.audit)
app.command()(server.serve)
app.command()(server.demo)
app.command()(admin.backup)
app.command()(admin.restore)
app.add_typer(cases.cases_app, name="cases")
app.add_typer(labels.labels_app, name="labels")
app.add_typer(reviewers.reviewers_app, name="reviewers")
app.add_typer(rubrics.rubrics_app, name="rubrics")
app.add_typer(judge.judge_app, name="judge")
app.add_typer(jobs.jobs_app, name="jobs")


def main() -> None:
    app()
