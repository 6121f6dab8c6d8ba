"""SQLModel tables.

Per entity a small family in the manner of SQLModel's full-stack template: a
``Base`` with the shared fields, the ``table=True`` class, and a ``Public`` shape
returned to callers where the table holds more than they need. A ``Public`` shape is a
frozen value with the row's id, not a row: services hand it out after their session
closed (``ReviewerPublic`` from ``people.add_person``, ``JudgeRunPublic`` from
``runs.run_verdicts``), so nothing outside a transaction can change or lazy-load a row.

JSON-valued columns are stored as canonical JSON text (``*_json``), so SQLite and
PostgreSQL hold byte-identical values and exports are deterministic.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    Index,
    String,
    Text,
    event,
    false,
    text,
)
from sqlmodel import Field, SQLModel
from sqlmodel.main import SQLModelConfig

# Pydantic builds a model's validator and serializer when it is first used, not when its
# class is defined (all are defined here): a command that reads one table pays for one,
# not for every table's (issue 38: a command's start-up).
SQLModel.model_config["defer_build"] = True


def utcnow() -> datetime:
    return datetime.now(UTC)


# --- contracts -------------------------------------------------------------


class ContractBase(SQLModel):
    version: str = Field(primary_key=True, max_length=200)
    sha256: str = Field(max_length=64)
    body_json: str = Field(sa_column=Column(Text, nullable=False))


class Contract(ContractBase, table=True):
    """A role contract; immutable once stored (a changed body needs a new version)."""

    __tablename__ = "contracts"
    created_at: datetime = Field(default_factory=utcnow)


# --- cases and their events ------------------------------------------------


class CaseBase(SQLModel):
    case_id: str = Field(primary_key=True, max_length=200)
    chatbot_role: str | None = Field(default=None, sa_column=Column(Text))
    contract_version: str | None = Field(
        default=None, foreign_key="contracts.version", index=True, max_length=200
    )
    n_events: int = 0
    n_assistant_turns: int = 0


class Case(CaseBase, table=True):
    """One recorded conversation. Its events are in ``events``."""

    __tablename__ = "cases"
    __table_args__ = (Index("ix_cases_imported_at", "imported_at"),)
    content_sha256: str = Field(max_length=64)
    source: str | None = Field(default=None, sa_column=Column(Text))
    source_format: str = Field(default="native", max_length=40)
    extra_json: str | None = Field(default=None, sa_column=Column(Text))
    imported_at: datetime = Field(default_factory=utcnow)


class Event(SQLModel, table=True):
    """One transcript event, in list order (``seq``), addressed by ``turn``."""

    __tablename__ = "events"
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    seq: int = Field(primary_key=True)
    turn: int
    actor: str = Field(max_length=20)
    text: str | None = Field(default=None, sa_column=Column(Text))
    actions_json: str | None = Field(default=None, sa_column=Column(Text))
    set_role: str | None = Field(default=None, sa_column=Column(Text))
    request_json: str | None = Field(default=None, sa_column=Column(Text))
    extra_json: str | None = Field(default=None, sa_column=Column(Text))


# --- deterministic findings --------------------------------------------------


class Evaluation(SQLModel, table=True):
    """The evaluator's verdict on a case, one row per evaluator version.

    Keeping the version in the key lets a change of rules be re-run beside the old
    results and compared.
    """

    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_version_lane", "evaluator_version", "lane"),)
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    evaluator_version: str = Field(primary_key=True, max_length=20)
    status: str = Field(max_length=20)
    lane: str = Field(max_length=20)
    first_violation_turn: int | None = None
    diagnostic: str = Field(sa_column=Column(Text, nullable=False))
    role_spans_json: str = Field(sa_column=Column(Text, nullable=False))
    n_fixture_errors: int = 0
    n_violations: int = 0
    n_harness_findings: int = 0
    evaluated_at: datetime = Field(default_factory=utcnow)


class Finding(SQLModel, table=True):
    """One fixture error, violation or harness finding of an evaluation."""

    __tablename__ = "findings"
    __table_args__ = (Index("ix_findings_case_version", "case_id", "evaluator_version"),)
    id: int | None = Field(default=None, primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    evaluator_version: str = Field(max_length=20)
    kind: str = Field(max_length=20)
    code: str = Field(max_length=60)
    turn: int | None = None
    detail_json: str = Field(sa_column=Column(Text, nullable=False))


# --- reviewers, rubrics, assignments, labels -------------------------------

REVIEWER_ROLES = ("reviewer", "policy_owner", "admin")


class ReviewerBase(SQLModel):
    name: str = Field(unique=True, index=True, max_length=200)
    """The sign-in identity, NFC and case-folded (``Ana`` is stored as ``ana``, shown by
    ``display_name``): an e-mail from OIDC, a proxy header value, or a local name."""
    display_name: str | None = Field(default=None, max_length=200)
    role: str = Field(default="reviewer", max_length=20)


class Reviewer(ReviewerBase, table=True):
    __tablename__ = "reviewers"
    id: int | None = Field(default=None, primary_key=True)
    active: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class ReviewerPublic(ReviewerBase):
    """A reviewer as services return them: the row's fields but ``created_at``, frozen."""

    model_config = SQLModelConfig(frozen=True)
    id: int
    active: bool


