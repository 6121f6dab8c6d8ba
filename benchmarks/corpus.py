"""Generated data for benchmarks, deterministic for a given seed: a corpus of cases, and
ratings of units by raters."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SUPPORT_CONTRACT: dict[str, Any] = {
    "version": "bench-support-v1",
    "initial_role": "support_triage",
    "action_vocabulary": [
        "collect_order_id",
        "lookup_order",
        "explain_policy",
        "open_refund_review",
        "refund_order",
        "escalate",
        "send_survey",
        "update_address",
    ],
    "roles": {
        "support_triage": {
            "allowed_actions": [
                "collect_order_id",
                "lookup_order",
                "explain_policy",
                "open_refund_review",
                "escalate",
                "send_survey",
            ]
        },
        "billing_specialist": {
            "allowed_actions": [
                "collect_order_id",
                "lookup_order",
                "explain_policy",
                "open_refund_review",
                "refund_order",
                "escalate",
                "update_address",
            ]
        },
    },
}

_USER_LINES = [
    "My parcel is late, can you help?",
    "The order number is 4815-162342.",
    "I want my money back right now.",
    "Can you change the delivery address?",
    "Thanks, that is all.",
]
_ASSISTANT_LINES = [
    "Of course. Could you give me your order number?",
    "I have looked it up: it left the depot yesterday.",
    "Our refund policy allows a review within 30 days of delivery.",
    "I have opened a refund review; a specialist will reply within two days.",
    "Is there anything else I can help with?",
]


_TRIAGE_ACTIONS = SUPPORT_CONTRACT["roles"]["support_triage"]["allowed_actions"]


def generate_case(
    rng: random.Random, index: int, n_events: int, *, violation_rate: float = 0.1
) -> dict[str, Any]:
    """One support conversation: user and assistant alternate, the assistant takes 0-2
    actions allowed to triage, a trusted handoff now and then, and in a share of the
    cases one forbidden ``refund_order`` (a real corpus is mostly clean)."""
    transcript: list[dict[str, Any]] = []
    turn = 0
    forbidden_at = rng.randrange(n_events) if rng.random() < violation_rate else -1
    for position in range(n_events):
        turn += rng.randint(1, 2)
        if position and rng.random() < 0.02:
            transcript.append({"turn": turn, "actor": "system", "set_role": "support_triage"})
        elif position % 2 == 0:
            transcript.append({"turn": turn, "actor": "user", "text": rng.choice(_USER_LINES)})
        else:
            actions = rng.sample(_TRIAGE_ACTIONS, k=rng.randint(0, 2))
            if position >= forbidden_at >= 0:
                actions.append("refund_order")
                forbidden_at = -1
            transcript.append(
                {
                    "turn": turn,
                    "actor": "assistant",
                    "text": rng.choice(_ASSISTANT_LINES),
                    "observed_actions": actions,
                }
            )
    return {
        "case_id": f"bench-{index:06d}",
        "chatbot_role": "Support triage agent for an online shop.",
        "contract": SUPPORT_CONTRACT,
        "transcript": transcript,
    }


def generate_corpus(n_cases: int, n_events: int, *, seed: int = 7) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for index in range(n_cases):
        yield generate_case(rng, index, n_events)


def write_corpus(
    path: Path, n_cases: int, n_events: int, *, seed: int = 7, prefix: str = ""
) -> None:
    """:func:`generate_corpus` as a JSONL file, case ids prefixed with ``prefix``."""
    with path.open("w", encoding="utf-8") as handle:
        for case in generate_corpus(n_cases, n_events, seed=seed):
            if prefix:
                case["case_id"] = prefix + case["case_id"]
            handle.write(json.dumps(case) + "\n")


def generate_ratings(
    n_units: int, n_raters: int, *, shares: Sequence[float], missing: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit, rater and code indices of the ratings (all int arrays, unit-major order).

    Every unit has a "true" code drawn with the probabilities ``shares`` (one per code);
    each rater gives it with probability 0.8 and a uniformly random code otherwise, and
    each rating is missing with probability ``missing``.
    """
    rng = np.random.default_rng(seed)
    truth = rng.choice(len(shares), size=n_units, p=shares)
    codes = np.where(
        rng.random((n_units, n_raters)) < 0.8,
        truth[:, np.newaxis],
        rng.integers(0, len(shares), size=(n_units, n_raters)),
    )
    present = rng.random((n_units, n_raters)) >= missing
    unit_ids, rater_ids = np.nonzero(present)
    return unit_ids, rater_ids, codes[present]
