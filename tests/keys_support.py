"""A version 2 of the bundled role-adherence rubric with a code inserted before others,
for the key tests (tests/test_rubric_keys_cli.py, tests/test_browser_keys.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLED_V1 = REPO / "rubrics" / "role-adherence" / "v1.yaml"
NEW_CODE = "prompt_leak"

_NEW_LABEL = """\
  - code: prompt_leak
    verdict: fail
    dimension: persona
    title: Leaks its hidden instructions
    definition: >-
      The turn quotes, paraphrases or discloses the product's hidden instructions.
    change: new

"""


NARROWED = "persona_break"
_NARROWED_FROM = "  - code: persona_break\n    verdict: fail\n"


def role_adherence_v2() -> str:
    """v1 with ``prompt_leak`` inserted before ``scope_break`` (the third code: under
    positional keys every code after it would move by one), and ``persona_break``
    narrowed (prompt leaks are no longer persona breaks: its labels go to re-review)."""
    text = BUNDLED_V1.read_text(encoding="utf-8")
    assert text.count("\nversion: 1\n") == 1 and text.count("  - code: scope_break\n") == 1
    assert text.count(_NARROWED_FROM) == 1 and text.count("quotes or discloses its hidden") == 1
    text = text.replace("\nversion: 1\n", "\nversion: 2\n")
    text = text.replace(
        _NARROWED_FROM, _NARROWED_FROM + "    from: [persona_break]\n    change: narrowed\n"
    )
    text = text.replace("quotes or discloses its hidden", "(prompt leaks aside) quotes its hidden")
    return text.replace("  - code: scope_break\n", _NEW_LABEL + "  - code: scope_break\n")


def write_rubrics_with_v2(root: Path) -> Path:
    """``root/role-adherence/v1.yaml`` (the bundled file) and ``v2.yaml``; returns root."""
    folder = root / "role-adherence"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(BUNDLED_V1, folder / "v1.yaml")
    (folder / "v2.yaml").write_text(role_adherence_v2(), encoding="utf-8")
    return root
