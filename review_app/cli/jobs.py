"""``review-app jobs``: background jobs (judge runs, reports) — list them, stop one, run a
worker."""

from __future__ import annotations

from typing import Annotated

import typer

from review_app.cli.output import print_json, print_listing, terminal_safe
from review_app.cli.shared import DbOption, JsonOption, open_engine, operator

jobs_app = typer.Typer(
    help="Background jobs (judge runs started with --background or from the judge page, "
    "reports the agreement and judge pages wait for): list them (no subcommand), stop one, "
    "or run a worker in the foreground.",
    invoke_without_command=True,
)


@jobs_app.callback()
def jobs_list(
    ctx: typer.Context,
    as_json: JsonOption = False,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, newest first.")] = 50,
    db: DbOption = None,
) -> None:
    """List background jobs: status, progress (done/total units), who started them."""
    if ctx.invoked_subcommand is not None:
        return
    from review_app.services.jobs.runner import list_jobs

    engine = open_engine(db)
    jobs = list_jobs(engine, operator(), limit=limit)
    if as_json:
        print_json([job.to_dict() for job in jobs])
        return
    print_listing(jobs, as_json=False, line=lambda job: terminal_safe(job.line()), empty="no jobs")


@jobs_app.command("stop")
def jobs_stop(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job's id (review-app jobs).")],
    db: DbOption = None,
) -> None:
    """Stop a job: a queued one at once, a running one within seconds (resumable later)."""
    from review_app.services.jobs.runner import stop_job

    engine = open_engine(db)
    job = stop_job(engine, operator(), job_id=job_id)
    typer.echo(f"job {job.id}: {job.status}")


@jobs_app.command("work")
def jobs_work(
    until_idle: Annotated[
        bool,
        typer.Option("--until-idle", help="Exit when no job is queued or running (else: forever)."),
    ] = False,
    lease_seconds: Annotated[
        float,
        typer.Option(
            "--lease-seconds",
            help="A job whose worker sent no heartbeat for this long is taken over by another.",
        ),
    ] = 60.0,
    poll_seconds: Annotated[
        float, typer.Option("--poll-seconds", help="Seconds between looks for a new job.")
    ] = 2.0,
    db: DbOption = None,
) -> None:
    """Run a job worker in the foreground (serve runs one in each server process)."""
    from review_app.services.job_kinds import ALL_KINDS
    from review_app.services.jobs.runner import run_worker, worker_name

    if lease_seconds <= 0 or poll_seconds <= 0:
        raise typer.BadParameter("--lease-seconds and --poll-seconds are positive")
    engine = open_engine(db)
    owner = worker_name()
    typer.echo(f"worker {owner} on the job queue", err=True)
    ran = run_worker(
        engine,
        owner=owner,
        lease_seconds=lease_seconds,
        poll_seconds=poll_seconds,
        until_idle=until_idle,
        kinds=ALL_KINDS,
        on_claim=lambda job: typer.echo(f"job {job.id}: claimed ({job.kind})", err=True),
    )
    typer.echo(f"worker {owner}: ran {ran} job(s)")


__all__ = ["jobs_app", "print_json"]
