"""``review-app rubrics``: the rubric versions, and what changed between two."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from review_app.cli.output import print_json, print_listing
from review_app.cli.shared import DbOption, JsonOption, catalog, open_engine, operator
from review_app.errors import InputError

rubrics_app = typer.Typer(
    help="Rubric versions: list them, show one with its keys, compare two, publish the next.",
    no_args_is_help=True,
)


@rubrics_app.command("list")
def rubrics_list(as_json: JsonOption = False, db: DbOption = None) -> None:
    """Rubric versions: offered (published), labeled (immutable), draft (not published:
    used nowhere), or refused and why."""
    known = catalog(open_engine(db))
    rows = (
        [
            {
                "rubric": ref,
                "status": "labeled" if ref in known.labeled else "offered",
                "title": known.usable[ref].title,
                "sha256": known.usable[ref].sha256,
            }
            for ref in known.refs
        ]
        + [
            {
                "rubric": ref,
                "status": "draft",
                "title": known.drafts[ref].title,
                "sha256": known.drafts[ref].sha256,
            }
            for ref in known.draft_refs
        ]
        + [
            {"rubric": ref, "status": "refused", "reason": why}
            for ref, why in sorted(known.refused.items())
        ]
    )
    print_listing(rows, as_json=as_json, line=_rubric_line)


def _canonical(ref: str) -> str:
    from review_app.rubrics.model import parse_rubric_ref

    rubric_id, version = parse_rubric_ref(ref)
    return f"{rubric_id}@{version}"


def _rubric_line(row: dict[str, str]) -> str:
    return f"{row['rubric']:<28} {row['status']:<8} {row.get('title') or row['reason']}"


@rubrics_app.command("show")
def rubrics_show(
    ref: Annotated[str, typer.Argument(metavar="ID@V", help="The rubric version to show.")],
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """One rubric version: each code with the key that labels with it, its verdict and
    title. A code keeps its key from version to version (key: in the file, else kept)."""
    from review_app.cli.output import terminal_safe
    from review_app.services.rubrics.rubric_keys import rubric_with_keys

    known = catalog(open_engine(db))
    shown = rubric_with_keys(known, known.for_reports(ref))
    if as_json:
        print_json(shown)
        return
    typer.echo(terminal_safe(f"{shown['rubric']}  {shown['title']}"))
    typer.echo("key  code                          verdict     title")
    for label in shown["labels"]:
        typer.echo(
            terminal_safe(
                f"{label['key']:<4} {label['code']:<29} {label['verdict']:<11} {label['title']}"
            )
        )


@rubrics_app.command("diff")
def rubrics_diff(
    old: Annotated[str, typer.Argument(metavar="ID@V", help="The older rubric version.")],
    new: Annotated[str, typer.Argument(metavar="ID@V", help="The newer rubric version.")],
    db: DbOption = None,
) -> None:
    """What changed between two rubric versions, drafts included (JSON); for consecutive
    versions also the mapping: how each newer label relates to the older codes (from:,
    change:)."""
    from review_app.rubrics.diff import diff_rubrics

    known = catalog(open_engine(db))
    print_json(diff_rubrics(known.any_version(old), known.any_version(new)).to_dict())


@rubrics_app.command("publish")
def rubrics_publish(
    ref: Annotated[str, typer.Argument(metavar="ID@V", help="The rubric version to publish.")],
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Show what publishing would carry and queue for re-review; store nothing.",
        ),
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Publish version V (a draft until now): carry labels, gold and judge verdicts of V-1
    whose code kept its meaning (same, reworded); queue the others for their reviewers to
    label again. Policy owners and admins may publish."""
    from review_app.services.rubrics.rubric_carry import publish_rubric

    engine = open_engine(db)
    known = catalog(engine)
    report = publish_rubric(engine, operator(), catalog=known, ref=ref, dry_run=dry_run)
    if as_json:
        print_json(report.to_dict())
    else:
        if dry_run:
            typer.echo(f"dry run: nothing was stored; publishing {_canonical(ref)} would do:")
        for line in report.lines():
            typer.echo(line)


@rubrics_app.command("export")
def rubrics_export(
    ref: Annotated[
        str, typer.Argument(metavar="ID@V", help="The rubric version (published or draft).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write here: a file, or a directory (written as <dir>/<id>/v<V>.yaml). "
            "Default: print the YAML.",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Write a rubric version's YAML (as stored: a draft written in the app, or a published
    version) for version control; it reads back as the same version."""
    from review_app.files.text import holds_text
    from review_app.services.rubrics.rubric_drafts import export_text

    engine = open_engine(db)
    known = catalog(engine)
    text = export_text(engine, operator(), catalog=known, ref=ref)
    if out is None:
        typer.echo(text, nl=False)
        return
    rubric_id, version = _split(ref)
    target = out / rubric_id / f"v{version}.yaml" if out.is_dir() else out
    if target.exists() and not holds_text(target, text):
        raise InputError(
            "the file exists with other content; not overwritten (move it or choose --out)",
            source=str(target),
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {_canonical(ref)} to {target}")


def _split(ref: str) -> tuple[str, int]:
    from review_app.rubrics.model import parse_rubric_ref

    return parse_rubric_ref(ref)
