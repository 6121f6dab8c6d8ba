"""Conversation-level agreement: where each rater first finds a role break, and whether at all."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

from review_app.agreement.coefficients import (
    Coefficient,
    krippendorff_alpha,
    small_sample_warning,
)
from review_app.stats.core import canonical_order
from review_app.stats.table import IntArray, RatingTable, factorize


class FirstBreakAgreementJson(TypedDict):
    """:meth:`FirstBreakAgreement.to_dict`: the agreement form of an estimate and the
    counts."""

    value: float | None
    n_units: int
    reason: str | None
    ci95: list[float] | None
    warning: str | None
    n_pairs: int
    n_agreeing_pairs: int
    n_both_break_pairs: int
    n_same_turn_pairs: int


@dataclass(frozen=True)
class FirstBreakAgreement:
    """Exact agreement on where a conversation first breaks its role.

    ``value`` = ``n_agreeing_pairs / n_pairs``: over every pair of raters who both
    rated a conversation, pooled across conversations, the share of pairs that
    name the same first breaking turn, or that both find no break at all.
    ``n_units`` counts conversations rated by two or more raters.
    ``n_both_break_pairs`` counts pairs in which both raters found a break and
    ``n_same_turn_pairs`` those of them that agree on its turn, so that agreement
    on *where* can be read apart from agreement on *whether*.
    """

    value: float | None
    n_units: int
    n_pairs: int
    n_agreeing_pairs: int
    n_both_break_pairs: int
    n_same_turn_pairs: int
    reason: str | None = None
    warning: str | None = None

    def to_dict(self, *, count_key: Literal["n_units"] = "n_units") -> FirstBreakAgreementJson:
        """JSON-ready form: the agreement keys of
        :meth:`~review_app.stats.core.Estimate.to_dict` and the counts."""
        return {
            "value": None if self.value is None else float(self.value),
            "n_units": int(self.n_units),
            "reason": self.reason,
            "ci95": None,
            "warning": self.warning,
            "n_pairs": int(self.n_pairs),
            "n_agreeing_pairs": int(self.n_agreeing_pairs),
            "n_both_break_pairs": int(self.n_both_break_pairs),
            "n_same_turn_pairs": int(self.n_same_turn_pairs),
        }


@dataclass(frozen=True)
class FirstBreaks:
    """Long form of "rater r first breaks conversation c at turn t" (has_break false: none).

    Built from a rating table (:meth:`from_table`) or a mapping (:meth:`from_mapping`); gives
    the conversation-level figures (:meth:`agreement`, :meth:`any_break_alpha`).
    """

    conversation_idx: IntArray
    rater_idx: IntArray
    has_break: npt.NDArray[np.bool_]
    first_turn: IntArray
    conversations: tuple[Hashable, ...]
    raters: tuple[Hashable, ...]

    @classmethod
    def from_table(
        cls,
        table: RatingTable,
        *,
        conversation_of: Callable[[Any], Hashable],
        turn_of: Callable[[Any], int],
        break_values: Collection[Hashable],
    ) -> FirstBreaks:
        """Each rater's first break per conversation in a turn-level ``table`` (a rating is a
        break when its value is in ``break_values``; see :func:`conversation_first_breaks`)."""
        conversation_codes, conversation_uniques = factorize(
            np.fromiter(map(conversation_of, table.units), dtype=object, count=table.n_units)
        )
        if len(conversation_codes) and conversation_codes.min() < 0:
            raise ValueError("conversation_of returned None for a unit")
        conversation_codes, conversations = canonical_order(
            conversation_codes, conversation_uniques
        )
        turn_list = list(map(turn_of, table.units))
        turns = np.asarray(turn_list) if turn_list else np.zeros(0, dtype=np.int64)
        if turns.dtype.kind not in "iu" or turns.ndim != 1:
            for unit, turn in zip(table.units, turn_list, strict=True):
                _checked_turn(turn, unit)
        turns = turns.astype(np.int64, copy=False)
        breaking_value = np.array([value in break_values for value in table.values], dtype=bool)

        rating_conversation = conversation_codes[table.unit_idx]
        rating_turn = turns[table.unit_idx]
        rating_breaks = breaking_value[table.value_idx] if table.n_ratings else np.zeros(0, bool)

        group_key = rating_conversation * max(table.n_raters, 1) + table.rater_idx
        groups, group_of_rating = np.unique(group_key, return_inverse=True)
        group_of_rating = group_of_rating.reshape(-1)
        has_break = np.bincount(group_of_rating, weights=rating_breaks, minlength=len(groups)) > 0
        first_turn = np.zeros(len(groups), dtype=np.int64)
        breaking = np.flatnonzero(rating_breaks)
        if len(breaking):
            order = np.lexsort((rating_turn[breaking], group_of_rating[breaking]))
            ordered_groups = group_of_rating[breaking][order]
            first_of_group = np.concatenate(([True], ordered_groups[1:] != ordered_groups[:-1]))
            ordered_turns = rating_turn[breaking][order]
            first_turn[ordered_groups[first_of_group]] = ordered_turns[first_of_group]
        n_raters = max(table.n_raters, 1)
        return cls(
            conversation_idx=(groups // n_raters).astype(np.int64),
            rater_idx=(groups % n_raters).astype(np.int64),
            has_break=has_break,
            first_turn=first_turn,
            conversations=conversations,
            raters=table.raters,
        )

    @classmethod
    def from_mapping(cls, first_break: Mapping[Any, Mapping[Any, int | None]]) -> FirstBreaks:
        """The long form of conversation -> rater -> first break turn (``None``: no break)."""
        conversation_ids: list[Hashable] = []
        rater_names: list[Hashable] = []
        has_break: list[bool] = []
        first_turn: list[int] = []
        for conversation, by_rater in first_break.items():
            for rater, turn in by_rater.items():
                conversation_ids.append(conversation)
                rater_names.append(rater)
                has_break.append(turn is not None)
                first_turn.append(0 if turn is None else _checked_turn(turn, conversation))
        conversation_codes, conversations = canonical_order(
            *factorize(np.fromiter(conversation_ids, dtype=object, count=len(conversation_ids)))
        )
        rater_codes, raters = canonical_order(
            *factorize(np.fromiter(rater_names, dtype=object, count=len(rater_names)))
        )
        if (conversation_codes < 0).any() or (rater_codes < 0).any():
            raise ValueError("first_break must not contain a missing conversation or rater (None)")
        return cls(
            conversation_idx=conversation_codes,
            rater_idx=rater_codes,
            has_break=np.asarray(has_break, dtype=bool),
            first_turn=np.asarray(first_turn, dtype=np.int64),
            conversations=conversations,
            raters=raters,
        )

    def readers(self) -> dict[str, int]:
        """How many conversations were read by how many raters, for 2 or more:
        ``{"3": 17}`` (keys are counts as text, for JSON)."""
        per_conversation = np.bincount(self.conversation_idx, minlength=len(self.conversations))
        counts = np.bincount(per_conversation[per_conversation >= 2])
        return {str(k): int(n) for k, n in enumerate(counts) if n}

    def agreement(self) -> FirstBreakAgreement:
        """:func:`first_break_agreement` of these first breaks."""
        n_conversations = len(self.conversations)
        raters_per_conversation = np.bincount(self.conversation_idx, minlength=n_conversations)
        n_units = int(np.count_nonzero(raters_per_conversation >= 2))
        n_pairs = _pairs(raters_per_conversation)
        # Same outcome = same conversation, and the same first turn or both "no break".
        outcome = np.where(self.has_break, self.first_turn, 0)
        outcome_has_break, outcome_sizes = _outcome_groups(
            self.conversation_idx, self.has_break, outcome
        )
        n_agreeing = _pairs(outcome_sizes)
        breakers_per_conversation = np.bincount(
            self.conversation_idx, weights=self.has_break, minlength=n_conversations
        )
        n_both_break = _pairs(breakers_per_conversation.astype(np.int64))
        n_same_turn = _pairs(outcome_sizes[outcome_has_break])
        if n_pairs == 0:
            if len(self.raters) < 2:
                reason = "fewer than two raters rated any conversation"
            else:
                reason = "no conversation was rated by two or more raters"
            return FirstBreakAgreement(None, 0, 0, 0, 0, 0, reason=reason, warning=None)
        return FirstBreakAgreement(
            value=n_agreeing / n_pairs,
            n_units=n_units,
            n_pairs=n_pairs,
            n_agreeing_pairs=n_agreeing,
            n_both_break_pairs=n_both_break,
            n_same_turn_pairs=n_same_turn,
            warning=small_sample_warning(n_units),
        )

    def any_break_alpha(self) -> Coefficient:
        """:func:`any_break_alpha` of these first breaks."""
        used_values, value_idx = np.unique(self.has_break, return_inverse=True)
        table = RatingTable(
            unit_idx=self.conversation_idx,
            rater_idx=self.rater_idx,
            value_idx=value_idx.reshape(-1),
            units=self.conversations,
            raters=self.raters,
            values=tuple(bool(value) for value in used_values),
        )
        return krippendorff_alpha(table)


def _checked_turn(turn: Any, where: Hashable) -> int:
    if isinstance(turn, bool) or not isinstance(turn, int | np.integer):
        raise ValueError(f"turn of {where!r} must be an integer, got {turn!r}")
    return int(turn)


def conversation_first_breaks(
    table: RatingTable,
    *,
    conversation_of: Callable[[Any], Hashable],
    turn_of: Callable[[Any], int],
    break_values: Collection[Hashable] = ("break",),
) -> dict[Hashable, dict[Hashable, int | None]]:
    """Each rater's first breaking turn in each conversation they rated.

    ``conversation_of(unit)`` and ``turn_of(unit)`` take a unit apart (in the app
    ``unit[0]`` and ``unit[1]``). A rating counts as a break when its value is in
    ``break_values``; every other rating counts as "no break", so pass a table
    that holds only countable judgements (the break / no-break collapse, where
    borderline and abstain are already dropped). The result maps conversation ->
    rater -> the lowest turn that rater marked as a break, or ``None`` when they
    rated turns of that conversation and marked none. Raters who rated no turn of
    a conversation do not appear under it.
    """
    breaks = FirstBreaks.from_table(
        table, conversation_of=conversation_of, turn_of=turn_of, break_values=break_values
    )
    result: dict[Hashable, dict[Hashable, int | None]] = {}
    for conversation, rater, has_break, turn in zip(
        breaks.conversation_idx.tolist(),
        breaks.rater_idx.tolist(),
        breaks.has_break.tolist(),
        breaks.first_turn.tolist(),
        strict=True,
    ):
        by_rater = result.setdefault(breaks.conversations[conversation], {})
        by_rater[breaks.raters[rater]] = turn if has_break else None
    return result


def _pairs(counts: npt.NDArray[Any]) -> int:
    counts = np.asarray(counts, dtype=np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _outcome_groups(
    conversation_idx: IntArray, has_break: npt.NDArray[np.bool_], outcome: IntArray
) -> tuple[npt.NDArray[np.bool_], IntArray]:
    """Distinct (conversation, has_break, outcome) triples: whether each is a break, and
    how many raters share it. One integer key per triple (a 1-d ``np.unique`` is many
    times faster than ``np.unique(..., axis=1)``) unless the keys could overflow."""
    if not len(outcome):
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    low = int(outcome.min())
    span = int(outcome.max()) - low + 1
    n_conversations = int(conversation_idx.max()) + 1
    if 2 * n_conversations * span < 2**62:
        keys = (conversation_idx * 2 + has_break) * span + (outcome - low)
        groups, sizes = np.unique(keys, return_counts=True)
        return (groups // span) % 2 == 1, sizes.astype(np.int64)
    stacked = np.stack([conversation_idx, has_break.astype(np.int64), outcome])
    triples, sizes = np.unique(stacked, axis=1, return_counts=True)
    return triples[1] == 1, sizes.astype(np.int64)


def first_break_agreement(
    first_break: Mapping[Any, Mapping[Any, int | None]],
) -> FirstBreakAgreement:
    """Exact-match rate of the first breaking turn over rater pairs, per conversation.

    ``first_break`` maps conversation -> rater -> the first turn that rater marked
    as a role break, or ``None`` for "rated, no break" (see
    :func:`conversation_first_breaks`). For every conversation and every pair of
    raters listed under it, the pair agrees when both give the same turn or both
    give ``None``. The value is agreeing pairs / all pairs, pooled over
    conversations; ``n_units`` counts conversations with two or more raters. See
    :class:`FirstBreakAgreement` for the counts reported alongside.

    Undefined (``None``) when no conversation has two raters.
    """
    return FirstBreaks.from_mapping(first_break).agreement()


def any_break_alpha(first_break: Mapping[Any, Mapping[Any, int | None]]) -> Coefficient:
    """Nominal alpha on "does this conversation break its role at all?".

    Takes the same mapping as :func:`first_break_agreement`: a rater's rating of
    a conversation is ``True`` when they give a turn and ``False`` for ``None``.
    Units are conversations; ``n_units`` counts those rated by two or more
    raters. Undefined as :func:`krippendorff_alpha` is (no conversation with two
    raters, or every rater saying the same thing about every conversation).
    """
    return FirstBreaks.from_mapping(first_break).any_break_alpha()
