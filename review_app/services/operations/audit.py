"""The audit log as its readers see it: who changed or exported what, and when.

Services write entries with :func:`storage.audit.add_entry` inside the transaction of
the change they record; this module reads them (policy owners and admins). The format
is described in docs/reference.md, "Audit log".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
from review_app.services.access.actors import Actor, authorize
from storage import audit
from storage.engine import read_only
from storage.models import AuditEntry

ACTIONS = (
    "label",
    "labels_import",
    "gold",
    "cases_import",
    "cases_replace",
    "rubric_publish",
    "rubric_draft",
    "rubric_carry",
    "export",
    "person_add",
    "person_signin_create",
    "role_change",
    "person_deactivate",
    "person_reactivate",
    "assign",
    "audit_sample",
    "judge_route",
    "verdicts_import",
    "judge_run",
    "judge_prompt",
    "calibration_fit",
    "backup",
    "restore",
    "job_start",
    "job_stop",
    "team_judge",
)


def parse_since(text: str) -> datetime:
    """An ISO 8601 date or timestamp; without a zone it is UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            f"--since {text!r} is not an ISO 8601 date or time (e.g. 2026-11-30T09:00)",
            field="--since",
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(frozen=True)
class AuditRecord:
    """One entry of the audit log as its readers see it (docs/reference.md, "Audit log")."""

    id: int
    at: str
    """When, in UTC, ISO 8601 to the second."""
    actor: str
    action: str
    """One of :data:`ACTIONS`."""
    object_type: str
    object: str | None
    """The key of the object changed or exported (a rubric reference, a name, a case id)."""
    summary: dict[str, Any]
    """What changed, as the service recorded it (JSON)."""

    def to_dict(self) -> dict[str, Any]:
        """What ``audit --json`` prints for the entry."""
        return asdict(self)


def audit_entries(
    engine: Engine,
    actor: Actor,
    *,
    since: datetime | None = None,
    by: str | None = None,
    action: str | None = None,
    limit: int | None = None,
) -> list[AuditRecord]:
    """Audit entries, newest first (policy owners and admins)."""
    authorize(engine, actor, "policy_owner")
    if action is not None and action not in ACTIONS:
        raise InputError(
            f"unknown action {action!r}; choose one of {', '.join(ACTIONS)}", field="--action"
        )
    with Session(read_only(engine)) as session:
        rows = audit.list_entries(session, since=since, actor=by, action=action, limit=limit)
        return [_record(row) for row in rows]


def _record(row: AuditEntry) -> AuditRecord:
    assert row.id is not None
    return AuditRecord(
        id=row.id,
        at=_utc(row.at).isoformat(timespec="seconds"),
        actor=row.actor,
        action=row.action,
        object_type=row.object_type,
        object=row.object_key,
        summary=json.loads(row.summary_json),
    )


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def audit_line(entry: AuditRecord) -> str:
    """One entry as one line of plain text (the caller escapes it for its medium)."""
    summary = json.dumps(entry.summary, sort_keys=True, ensure_ascii=False)
    return (
        f"{entry.at}  {entry.actor}  {entry.action}  "
        f"{entry.object_type} {entry.object or '-'}  {summary}"
    )
