"""A server imports what its pages import as it starts (review_app/ui/launch.py): the
first visit after a restart draws its stored reports without waiting seconds for
pandas, pyarrow, Altair and the services to load."""

from __future__ import annotations

import importlib
import subprocess
import sys

from review_app.ui import launch


def test_the_warm_up_lists_every_module_the_pages_import() -> None:
    names = launch.page_modules()
    assert {"pandas", "pyarrow", "altair"} <= set(names)
    # never the app's UI modules nor Streamlit's: imported outside a script run, the
    # keyboard component would be declared before the runtime and never served
    assert not [n for n in names if n.startswith(("review_app.ui", "streamlit"))]
    assert "review_app.services.judging.judge_report" in names  # the judge page's own
    for name in names:
        # each is a module, or a name imported from one (no typo silently skipped)
        module, _, attribute = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ImportError:
            assert hasattr(importlib.import_module(module), attribute), name


def test_after_the_warm_up_the_pages_modules_are_loaded() -> None:
    probe = (
        "import sys\n"
        "from review_app.ui import launch\n"
        "assert 'pandas' not in sys.modules\n"
        "launch.warm_pages()\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'altair', 'review_app.ui.keys.panel', "
        "'review_app.services.judging.judge_report') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout == (
        "['altair', 'pandas', 'pyarrow', 'review_app.services.judging.judge_report']\n"
    )
    assert launch.WARMED in done.stderr
