"""Heavy reports computed once per state of the data they read, shared by every server.

The agreement dashboard, the judge calibration report, the drift report, a run's
break-rate estimate (overall and by stratum) and coverage curve, the disagreement queue,
the few-shot material, reviewer reliability and agreement over time read every label,
gold label or verdict of a rubric version: at team scale (100,000 conversations)
seconds to a minute. Each is stored in the reports table
(storage/reports.py) under its key (kind, rubric version, parameters) with the *data
token* it was computed for: the counts and highest ids of the labels, gold labels,
verdicts and audit samples it reads, the cases' import stamp, the rubric's content hash
(and the version before's, where the report compares the two) and a hash of the code
computing it. Every call checks the actor first (policy owners and admins).

A page gets the stored report when its token is current. Otherwise:

- computed at once, when computing it last took at most :data:`WAIT_SECONDS_ENV`
  (default 2 s) and the page run has that much left of its budget
  (:data:`PAGE_SECONDS_ENV`, default 1.5 s for all its reports together, reports of at
  most :data:`ALWAYS_SECONDS` or of at most :data:`INLINE_ROWS_ENV` rows always
  fitting: :func:`page_budget`),
  or, never computed, it has no intervals or reads at most :data:`INLINE_ROWS_ENV` rows
  (default 5,000);
- else, for a report with bootstrap intervals (agreement, judge report, drift): its
  point figures (0 resamples) at once when they fit in the same limits, and a report job
  (review_app/services/jobs/runner.py, one per key and token) computes and stores the
  figures with intervals;
- else, when the report is one a page only reads and figures of it are stored: the
  figures last computed (``stale``, from before the change) while a report job computes
  the current ones. So no page waits on a report it has figures of: after a change each
  part shows its last figures at once, and is replaced when its job has stored it.

:func:`intervals_ready` tells a waiting page when to draw again. docs/reference.md,
"Computed reports".
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import review_app
import storage.audit_samples
import storage.cases
import storage.judging
import storage.units
from review_app.errors import DatabaseBusy, InputError
from review_app.evaluator import EVALUATOR_VERSION
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.jobs.runner import (
    Heartbeat,
    JobKind,
    JobOutcome,
    JobView,
    register_job_kind,
)
from review_app.services.judging.drift import DriftReport, drift_report
from review_app.services.judging.estimate import BreakRateEstimate, break_rate_estimate
from review_app.services.judging.judge_report import (
    FewShotExample,
    JudgeCalibrationReport,
    calibration_report,
    few_shot_material,
)
from review_app.services.judging.run_defaults import run_choices
from review_app.services.judging.selective import CoverageCurve, coverage_curve
from review_app.services.judging.strata import StratifiedBlock, stratified_estimate
from review_app.services.labels.adjudication import DisagreementUnit, disagreement_queue
from review_app.services.operations.page_run import token_part
from review_app.services.reports.report_jobs import (
    REPORT_JOB,
    latest_report_job,
    prune_report_jobs,
    queue_report_job,
)
from review_app.services.review.agreement_reports import DashboardData, dashboard_data
from review_app.services.review.reliability import (
    OverTimeReport,
    ReliabilityReport,
    agreement_over_time_report,
    reliability_report,
)
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import reports
from storage.engine import read_only

log = logging.getLogger(__name__)

T = TypeVar("T")

INLINE_ROWS_ENV = "REVIEW_APP_REPORT_INLINE_ROWS"
DEFAULT_INLINE_ROWS = 5_000
"""A report never computed before that reads at most this many labels, gold labels and
verdicts gets its intervals at once (well under a second); a larger one its point
figures at once and its intervals from a background job."""
WAIT_SECONDS_ENV = "REVIEW_APP_REPORT_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 2.0
"""A page computes a report at once when computing it last took at most this long."""
PAGE_SECONDS_ENV = "REVIEW_APP_REPORT_PAGE_SECONDS"
DEFAULT_PAGE_SECONDS = 1.5
"""One run of a page computes its reports at once for at most this long in all (those
computed last within it, in the page's order); the others show their last figures."""
ALWAYS_SECONDS = 0.25
"""A report that took at most this long last time is computed at once whatever is left
of the page's budget (the demo's, a small team's: the page shows current figures)."""

AGREEMENT = "agreement"
JUDGE_REPORT = "judge_report"
DRIFT = "drift"
ESTIMATE = "estimate"
COVERAGE = "coverage"
DISAGREEMENTS = "disagreements"
FEW_SHOT = "few_shot"
RELIABILITY = "reliability"
OVER_TIME = "over_time"
STRATA = "strata"


# --- the payload: JSON that gives back the very objects stored -------------------------

_DATACLASSES: dict[str, type] = {cls.__name__: cls for cls in (DashboardData, DisagreementUnit)}
"""The dataclasses a stored report may hold (by name: nothing else is ever built)."""


def encode_report(value: Any) -> str:
    """``value`` as JSON text that :func:`decode_report` turns back into an equal object
    of the same types: tuples, dictionaries with keys other than strings, the
    registered dataclasses and datetimes are tagged (``{"$tuple": [...]}``, ...);
    floats keep every bit (NaN and infinities included). numpy scalars are stored as the
    Python numbers they equal. Anything else is refused (``TypeError``)."""
    return json.dumps(_encoded(value), separators=(",", ":"), ensure_ascii=False)


def decode_report(text: str) -> Any:
    """The object :func:`encode_report` stored."""
    return _decoded(json.loads(text))


def _encoded(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, list):
        return [_encoded(item) for item in value]
    if isinstance(value, tuple):
        return {"$tuple": [_encoded(item) for item in value]}
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("$") for key in value):
            return {key: _encoded(item) for key, item in value.items()}
        return {"$items": [[_encoded(key), _encoded(item)] for key, item in value.items()]}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and _DATACLASSES.get(name) is type(value):
        fields = {f.name: _encoded(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$dataclass": [name, fields]}
    raise TypeError(f"a report holds a {name}, which the reports table does not store")


def _decoded(value: Any) -> Any:
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "$tuple":
            return tuple(_decoded(item) for item in inner)
        if tag == "$items":
            return {_decoded(key): _decoded(item) for key, item in inner}
        if tag == "$datetime":
            return datetime.fromisoformat(inner)
        if tag == "$dataclass":
            name, fields = inner
            return _DATACLASSES[name](**{key: _decoded(item) for key, item in fields.items()})
    return {key: _decoded(item) for key, item in value.items()}


# --- the data token ------------------------------------------------------------------


@cache
@functools.cache
def code_version() -> str:
    """A hash of the code that computes reports (the package without its faces): a
    report stored by another version of it is computed again. Read once per process:
    the process runs the code it imported, and every report accessor of every page
    rerun asks for it."""
    root = Path(review_app.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in ("ui", "cli"):
            continue
        digest.update(str(relative).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class _Kind:
    reads: frozenset[str]
    """Besides labels, gold labels, cases and the rubric: ``judge`` (verdicts and runs),
    ``audit`` (audit samples), ``previous`` (the version before, compared side by side)."""
    resamples: int | None
    """The bootstrap resamples of the figures with intervals; ``None``: it has none."""
    stale_ok: bool
    """Whether a page may show its figures from before the latest change while a job
    computes the current ones (reports a page only reads; not a queue it works through)."""
    compute: Callable[[Engine, Actor, Rubric, Rubric | None, dict[str, Any], int], Any]


# The seconds a page run may still spend computing reports at once (a one-item list, so
# the run's calls share it); ``None`` outside a page run: no limit but each report's own.
_PAGE_BUDGET: ContextVar[list[float] | None] = ContextVar("page_budget", default=None)


@contextmanager
def page_budget(seconds: float | None = None) -> Iterator[None]:
    """Inside this block (one run of a page) the reports computed at once take at most
    ``seconds`` in all (default :func:`page_seconds`): a report whose last computation
    would not fit in what is left shows its last figures while a job computes it. A page
    showing six reports waits for at most one budget, not six."""
    token = _PAGE_BUDGET.set([page_seconds() if seconds is None else seconds])
    try:
        yield
    finally:
        _PAGE_BUDGET.reset(token)


def _affordable(seconds: float) -> bool:
    """Whether a report that took ``seconds`` last time may be computed at once."""
    left = _PAGE_BUDGET.get()
    return seconds <= wait_seconds() and (
        left is None or seconds <= max(left[0], min(ALWAYS_SECONDS, wait_seconds()))
    )


def _spend(seconds: float) -> None:
    left = _PAGE_BUDGET.get()
    if left is not None:
        left[0] -= seconds


def _data_token(
    engine: Engine, *, rubric: Rubric, previous: Rubric | None, reads: frozenset[str]
) -> str:
    """The token of the data a report reads (text), from one read transaction (its parts
    agree with one another); a few index searches, milliseconds at team scale. Inside
    :func:`~review_app.services.operations.page_run.one_token_read` the parts read earlier
    in the run are reused (a report computed after them reads at least the data they
    count)."""
    parts: dict[str, Any] = {
        "code": code_version(),
        "evaluator": EVALUATOR_VERSION,
        "rubric": [rubric.ref, rubric.sha256],
    }
    # The transaction begins at the first part not known yet: none when all are.
    with Session(read_only(engine)) as session:

        def part(name: str, read: Callable[..., Any], version: Rubric | None = None) -> Any:
            return token_part(engine, session, name, read, version)

        def version_parts(version: Rubric) -> dict[str, Any]:
            found: dict[str, Any] = {"labels": part("labels", storage.units.label_token, version)}
            if "judge" in reads:
                found["judge"] = part("judge", storage.judging.verdicts_token, version)
            return found

        parts.update(version_parts(rubric))
        if "audit" in reads:
            parts["audit"] = part("audit", storage.audit_samples.audit_token, rubric)
        if "previous" in reads and previous is not None:
            parts["previous"] = {
                "rubric": [previous.ref, previous.sha256],
                **version_parts(previous),
            }
        parts["cases"] = part("cases", storage.cases.cases_token)
    return json.dumps(parts, separators=(",", ":"), sort_keys=True)


def _rows_read(engine: Engine, *, rubric: Rubric, reads: frozenset[str]) -> int:
    """How many labels, gold labels and verdicts of the version a report reads."""
    with Session(read_only(engine)) as session:
        labels = storage.units.label_token(session, rubric_id=rubric.id, version=rubric.version)
        verdicts = (
            storage.judging.judge_token(session, rubric_id=rubric.id, version=rubric.version)[2]
            if "judge" in reads
            else 0
        )
    return labels[0] + labels[2] + verdicts


# --- the kinds of report -----------------------------------------------------------------
# Each compute looks its function up when called (tests count the calls).


def _agreement(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> DashboardData:  # fmt: skip
    return dashboard_data(engine, actor, rubric=rubric, n_resamples=resamples, previous=previous)


def _judge(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> JudgeCalibrationReport:  # fmt: skip
    return calibration_report(
        engine, actor, rubric=rubric, n_resamples=resamples, previous=previous
    )


def _drift(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> DriftReport:  # fmt: skip
    return drift_report(
        engine, actor, rubric=rubric, run_id=parameters["run"], n_resamples=resamples
    )


def _estimate(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> BreakRateEstimate:  # fmt: skip
    return break_rate_estimate(engine, actor, rubric=rubric, run_id=parameters["run"])


def _coverage(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> CoverageCurve:  # fmt: skip
    return coverage_curve(
        engine, actor, rubric=rubric, run_ids=[parameters["run"]], delta=parameters["delta"],
        alphas=list(parameters["alphas"]), min_units=parameters["min_units"],
    )  # fmt: skip


def _disagreements(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> list[DisagreementUnit]:  # fmt: skip
    return disagreement_queue(
        engine, actor, rubric=rubric, include_adjudicated=parameters["include_adjudicated"]
    )


def _few_shot(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> list[FewShotExample]:  # fmt: skip
    return few_shot_material(engine, actor, rubric=rubric, run_id=parameters["run"])


def _reliability(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> ReliabilityReport:  # fmt: skip
    return reliability_report(engine, actor, rubric=rubric, n_resamples=resamples)


def _over_time(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> OverTimeReport:  # fmt: skip
    return agreement_over_time_report(engine, actor, rubric=rubric)


def _strata(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None,
    parameters: dict[str, Any], resamples: int,
) -> StratifiedBlock:  # fmt: skip
    return stratified_estimate(
        engine, actor, rubric=rubric, run_id=parameters["run"], by=parameters["by"],
        n_resamples=resamples,
    )  # fmt: skip


KINDS: dict[str, _Kind] = {
    AGREEMENT: _Kind(frozenset({"previous"}), 500, True, _agreement),
    JUDGE_REPORT: _Kind(frozenset({"judge", "previous"}), 500, True, _judge),
    DRIFT: _Kind(frozenset({"judge"}), 300, True, _drift),
    ESTIMATE: _Kind(frozenset({"judge", "audit"}), None, True, _estimate),
    COVERAGE: _Kind(frozenset({"judge", "audit"}), None, True, _coverage),
    DISAGREEMENTS: _Kind(frozenset(), None, False, _disagreements),
    FEW_SHOT: _Kind(frozenset({"judge"}), None, True, _few_shot),
    RELIABILITY: _Kind(frozenset(), 200, True, _reliability),
    OVER_TIME: _Kind(frozenset({"previous"}), None, True, _over_time),
    STRATA: _Kind(frozenset({"judge", "audit"}), 300, True, _strata),
}
"""Report kind -> what it reads, its bootstrap resamples, how it is computed."""


def report_key(kind: str, rubric: str, parameters: dict[str, Any]) -> str:
    """``<kind> <rubric id>@<version> <parameters as canonical JSON>``."""
    return f"{kind} {rubric} {json.dumps(parameters, sort_keys=True, separators=(',', ':'))}"


# --- reading and storing ---------------------------------------------------------------

_RECENT_MAX = 32
_recent: weakref.WeakKeyDictionary[Engine, OrderedDict[tuple[str, str], str]] = (
    weakref.WeakKeyDictionary()
)
_recent_lock = threading.Lock()
"""Per engine (one per server process and database): the payloads this process read or
stored last, so a page's reruns skip the database read (and :data:`_values` the decoding)."""


def _remember(engine: Engine, key: str, token: str, payload: str) -> None:
    with _recent_lock:
        recent = _recent.setdefault(engine, OrderedDict())
        recent[(key, token)] = payload
        recent.move_to_end((key, token))
        while len(recent) > _RECENT_MAX:
            recent.popitem(last=False)


def _fetch(engine: Engine, key: str, token: str) -> str | None:
    with _recent_lock:
        recent = _recent.get(engine)
        payload = None if recent is None else recent.get((key, token))
    if payload is not None:
        return payload
    with Session(read_only(engine)) as session:
        payload = reports.stored_payload(session, key=key, token=token)
    if payload is not None:
        _remember(engine, key, token, payload)
    return payload


_MISSING = object()

_VALUES_MAX = 16
_values: weakref.WeakKeyDictionary[Engine, OrderedDict[tuple[str, str], Any]] = (
    weakref.WeakKeyDictionary()
)
"""Per engine: the reports this process decoded last, by key and token. A page's rerun
gets the object decoded at its first read (decoding a report of every unit where two
raters differ takes a tenth of a second at 2,000 labeled conversations, and the
adjudication page asks for it up to four times a run): shared between sessions, so the
pages treat a report as read-only."""


def _read(engine: Engine, key: str, token: str) -> Any:
    """The report stored for ``key`` and ``token``, else :data:`_MISSING`."""
    with _recent_lock:
        known = _values.get(engine)
        if known is not None and (key, token) in known:
            known.move_to_end((key, token))
            return known[(key, token)]
    payload = _fetch(engine, key, token)
    if payload is None:
        return _MISSING
    try:
        value = decode_report(payload)
    except (KeyError, TypeError, ValueError):  # not readable: computed again
        log.warning("report %s could not be read back; computing it again", key)
        return _MISSING
    with _recent_lock:
        known = _values.setdefault(engine, OrderedDict())
        known[(key, token)] = value
        while len(known) > _VALUES_MAX:
            known.popitem(last=False)
    return value


def _computed(
    engine: Engine,
    actor: Actor,
    *,
    kind: str,
    rubric: Rubric,
    previous: Rubric | None,
    parameters: dict[str, Any],
    resamples: int,
    key: str,
    token: str,
) -> Any:
    """Compute the report and store it for ``token`` (replacing the row of ``key``)."""
    started = time.perf_counter()
    value = KINDS[kind].compute(engine, actor, rubric, previous, parameters, resamples)
    seconds = time.perf_counter() - started
    _spend(seconds)
    payload = encode_report(value)
    try:
        with Session(engine) as session:
            reports.store_report(
                session,
                key=key,
                kind=kind,
                rubric_id=rubric.id,
                rubric_version=rubric.version,
                token=token,
                payload_json=payload,
                seconds=round(seconds, 3),
                now=datetime.now(UTC),
            )
            session.commit()
    except DatabaseBusy:  # the report is right; the next reader computes it again
        log.warning("report %s not stored: the database is busy", key)
    _remember(engine, key, token, payload)
    return value


def inline_rows() -> int:
    """A report never computed before gets its intervals at once when it reads at most
    this many labels, gold labels and verdicts."""
    given = os.environ.get(INLINE_ROWS_ENV, "").strip()
    return int(given) if given else DEFAULT_INLINE_ROWS


def wait_seconds() -> float:
    """A page computes a report at once when computing it took at most this long last
    time."""
    given = os.environ.get(WAIT_SECONDS_ENV, "").strip()
    return float(given) if given else DEFAULT_WAIT_SECONDS


def page_seconds() -> float:
    """One run of a page computes its reports at once for at most this long in all."""
    given = os.environ.get(PAGE_SECONDS_ENV, "").strip()
    return float(given) if given else DEFAULT_PAGE_SECONDS


@dataclass(frozen=True)
class Shown(Generic[T]):
    """A report as a page shows it, and whether newer figures are on their way."""

    value: T
    status: str
    """``current``: the figures of the data as it is (with intervals, for reports that
    have them). ``computing``: the point figures of the data as it is; a background job
    computes the intervals. ``stale``: the figures computed at ``computed_at``, before
    the latest change of the data; a background job computes the current ones.
    ``failed``: the point figures; the job computing the intervals failed (``error``)."""
    waiting: dict[str, Any] | None = None
    """While ``computing`` or ``stale``: the job's parameters, for :func:`intervals_ready`."""
    error: str | None = None
    computed_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.status in ("computing", "stale")


def _code_of(token: str) -> str | None:
    try:
        return str(json.loads(token)["code"])
    except (ValueError, KeyError, TypeError):
        return None


def _shown(
    engine: Engine,
    actor: Actor,
    *,
    kind: str,
    rubric: Rubric,
    previous: Rubric | None = None,
    parameters: dict[str, Any] | None = None,
) -> Shown[Any]:
    """The report for the page: the stored one if it is current; else its stored point
    figures while a job computes the intervals; else computed at once if that was quick
    last time (or, never computed, it has no intervals or the data is small); else, for
    a report a page only reads whose point figures were slow too, the figures last
    computed while a job computes the current ones; else the point figures computed now,
    and the intervals by a job."""
    actor = authorize(engine, actor, "policy_owner")
    spec = KINDS[kind]
    parameters = parameters or {}
    token = _data_token(engine, rubric=rubric, previous=previous, reads=spec.reads)
    full = spec.resamples or 0
    full_key = _key_of(kind, rubric.ref, parameters, spec.resamples)
    point_key = _key_of(kind, rubric.ref, parameters, 0) if spec.resamples else None

    def computed(resamples: int, key: str) -> Any:
        return _computed(
            engine, actor, kind=kind, rubric=rubric, previous=previous,
            parameters=parameters, resamples=resamples, key=key, token=token,
        )  # fmt: skip

    found = _read(engine, full_key, token)
    if found is not _MISSING:
        return Shown(found, "current")
    waiting = {"report": kind, "rubric": rubric.ref, "parameters": parameters, "token": token}

    def job_state() -> str | None:
        """Queue a job for ``waiting`` unless one is queued or running; ``None``, or the
        error of the one that failed (or was stopped)."""
        latest = latest_report_job(engine, actor, parameters=waiting)
        if latest is not None and latest[1] in ("failed", "stopped"):
            return latest[2] or f"job {latest[0]} was stopped"
        if latest is None or latest[1] == "done":
            # none yet, or one that stored its report for a later token (the data
            # changed while it ran) or lost it to an older write: one more
            queue_report_job(engine, actor, parameters=waiting)
        return None

    if point_key is not None:
        point = _read(engine, point_key, token)
        if point is not _MISSING:
            failure = job_state()
            if failure is not None:
                return Shown(point, "failed", error=failure)
            return Shown(point, "computing", waiting=waiting)
    with Session(read_only(engine)) as session:
        last = reports.report_stamps(session, keys=[k for k in (full_key, point_key) if k])
    last_full, last_point = last.get(full_key), last.get(point_key or "")
    if last_full is not None:
        # within the page's budget, or (on a loaded machine) over it on data as small as
        # the demo's, whose figures a page always shows current
        quick = _affordable(last_full.seconds) or (
            last_full.seconds <= wait_seconds()
            and _rows_read(engine, rubric=rubric, reads=spec.reads) <= inline_rows()
        )
    else:
        quick = spec.resamples is None or (
            _rows_read(engine, rubric=rubric, reads=spec.reads) <= inline_rows()
        )
    if quick:
        return Shown(computed(full, full_key), "current")
    error: str | None = None
    checked = False
    older = last_full or last_point
    if (
        spec.stale_ok
        and older is not None
        and (last_point is None or not _affordable(last_point.seconds))
        and _code_of(older.token) == code_version()
    ):
        value = _read(engine, older.key, older.token)
        if value is not _MISSING:
            error, checked = job_state(), True
            if error is None:
                return Shown(value, "stale", waiting=waiting, computed_at=older.computed_at)
    if point_key is None:  # no intervals, and no figures to show meanwhile
        return Shown(computed(full, full_key), "current")
    point = computed(0, point_key)
    if not checked:
        error = job_state()
    if error is not None:
        return Shown(point, "failed", error=error)
    return Shown(point, "computing", waiting=waiting)


def _key_of(kind: str, rubric: str, parameters: dict[str, Any], resamples: int | None) -> str:
    return report_key(
        kind,
        rubric,
        dict(parameters) if resamples is None else {**parameters, "resamples": resamples},
    )


# --- what the pages ask for ----------------------------------------------------------------


def agreement_dashboard(
    engine: Engine, actor: Actor, *, rubric: Rubric, previous: Rubric | None = None
) -> Shown[DashboardData]:
    """The agreement page's data (``previous``: version N-1, compared side by side)."""
    return _shown(engine, actor, kind=AGREEMENT, rubric=rubric, previous=previous)


def judge_calibration(
    engine: Engine, actor: Actor, *, rubric: Rubric, previous: Rubric | None = None
) -> Shown[JudgeCalibrationReport]:
    """The judge page's calibration report of every run of the rubric version."""
    return _shown(engine, actor, kind=JUDGE_REPORT, rubric=rubric, previous=previous)


def drift(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int | None = None
) -> Shown[DriftReport]:
    """Where in the conversation the role breaks: gold and run ``run_id``, by default the
    default run (the team's judge, else the newest complete run; gold alone without one)."""
    if run_id is None:
        found = run_choices(engine, actor, rubric=rubric).default
        run_id = None if found is None else found.id
    return _shown(engine, actor, kind=DRIFT, rubric=rubric, parameters={"run": run_id})


def run_estimate(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int
) -> Shown[BreakRateEstimate]:
    """One run's break rate (PPI++, no bootstrap)."""
    return _shown(engine, actor, kind=ESTIMATE, rubric=rubric, parameters={"run": run_id})


def run_coverage(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    delta: float,
    alphas: list[float],
    min_units: int = 30,
) -> Shown[CoverageCurve]:
    """Coverage against alpha for one run (the judge page's dial)."""
    parameters = {"run": run_id, "delta": delta, "alphas": list(alphas), "min_units": min_units}
    return _shown(engine, actor, kind=COVERAGE, rubric=rubric, parameters=parameters)


def open_disagreements(
    engine: Engine, actor: Actor, *, rubric: Rubric, include_adjudicated: bool = False
) -> list[DisagreementUnit]:
    """The disagreement queue (review_app/services/labels/adjudication.py): always current (the
    adjudication page moves through it)."""
    parameters = {"include_adjudicated": include_adjudicated}
    return _shown(engine, actor, kind=DISAGREEMENTS, rubric=rubric, parameters=parameters).value


def run_few_shot(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int
) -> Shown[list[FewShotExample]]:
    """Adjudicated contrasting examples for the next prompt version of a run."""
    return _shown(engine, actor, kind=FEW_SHOT, rubric=rubric, parameters={"run": run_id})


def reviewer_reliability(
    engine: Engine, actor: Actor, *, rubric: Rubric
) -> Shown[ReliabilityReport]:
    """Each reviewer's confusion matrix and accuracy (the team and agreement pages)."""
    return _shown(engine, actor, kind=RELIABILITY, rubric=rubric)


def agreement_over_time(
    engine: Engine, actor: Actor, *, rubric: Rubric, previous: Rubric | None = None
) -> Shown[OverTimeReport]:
    """Agreement per week or batch, and late in sessions (the agreement page)."""
    return _shown(engine, actor, kind=OVER_TIME, rubric=rubric, previous=previous)


def run_strata(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int, by: str
) -> Shown[StratifiedBlock]:
    """One run's break rate by stratum (the judge page)."""
    return _shown(engine, actor, kind=STRATA, rubric=rubric, parameters={"run": run_id, "by": by})


def intervals_ready(engine: Engine, actor: Actor, *, waiting: dict[str, Any]) -> bool:
    """Whether a page waiting for a report (:attr:`Shown.waiting`) should draw again: it
    is stored for the awaited token, or its job ended (done elsewhere, or failed), or is
    gone (finished report jobs are deleted after a while: see
    review_app/services/reports/report_jobs.py)."""
    actor = authorize(engine, actor, "policy_owner")
    kind = str(waiting["report"])
    key = _key_of(kind, str(waiting["rubric"]), waiting["parameters"], KINDS[kind].resamples)
    with Session(read_only(engine)) as session:
        if reports.has_report(session, key=key, token=waiting["token"]):
            return True
    latest = latest_report_job(engine, actor, parameters=waiting)
    return latest is None or latest[1] in ("done", "failed", "stopped")


@dataclass(frozen=True)
class ReportJobResult:
    """What a report job records as its result."""

    key: str
    """The report's key in the reports table (:func:`report_key`)."""
    computed: bool
    """False when it was already stored for the data as it is."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def compute_report(engine: Engine, actor: Actor, *, parameters: dict[str, Any]) -> ReportJobResult:
    """A report job's work: the report named by ``parameters`` (``report``, ``rubric``,
    ``parameters``), with its intervals, for the data as it is now, stored unless it is
    already."""
    actor = authorize(engine, actor, "policy_owner")
    kind = str(parameters.get("report"))
    spec = KINDS.get(kind)
    if spec is None:
        raise InputError(f"no report called {kind!r}")
    known = sync_rubrics(engine, actor)
    rubric = known.for_reports(str(parameters["rubric"]))
    previous = known.previous_of(rubric) if "previous" in spec.reads else None
    given = dict(parameters["parameters"])
    token = _data_token(engine, rubric=rubric, previous=previous, reads=spec.reads)
    key = _key_of(kind, rubric.ref, given, spec.resamples)
    if _fetch(engine, key, token) is not None:
        return ReportJobResult(key=key, computed=False, seconds=0.0)
    started = time.perf_counter()
    _computed(
        engine, actor, kind=kind, rubric=rubric, previous=previous, parameters=given,
        resamples=spec.resamples or 0, key=key, token=token,
    )  # fmt: skip
    return ReportJobResult(key=key, computed=True, seconds=round(time.perf_counter() - started, 3))


def _run_report_job(engine: Engine, actor: Actor, view: JobView, beat: Heartbeat) -> JobOutcome:
    beat.progress(0, 1)
    result = compute_report(engine, actor, parameters=view.parameters)
    return JobOutcome(status="done", result=result.to_dict(), done=1, total=1)


REPORT_JOB_KIND = register_job_kind(
    JobKind(name=REPORT_JOB, handler=_run_report_job, after=prune_report_jobs)
)
