"""The ``review-app`` application assembled: its commands and groups, each built from its
module only when called (``only``), and the entry point the console script reaches.

Each command opens the database (migrating it on first use) and calls one service
function. Bad input gives one sentence on stderr naming the file, line or field,
and exit code 2; never a traceback (:class:`~review_app.cli.shared.ErrorsAsMessages`).
``review-app inspect`` without ``--help`` never comes here (``review_app.__main__``).
"""

from __future__ import annotations

import copy
import sys
from functools import cache
from importlib import import_module
from typing import Annotated, Any

import typer
from typer.main import get_command_name

from review_app.cli.shared import ErrorsAsMessages
from review_app.version import VERSION


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
        typer.echo(f"review-app {VERSION} ({evaluator_build()})")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Role Review command line."""


# --help lists the commands in this order, then the groups in theirs: (name, module of
# review_app.cli, the function or Typer application there).
COMMANDS = (
    ("inspect", "case_files", "inspect"),
    ("import", "case_files", "import_"),
    ("assign", "reviewers", "assign"),
    ("agreement", "agreement", "agreement"),
    ("drift", "agreement", "drift"),
    ("export", "export", "export"),
    ("audit", "admin", "audit"),
    ("serve", "server", "serve"),
    ("demo", "server", "demo"),
    ("backup", "admin", "backup"),
    ("restore", "admin", "restore"),
)
GROUPS = (
    ("cases", "cases", "cases_app"),
    ("labels", "labels", "labels_app"),
    ("reviewers", "reviewers", "reviewers_app"),
    ("rubrics", "rubrics", "rubrics_app"),
    ("judge", "judge", "judge_app"),
    ("jobs", "jobs", "jobs_app"),
)


def _part(module: str, name: str) -> Any:
    return getattr(import_module(f"review_app.cli.{module}"), name)


def _group_with(group: typer.Typer, command: str | None) -> typer.Typer:
    """``group`` with its subcommand or subgroup ``command`` alone, when it has one of
    that name (Typer builds every command's parameters of a group it is asked to run: a
    tenth of ``judge runs``'s start-up); else ``group`` whole, for its help and errors."""
    if command is None:
        return group
    commands = [info for info in group.registered_commands if _command_name(info) == command]
    groups = [info for info in group.registered_groups if info.name == command]
    if not commands and not groups:
        return group
    trimmed = copy.copy(group)
    trimmed.registered_commands = commands
    trimmed.registered_groups = groups
    return trimmed


def _command_name(info: Any) -> str:
    """The name a registered command is called by (Typer's rule when none was given)."""
    return str(info.name or get_command_name(info.callback.__name__))


@cache
def build_app(only: str | None = None, subcommand: str | None = None) -> typer.Typer:
    """The ``review-app`` application; ``only``: with that one command or group alone
    (what a call of it needs: the other commands' modules, their services and their
    options are neither imported nor built), and of that group ``subcommand`` alone.
    Its help and errors are the whole application's for that command."""
    built = typer.Typer(
        cls=ErrorsAsMessages,
        name="review-app",
        help=(
            "Role Review: human review of chatbot conversations for role adherence. "
            "Deterministic role-contract findings, per-turn labels against versioned "
            "rubrics, inter-rater agreement, LLM-judge calibration and regression-fixture "
            "export."
        ),
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    built.callback()(_root)
    for name, module, function in COMMANDS:
        if only in (None, name):
            built.command(name)(_part(module, function))
    for name, module, group in GROUPS:
        if only in (None, name):
            built.add_typer(_group_with(_part(module, group), subcommand), name=name)
    return built


def __getattr__(name: str) -> Any:
    # ``review_app.cli.application.app``: the whole application (the tests and the docs
    # check walk it)
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main() -> None:
    first = sys.argv[1] if len(sys.argv) > 1 else None
    known = {name for name, _, _ in COMMANDS} | {name for name, _, _ in GROUPS}
    groups = {name for name, _, _ in GROUPS}
    second = sys.argv[2] if first in groups and len(sys.argv) > 2 else None
    subcommand = second if second and not second.startswith("-") else None
    build_app(first if first in known else None, subcommand)()
