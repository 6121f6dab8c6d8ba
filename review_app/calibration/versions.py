"""Judge prompt versions side by side on the units every version judged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from review_app.calibration.like_for_like import kappa_estimate
from review_app.calibration.reference import AgreementJson, AgreementReport, compare_to_reference
from review_app.stats.checks import check_break_mapping, check_codes, check_int, check_seed
from review_app.stats.codes import BreakMapping
from review_app.stats.core import (
    BREAK,
    Estimate,
    EstimateJson,
)
from review_app.stats.units import JsonKey, Unit, UnitT, json_value, sorted_units


class VersionSummaryJson(TypedDict):
    version: str
    n_units: int
    n_shared: int
    code_counts: dict[str, int]
    break_rate: float | None
    agreement: AgreementJson | None


class VersionDifferenceJson(TypedDict):
    unit: JsonKey
    codes: dict[str, str]
    reference: str | None


class VersionComparisonJson(TypedDict):
    """:meth:`VersionComparison.to_dict` (docs/reference.md, "Judge report JSON")."""

    versions: list[str]
    n_shared: int
    per_version: dict[str, VersionSummaryJson]
    pairwise_kappa: dict[str, EstimateJson]
    differences: list[VersionDifferenceJson]


@dataclass(frozen=True)
class VersionSummary:
    """One prompt version on the shared units: its codes and, given a reference,
    its agreement with it."""

    version: str
    n_units: int
    n_shared: int
    code_counts: Mapping[str, int]
    break_rate: float | None
    agreement: AgreementReport | None

    def to_dict(self) -> VersionSummaryJson:
        return {
            "version": self.version,
            "n_units": self.n_units,
            "n_shared": self.n_shared,
            "code_counts": dict(self.code_counts),
            "break_rate": self.break_rate,
            "agreement": None if self.agreement is None else self.agreement.to_dict(),
        }


@dataclass(frozen=True)
class VersionDifference:
    """A shared unit where prompt versions gave different codes."""

    unit: Unit
    codes: Mapping[str, str]
    reference: str | None

    def to_dict(self) -> VersionDifferenceJson:
        return {
            "unit": json_value(self.unit),
            "codes": dict(self.codes),
            "reference": self.reference,
        }


@dataclass(frozen=True)
class VersionComparison:
    """Prompt versions compared on the units every version judged.

    ``pairwise_kappa`` is keyed ``"<version_a>|<version_b>"`` with names sorted.
    """

    versions: tuple[str, ...]
    n_shared: int
    per_version: Mapping[str, VersionSummary]
    pairwise_kappa: Mapping[str, Estimate]
    differences: tuple[VersionDifference, ...]

    def to_dict(self) -> VersionComparisonJson:
        return {
            "versions": list(self.versions),
            "n_shared": self.n_shared,
            "per_version": {name: s.to_dict() for name, s in self.per_version.items()},
            "pairwise_kappa": {pair: e.to_dict() for pair, e in self.pairwise_kappa.items()},
            "differences": [d.to_dict() for d in self.differences],
        }


def compare_prompt_versions(
    *,
    verdicts: Mapping[str, Mapping[UnitT, str]],
    reference: Mapping[UnitT, str] | None,
    break_mapping: BreakMapping | None = None,
    ignore_codes: Collection[str] = (),
    n_resamples: int = 1000,
    seed: int = 0,
    cluster_of: Callable[[UnitT], Hashable] | None = None,
) -> VersionComparison:
    """Compare judge prompt versions on the units that every version judged.

    For each version (sorted by name): its code counts and break rate on the shared
    units and, when ``reference`` is given, :func:`compare_to_reference` restricted to
    the shared units (so all versions are measured on the same units). Pairwise Cohen's
    kappa between versions on the shared units with 95% percentile bootstrap intervals
    (``method`` says which): over units, or, given ``cluster_of`` (a unit -> conversation
    function, e.g. the case of a ``(case, turn)`` unit), over whole conversations (cluster
    bootstrap, Field & Welsh 2007), as in :func:`compare_to_reference`, which gets the same
    ``cluster_of``. A pair has no interval from fewer than 2 units (or conversations).
    ``differences``
    lists, in unit order, every shared unit where the versions' codes differ, with each
    version's code and the reference code (``None`` if the reference lacks the unit).

    Raises ``ValueError`` with these messages, besides those of
    :func:`compare_to_reference`:

    - ``"verdicts must name at least one prompt version"``
    - ``"break_mapping is required when a reference is given"``
    """
    if not verdicts:
        raise ValueError("verdicts must name at least one prompt version")
    if reference is not None and break_mapping is None:
        raise ValueError("break_mapping is required when a reference is given")
    mapping = None if break_mapping is None else check_break_mapping(break_mapping)
    n_resamples = check_int(n_resamples, "n_resamples", 0)
    seed = check_seed(seed)
    versions = tuple(sorted(verdicts))
    if mapping is not None:
        for version in versions:
            check_codes(verdicts[version], f"verdicts[{version!r}]", mapping)

    shared_set = set(verdicts[versions[0]])
    for version in versions[1:]:
        shared_set &= set(verdicts[version])
    shared = sorted_units(shared_set)

    per_version: dict[str, VersionSummary] = {}
    for version in versions:
        codes = {unit: verdicts[version][unit] for unit in shared}
        break_rate: float | None = None
        if mapping is not None:
            classes = [mapping[c] for c in codes.values() if mapping[c] is not None]
            break_rate = classes.count(BREAK) / len(classes) if classes else None
        agreement = None
        if reference is not None and mapping is not None:
            agreement = compare_to_reference(
                reference=reference,
                judged=codes,
                break_mapping=mapping,
                ignore_codes=ignore_codes,
                n_resamples=n_resamples,
                seed=seed,
                cluster_of=cluster_of,
            )
        per_version[version] = VersionSummary(
            version=version,
            n_units=len(verdicts[version]),
            n_shared=len(shared),
            code_counts=dict(sorted(Counter(codes.values()).items())),
            break_rate=break_rate,
            agreement=agreement,
        )

    clusters = None if cluster_of is None else [cluster_of(u) for u in shared]
    pairwise: dict[str, Estimate] = {}
    for i, first in enumerate(versions):
        for second in versions[i + 1 :]:
            pairwise[f"{first}|{second}"] = kappa_estimate(
                [verdicts[first][u] for u in shared],
                [verdicts[second][u] for u in shared],
                n_resamples=n_resamples,
                seed=seed,
                clusters=clusters,
                no_units_reason="no unit was judged by every version",
                constant_reason="Cohen's kappa is undefined: both versions gave one and the same "
                "code to every unit",
            )

    differences = tuple(
        VersionDifference(
            unit=unit,
            codes={version: verdicts[version][unit] for version in versions},
            reference=None if reference is None else reference.get(unit),
        )
        for unit in shared
        if len({verdicts[version][unit] for version in versions}) > 1
    )
    return VersionComparison(
        versions=versions,
        n_shared=len(shared),
        per_version=per_version,
        pairwise_kappa=pairwise,
        differences=differences,
    )
