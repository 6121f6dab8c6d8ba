"""What every command uses: the exit codes of bad input, the shared options, the database
and the operator the command line acts as."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from review_app.errors import DatabaseBusy, InputError, NotFound, PermissionDenied


def _absent_values_without_adapters() -> None:
    """Typer (0.29 and later) builds a pydantic ``TypeAdapter`` for an option of the
    invoked command before coercing its value, even when the option was not given (its
    default ``None``): that imports pydantic's validation machinery, about a tenth of a
    light command's start-up (``reviewers list``). An absent value is given what Typer's
    own coercion gives it (``None``, or ``()`` for an option taking several values)
    without one, as is a default already of its option's plain type (``--limit``'s 50 for
    an ``int``: what the coercion would return); the required check and the callback run
    as before. Given values go through Typer's coercion unchanged."""
    parameter: Any = getattr(typer.core, "_TyperParameter", None)
    if parameter is None or not hasattr(parameter, "get_runtime_param"):
        return  # an older Typer: click's own types, nothing to skip
    typer_process_value = parameter.process_value

    def process_value(self: Any, ctx: Any, value: Any) -> Any:
        if value is not None and not _plain_default(self, ctx, value):
            return typer_process_value(self, ctx, value)
        if value is None:
            value = () if self.multiple or self.nargs == -1 else None
        if self.required and self.value_is_missing(value):
            from typer._click.exceptions import MissingParameter

            raise MissingParameter(ctx=ctx, param=self)
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value

    parameter.process_value = process_value


def _plain_default(parameter: Any, ctx: Any, value: Any) -> bool:
    """Whether ``value`` is the option's own default and already of its plain type."""
    from typer._click.core import ParameterSource

    annotation = getattr(getattr(parameter, "type_descriptor", None), "annotation", None)
    return (
        annotation in (int, float, str, bool)
        and type(value) is annotation
        and not parameter.multiple
        and ctx.get_parameter_source(parameter.name) is ParameterSource.DEFAULT
    )


_absent_values_without_adapters()

EXIT_BAD_INPUT = 2
EXIT_FORBIDDEN = 3
EXIT_BUSY = 4
EXIT_DATABASE = 5

USER_ERRORS = (InputError, NotFound, PermissionDenied, DatabaseBusy)


class ErrorsAsMessages(TyperGroup):
    """Every command's bad input as one line on stderr and an exit code, never a traceback.

    ``InputError`` and ``NotFound`` exit with 2, ``PermissionDenied`` with 3,
    ``DatabaseBusy`` with 4 (the one place that maps them, as sqlite-utils does with
    ``click.ClickException``; docs/reference.md "Exit codes").
    """

    def invoke(self, ctx: Any) -> Any:  # Typer's own (vendored) click.Context
        from sqlalchemy.exc import DBAPIError

        try:
            return super().invoke(ctx)
        except USER_ERRORS as error:
            raise exit_for(error) from None
        except DBAPIError as error:
            # Anything else the database refused: its own first line, never the SQL, the
            # parameters or SQLAlchemy's link (the transaction was rolled back).
            raise fail(database_refusal(error), EXIT_DATABASE) from None


def exit_for(error: Exception) -> typer.Exit:
    """The error's sentence on stderr; the exit carrying its code."""
    if isinstance(error, PermissionDenied):
        return fail(str(error), EXIT_FORBIDDEN)
    if isinstance(error, DatabaseBusy):
        return fail(str(error), EXIT_BUSY)
    return fail(str(error), EXIT_BAD_INPUT)


def database_refusal(error: Exception) -> str:
    """One sentence for an error the database raised: the driver's first line only."""
    original = getattr(error, "orig", None) or error
    first = (str(original).strip().splitlines() or [type(original).__name__])[0]
    return f"the database refused this command ({first}); nothing of it was stored"


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


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
RubricOption = Annotated[
    str, typer.Option("--rubric", metavar="ID@V", help="Rubric version, e.g. role-adherence@1.")
]
PortOption = Annotated[int, typer.Option("--port", help="Port to listen on.")]
HostOption = Annotated[
    str, typer.Option("--host", help="Address to listen on (127.0.0.1: this machine only).")
]


def open_engine(db: str | None) -> Any:
    """The database of ``--db``, migrated on first use."""
    from review_app.services.operations.database import open_database

    try:
        return open_database(db)
    except Exception as error:  # an unreachable server or a bad URL is the user's input
        if isinstance(error, InputError):
            raise
        raise InputError(f"cannot open the database: {_short(error)}", field="--db") from None


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def operator() -> Any:
    """The command line acts as the operator: an admin, recorded as ``operator``."""
    from review_app.services.access.actors import operator_actor

    return operator_actor()


def catalog(engine: Any) -> Any:
    """The rubric versions: the rubric files read, new content stored."""
    from review_app.services.rubrics.rubric_catalog import sync_rubrics

    return sync_rubrics(engine, operator())