RUBRIC_STATES = ("draft", "published")
"""A stored rubric version's state: a draft never acts (no labels, no queue, no default);
a published version is offered (docs/reference.md, "Rubric drafts and publication")."""
RUBRIC_ORIGINS = ("file", "app")


class RubricVersion(SQLModel, table=True):
    """A rubric version: a draft (read from a file not yet published, or written in the
    app) or a published version, as it was when published (its YAML text and parsed body).

    A trigger refuses turning a published version back into a draft, and any state but
    ``draft`` and ``published`` (migration 0040)."""

    __tablename__ = "rubric_versions"
    rubric_id: str = Field(primary_key=True, max_length=100)
    version: int = Field(primary_key=True)
    sha256: str = Field(max_length=64)
    title: str = Field(sa_column=Column(Text, nullable=False))
    body_json: str = Field(sa_column=Column(Text, nullable=False))
    source: str | None = Field(default=None, sa_column=Column(Text))
    loaded_at: datetime = Field(default_factory=utcnow)
    state: str = Field(
        default="draft",
        sa_column=Column(String(16), nullable=False, server_default="draft"),
    )
    origin: str = Field(
        default="file", sa_column=Column(String(16), nullable=False, server_default="file")
    )
    """``file`` (read from the rubrics folder) or ``app`` (written in the app)."""
    yaml_text: str | None = Field(default=None, sa_column=Column(Text))
    """The YAML as written (the file's text, or the draft written in the app)."""
    saved_by: str | None = Field(default=None, max_length=200)
    published_at: datetime | None = None
    published_by: str | None = Field(default=None, max_length=200)


