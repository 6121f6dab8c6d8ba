"""The key map of a rubric version as the catalog knows its history (review_app/rubrics/keys.py).

A version's keys follow from its predecessor's, which follow from theirs: the map is
worked out along every earlier version the catalog has, oldest first, so a code keeps
its key however many versions later. Pure over the catalog the caller was given.
"""

from __future__ import annotations

from typing import Any

from review_app.rubrics.keys import KeyMap, keys_along
from review_app.rubrics.model import Rubric
from review_app.services.rubrics.rubric_catalog import RubricCatalog


def key_map_for(catalog: RubricCatalog, rubric: Rubric) -> KeyMap:
    """The key of every code of ``rubric``: its file's ``key:``, else kept from the
    earlier versions in ``catalog`` (as labels knew them), else a free key. A version
    whose predecessor is missing numbers its codes as a first version would."""
    history = [rubric]
    while (earlier := catalog.previous_of(history[-1])) is not None:
        history.append(earlier)
    return keys_along(list(reversed(history)))[-1]


def rubric_with_keys(catalog: RubricCatalog, rubric: Rubric) -> dict[str, Any]:
    """``rubrics show ID@V --json``: the version and each code with its key, title and
    verdict, in the order reviewers see them."""
    keys = key_map_for(catalog, rubric)
    return {
        "rubric": rubric.ref,
        "title": rubric.title,
        "applies_to": rubric.applies_to,
        "sha256": rubric.sha256,
        "labels": [
            {
                "code": label.code,
                "key": keys.key_of(label.code),
                "key_source": keys.sources[label.code],
                "key_from": keys.inherited_from.get(label.code),
                "title": label.title,
                "verdict": label.verdict,
                "definition": label.definition,
            }
            for label in rubric.labels
        ],
    }