class Assignment(SQLModel, table=True):
    """A case in a reviewer's queue for one rubric version, with their progress on it."""

    __tablename__ = "assignments"
    __table_args__ = (
        Index(
            "ux_assignments_reviewer_rubric_case",
            "reviewer_id",
            "rubric_id",
            "rubric_version",
            "case_id",
            unique=True,
        ),
        Index("ix_assignments_rubric_case", "rubric_id", "rubric_version", "case_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    reviewer_id: int = Field(foreign_key="reviewers.id")
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    assigned_by: int | None = Field(default=None, foreign_key="reviewers.id")
    created_at: datetime = Field(default_factory=utcnow)
    labeled_turns: int = 0
    completed_at: datetime | None = None


PARTIAL_INDEX_DIALECTS = ("sqlite", "postgresql")
"""The dialects whose partial indexes the tables declare (``<dialect>_where``)."""


def _one_current_row(name: str, *columns: str) -> Index:
    """A partial unique index: at most one row with ``current`` set per ``columns``.

    Its predicate is kept in ``info["where"]`` and given to a dialect as
    ``<dialect>_where`` by :func:`declare_partial_indexes`, not here: a dialect option
    given at definition loads that dialect's module, and the PostgreSQL dialect cost a
    SQLite command about a tenth of its start-up (issue 38). The migrations create these
    indexes with their own ``sqlite_where``/``postgresql_where``.
    """
    return Index(name, *columns, unique=True, info={"where": "current"})


def declare_partial_indexes(dialect_name: str) -> None:
    """Give the partial indexes their predicate as ``dialect_name``'s option
    (``postgresql_where``, ``sqlite_where``), so that the tables create, compare and
    autogenerate as declared on that dialect; idempotent. Called when a table is created
    from these definitions (``create_all``) and by the migrations' environment."""
    if dialect_name not in PARTIAL_INDEX_DIALECTS:
        return
    for table in SQLModel.metadata.tables.values():
        for index in table.indexes:
            where = index.info.get("where")
            if where is not None and index.dialect_options[dialect_name]["where"] is None:
                index.dialect_options[dialect_name]["where"] = text(where)


def _before_create(_target: object, connection: Connection, **_kw: object) -> None:
    declare_partial_indexes(connection.dialect.name)


class LabelBase(SQLModel):
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    code: str = Field(max_length=100)
    rationale: str | None = Field(default=None, sa_column=Column(Text))


class Label(LabelBase, table=True):
    """One labeling act. Append-only: a change adds a row and marks the old one not current."""

    __tablename__ = "labels"
    __table_args__ = (
        Index("ix_labels_rubric_case_turn", "rubric_id", "rubric_version", "case_id", "turn"),
        Index("ix_labels_reviewer_case", "reviewer_id", "rubric_id", "rubric_version", "case_id"),
        # One current label per reviewer and unit, enforced by the database.
        _one_current_row(
            "ux_labels_current_unit",
            "rubric_id",
            "rubric_version",
            "case_id",
            "turn",
            "reviewer_id",
        ),
        # A label is carried into the next rubric version at most once.
        Index("ux_labels_carried_from", "carried_from_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewers.id")
    current: bool = True
    source: str = Field(default="app", max_length=20)
    created_at: datetime = Field(default_factory=utcnow)
    stale: bool = Field(default=False, sa_column_kwargs={"server_default": false()})
    """Set when ``import --replace`` changed the turn under the label: it stopped being
    current and its reviewer is asked to label the turn again."""
    carried_from_id: int | None = None
    """The label of the previous rubric version this row was carried from (``labels.id``)."""
    carry_id: int | None = None
    """The publication that carried it (``rubric_carries.id``: from which version, when,
    by whom)."""


class LabelEvent(SQLModel, table=True):
    """One key press of the review page, applied once: the browser numbers its key
    presses per page load (``client_id``, ``seq``) and sends them again until the
    server acknowledges them; the unique index makes a second application impossible."""

    __tablename__ = "label_events"
    __table_args__ = (
        Index("ux_label_events_client_seq", "reviewer_id", "client_id", "seq", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewers.id")
    client_id: str = Field(max_length=64)
    seq: int
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    label_id: int | None = Field(default=None, foreign_key="labels.id")
    created_at: datetime = Field(default_factory=utcnow)


# --- adjudication ----------------------------------------------------------------


class GoldLabel(SQLModel, table=True):
    """A policy owner's decision on one unit. Append-only: the latest row is current."""

    __tablename__ = "gold_labels"
    __table_args__ = (
        Index("ix_gold_rubric_case_turn", "rubric_id", "rubric_version", "case_id", "turn"),
        # One current gold label per unit, enforced by the database.
        _one_current_row("ux_gold_current_unit", "rubric_id", "rubric_version", "case_id", "turn"),
        Index("ux_gold_carried_from", "carried_from_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    code: str = Field(max_length=100)
    note: str | None = Field(default=None, sa_column=Column(Text))
    calibration_item: bool = False
    rubric_ambiguity: str | None = Field(default=None, sa_column=Column(Text))
    adjudicator_id: int | None = Field(default=None, foreign_key="reviewers.id")
    current: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    stale: bool = Field(default=False, sa_column_kwargs={"server_default": false()})
    """Set when ``import --replace`` changed the turn under the gold label."""
    carried_from_id: int | None = None
    """The gold label of the previous rubric version it was carried from."""
    carry_id: int | None = None


# --- LLM judge runs --------------------------------------------------------------


class JudgeRunBase(SQLModel):
    judge: str = Field(max_length=200)
    prompt_version: str = Field(max_length=100)
    model: str = Field(max_length=200)
    endpoint: str = Field(default="", max_length=200)
    """Where the model was asked: a configured endpoint's name, ``host:port`` of a
    ``--base-url`` run, empty for imported verdicts (docs/reference.md, "Judge
    endpoints")."""
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    prompt_sha256: str | None = Field(default=None, max_length=64)
    source: str = Field(default="import", max_length=20)
    status: str = Field(default="complete", max_length=20)
    """``running``, ``partial`` (stopped before every unit was asked), ``failed`` (every
    unit failed at the endpoint, nothing answered) or ``complete``."""
    calibration_json: str | None = Field(default=None, sa_column=Column(Text))
    carried_from_run_id: int | None = None
    """The run of the previous rubric version whose verdicts this run carries."""


class JudgeRun(JudgeRunBase, table=True):
    """One judge prompt version with one model at one endpoint, against one rubric version."""

    __tablename__ = "judge_runs"
    __table_args__ = (
        Index(
            "ux_judge_runs_identity",
            "judge",
            "prompt_version",
            "model",
            "endpoint",
            "rubric_id",
            "rubric_version",
            unique=True,
        ),
        Index("ux_judge_runs_carried_from", "carried_from_run_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    params_json: str | None = Field(default=None, sa_column=Column(Text))
    summary_json: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    carry_id: int | None = None


class JudgeRunPublic(JudgeRunBase):
    """A judge run as services return it: no parameters, summary or timestamps, frozen."""

    model_config = SQLModelConfig(frozen=True)
    id: int


class TeamJudge(SQLModel, table=True):
    """A policy owner's choice of the rubric version's judge: a prompt version with its
    model and endpoint (the run it was chosen from). Kept as history: the newest row of a
    rubric version is its current judge; each choice is also in the audit log."""

    __tablename__ = "team_judges"
    __table_args__ = (Index("ix_team_judges_rubric", "rubric_id", "rubric_version", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    judge: str = Field(max_length=200)
    prompt_version: str = Field(max_length=100)
    model: str = Field(max_length=200)
    endpoint: str = Field(default="", max_length=200)
    run_id: int = Field(foreign_key="judge_runs.id")
    chosen_by: str = Field(max_length=200)
    chosen_at: datetime = Field(default_factory=utcnow)


class JudgePromptVersion(SQLModel, table=True):
    """One version of a judge's prompt template for a rubric: ``<judge>@v<version>``.

    Read from ``rubrics/<rubric-id>/judges/<judge>/v<N>.txt`` or created in the app or
    with ``judge prompts create``. Immutable once a run used it: a trigger refuses
    changing its text (or name) while a judge run of that name exists
    (docs/reference.md, "Judge prompt versions")."""

    __tablename__ = "judge_prompts"
    __table_args__ = (
        Index("ux_judge_prompts_version", "rubric_id", "judge", "version", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int | None = None
    """The rubric version it was written for: named when created, else that of its
    first run (empty until then for a prompt read from a file)."""
    judge: str = Field(max_length=200)
    version: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    sha256: str = Field(max_length=64)
    source: str | None = Field(default=None, sa_column=Column(Text))
    """The file it was read from; empty for a version created in the app or the CLI."""
    created_by: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    derived_from_id: int | None = Field(default=None, foreign_key="judge_prompts.id")
    """The version it was derived from (edited from), if any."""


class JudgeVerdict(SQLModel, table=True):
    """The judge's answer on one turn (``turn`` set) or a whole conversation (``turn`` null)."""

    __tablename__ = "judge_verdicts"
    __table_args__ = (
        Index("ix_judge_verdicts_run_case", "run_id", "case_id", "turn"),
        Index("ux_judge_verdicts_carried_from", "carried_from_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="judge_runs.id")
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int | None = None
    label: str | None = Field(default=None, max_length=100)
    score: float | None = None
    reason: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    error_kind: str | None = Field(default=None, max_length=20)
    """``endpoint`` (the endpoint failed: the next run retries) or ``answer`` (kept)."""
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    carried_from_id: int | None = None
    """The verdict of the previous rubric version's run it was carried from."""


# --- rubric carry-over -------------------------------------------------------


class RubricCarry(SQLModel, table=True):
    """One publication of a rubric version: what it carried from the version before.

    Carried rows (labels, gold labels, judge runs and verdicts) point here with
    ``carry_id``; ``summary_json`` holds the counts (docs/reference.md, "Rubric versions:
    mapping and carry-over")."""

    __tablename__ = "rubric_carries"
    __table_args__ = (Index("ix_rubric_carries_rubric", "rubric_id", "to_version"),)
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    from_version: int
    to_version: int
    actor: str = Field(max_length=200)
    at: datetime = Field(default_factory=utcnow)
    summary_json: str = Field(sa_column=Column(Text, nullable=False))


class ReReview(SQLModel, table=True):
    """A unit a reviewer labeled under version N with a code whose meaning changed
    (narrowed, widened, split or merged): they are asked to label it again under N+1."""

    __tablename__ = "re_reviews"
    __table_args__ = (
        # An old label is queued once, however often the version is published.
        Index("ux_re_reviews_old_label", "old_label_id", unique=True),
        Index("ix_re_reviews_reviewer", "reviewer_id", "rubric_id", "rubric_version"),
    )
    id: int | None = Field(default=None, primary_key=True)
    carry_id: int = Field(foreign_key="rubric_carries.id")
    reviewer_id: int = Field(foreign_key="reviewers.id")
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    """The new version the unit is to be labeled under."""
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    old_label_id: int = Field(foreign_key="labels.id")
    old_code: str = Field(max_length=100)


# --- audit log -------------------------------------------------------------


class AuditEntry(SQLModel, table=True):
    """One change (or export) and who made it. Append-only: rows are never updated.

    ``summary_json`` holds canonical JSON of what changed (before/after, counts,
    a file's sha256); it is written in the same transaction as the change.
    """

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_at", "at"),
        Index("ix_audit_log_actor_at", "actor", "at"),
    )
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow)
    actor: str = Field(max_length=200)
    action: str = Field(max_length=60)
    object_type: str = Field(max_length=60)
    object_key: str | None = Field(default=None, sa_column=Column(Text))
    summary_json: str = Field(sa_column=Column(Text, nullable=False))


# --- audit samples ------------------------------------------------------------


class AuditSample(SQLModel, table=True):
    """A uniform random draw of turns to label, so that their gold is a random sample."""

    __tablename__ = "audit_samples"
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    seed: int
    size: int
    population: int
    created_by: int | None = Field(default=None, foreign_key="reviewers.id")
    created_at: datetime = Field(default_factory=utcnow)
    design: str = Field(default="uniform", max_length=20)
    """``uniform`` (a uniform draw without replacement), ``uncertainty`` (each judged
    turn drawn independently with its own probability, from the judge's scores) or
    ``stratified`` (a uniform draw without replacement within each stratum, of a size
    set by Neyman allocation)."""
    run_id: int | None = Field(default=None, foreign_key="judge_runs.id")
    """The judge run whose scores set the probabilities (``uncertainty``), or whose
    verdicts the strata and the allocation came from (``stratified``)."""
    mix: float | None = None
    expected_size: float | None = None
    stratified_by: str | None = Field(default=None, max_length=20)
    """How a ``stratified`` draw (Neyman allocation) split the turns: ``position``,
    ``lane``, ``code`` (the run's code) or ``finding``."""


class AuditUnit(SQLModel, table=True):
    """One drawn turn of an audit sample."""

    __tablename__ = "audit_units"
    sample_id: int = Field(foreign_key="audit_samples.id", primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    turn: int = Field(primary_key=True)
    probability: float | None = None
    """The probability the turn had of being drawn (``uncertainty`` and ``stratified``
    samples)."""
    stratum: str | None = Field(default=None, max_length=200)
    """The stratum it was drawn from (``stratified`` samples)."""


# --- certified selective judging -----------------------------------------------


class CertifiedVerdict(SQLModel, table=True):
    """A judge verdict certified by ``judge route --apply``: the judge decides this unit.

    One routing per rubric version is current: applying again replaces its rows.
    """

    __tablename__ = "certified_verdicts"
    rubric_id: str = Field(primary_key=True, max_length=100)
    rubric_version: int = Field(primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    turn: int = Field(primary_key=True)
    run_id: int = Field(foreign_key="judge_runs.id")
    label: str = Field(max_length=100)
    confidence: float
    threshold: float
    alpha: float
    delta: float
    created_by: int | None = Field(default=None, foreign_key="reviewers.id")
    created_at: datetime = Field(default_factory=utcnow)


# --- background jobs -----------------------------------------------------------------

JOB_STATUSES = ("queued", "running", "stopping", "stopped", "done", "failed")


class BackgroundJob(SQLModel, table=True):
    """Work done off the page's script run (a judge run), by whichever worker claims it.

    A worker claims a queued job, or one whose lease ran out (its worker died), by a
    conditional UPDATE (storage/jobs.py); it renews ``lease_expires_at`` with each
    heartbeat. ``parameters_json`` never holds a secret (an endpoint is named, its key
    is read when the job runs).
    """

    __tablename__ = "background_jobs"
    __table_args__ = (Index("ix_background_jobs_status", "status", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=40)
    parameters_json: str = Field(sa_column=Column(Text, nullable=False))
    created_by: str = Field(max_length=200)
    created_by_id: int | None = Field(default=None, foreign_key="reviewers.id")
    status: str = Field(default="queued", max_length=20)
    progress_done: int = 0
    progress_total: int | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))
    result_json: str | None = Field(default=None, sa_column=Column(Text))
    lease_owner: str | None = Field(default=None, max_length=200)
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    claims: int = 0
    """How many times a worker claimed it (1 unless a worker died and another resumed)."""
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


# --- computed reports ----------------------------------------------------------


class ComputedReport(SQLModel, table=True):
    """A heavy report (agreement, judge calibration, drift, ...) computed for one state of
    the data it reads, shared by every session and every server on the database.

    ``key`` names the report: its kind, rubric version and parameters (the bootstrap's
    resamples among them: the point figures and the figures with intervals are two
    rows). ``token`` is the state of the data it was computed for (labels, gold labels,
    verdicts, rubric content, ...); a reader whose current token differs gets the report
    computed again (at once, or by a background job while the page shows this row's
    older figures) and the row replaced (review_app/services/reports/report_store.py).
    """

    __tablename__ = "computed_reports"
    key: str = Field(primary_key=True, max_length=500)
    kind: str = Field(max_length=40)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    token: str = Field(sa_column=Column(Text, nullable=False))
    payload_json: str = Field(sa_column=Column(Text, nullable=False))
    seconds: float = 0.0
    """How long computing it took: a page computes a report at once only if that was quick."""
    computed_at: datetime = Field(default_factory=utcnow)


# --- suggesting a prompt (judge align) -------------------------------------------


class ConfirmationSet(SQLModel, table=True):
    """Gold units of a rubric version set aside to confirm a suggested prompt: no
    optimiser ever sees them (docs/reference.md, "Suggesting a prompt").

    The first ``judge align`` of a rubric version draws it (whole conversations,
    stratified by the gold verdict); later align jobs and hand comparisons test on the
    same units and spend its error budget (``confirmation_tests``) until it is spent;
    then a fresh one is drawn from gold no optimiser has seen."""

    __tablename__ = "confirmation_sets"
    __table_args__ = (
        Index("ix_confirmation_sets_rubric", "rubric_id", "rubric_version", "id"),
        CheckConstraint("alpha > 0 AND alpha < 1", name="ck_confirmation_sets_alpha"),
        CheckConstraint("max_tests >= 1", name="ck_confirmation_sets_max_tests"),
    )
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    units_json: str = Field(sa_column=Column(Text, nullable=False))
    """``[[case_id, turn], ...]``, sorted."""
    units_sha256: str = Field(max_length=64)
    alpha: float
    """The set's whole error budget (the test levels of its tests sum below it)."""
    max_tests: int
    source: str = Field(max_length=40)
    """``split`` (drawn from the gold when the first align job started) or ``fresh``
    (drawn from gold no optimiser saw, once an earlier set's budget was spent)."""
    created_by: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class ConfirmationTest(SQLModel, table=True):
    """One test on a confirmation set: the share of its error budget it spent.

    ``number`` is unique per set (the database refuses two tests in one slot, so two
    jobs cannot both spend the same share), and an align job spends at most once."""

    __tablename__ = "confirmation_tests"
    __table_args__ = (
        Index("ux_confirmation_tests_number", "set_id", "number", unique=True),
        Index("ux_confirmation_tests_job", "set_id", "job_id", unique=True),
        CheckConstraint("number >= 1", name="ck_confirmation_tests_number"),
        CheckConstraint("alpha_spent > 0 AND alpha_spent < 1", name="ck_confirmation_tests_alpha"),
    )
    id: int | None = Field(default=None, primary_key=True)
    set_id: int = Field(foreign_key="confirmation_sets.id")
    number: int
    alpha_spent: float
    p_value: float | None = None
    kind: str = Field(max_length=20)
    """``align`` (an align job's confirmation) or ``compare`` (a comparison by hand)."""
    job_id: int | None = Field(default=None, foreign_key="background_jobs.id")
    first: str = Field(max_length=200)
    """The version tested against (the starting one)."""
    second: str = Field(max_length=200)
    verdict: str = Field(max_length=40)
    created_by: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class AlignCandidate(SQLModel, table=True):
    """A prompt version an align job's optimiser proposed, with its score on the
    optimisation set (the share of the units it was judged on whose code matched gold)."""

    __tablename__ = "align_candidates"
    __table_args__ = (Index("ux_align_candidates_job_prompt", "job_id", "prompt_id", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="background_jobs.id")
    prompt_id: int = Field(foreign_key="judge_prompts.id")
    optimisation_score: float | None = None
    scored_units: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class AlignProposal(SQLModel, table=True):
    """The optimiser's answer to one reflection request of an align job, kept so that a
    resumed job replays it instead of asking again."""

    __tablename__ = "align_proposals"
    __table_args__ = (Index("ux_align_proposals_request", "job_id", "request_sha256", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="background_jobs.id")
    request_sha256: str = Field(max_length=64)
    answer: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


for _table in SQLModel.metadata.tables.values():
    if any("where" in index.info for index in _table.indexes):
        event.listen(_table, "before_create", _before_create)
