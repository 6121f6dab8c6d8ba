"""The build hook: the evaluator compiled with mypyc where it can be, pure Python elsewhere.

README, "The compiled evaluator". The optional-extension pattern of PyYAML or MarkupSafe:
a wheel build (``pip install .``) compiles ``review_app/evaluator.py`` with mypyc (through
hatch-mypyc) when a C compiler and Python's headers are present, and installs the pure
Python module when they are not, or when compiling fails; it says which in one line
(``pip install -v`` shows the build's output) and records it in the wheel's metadata,
which ``review-app --version`` reads.

``HATCH_BUILD_HOOK_ENABLE_MYPYC`` forces either way: ``1`` compiles (a failure fails the
install: .ci/run sets it), ``0`` installs pure Python. Unset, a regular install compiles
when it can, and an editable one (``pip install -e .``) stays pure Python: in a checkout,
Python would import the compiled module in place of the source being edited.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODE_VARIABLE = "HATCH_BUILD_HOOK_ENABLE_MYPYC"
NOTE = "evaluator-build.txt"
"""The line saying how the evaluator was built, in the wheel's ``.dist-info/extra_metadata``."""


def requested_mode(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """``compiled``, ``python`` (forced by :data:`MODE_VARIABLE`) or ``auto``."""
    given = environ.get(MODE_VARIABLE, "").strip().lower()
    if given in ("1", "true", "yes", "on"):
        return "compiled"
    if given in ("0", "false", "no", "off"):
        return "python"
    return "auto"


def missing_toolchain() -> str | None:
    """What compiling needs and this machine lacks (a C compiler, Python's headers), or
    ``None``."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    words = shlex.split(compiler)
    if not words or shutil.which(words[0]) is None:
        return f"no C compiler ({words[0] if words else 'CC'} not found)"
    include = sysconfig.get_paths().get("include") or ""
    if not (Path(include) / "Python.h").is_file():
        return f"no Python headers ({Path(include) / 'Python.h'} not found)"
    return None


class CompiledEvaluatorHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def _mypyc(self) -> Any:
        from hatch_mypyc.plugin import MypycBuildHook

        return MypycBuildHook(
            self.root,
            self.config,
            self.build_config,
            self.metadata,
            self.directory,
            self.target_name,
            self.app,
        )

    def _say(self, build_data: dict[str, Any], line: str) -> None:
        self.app.display_info(f"role-review: {line}")
        note = Path(tempfile.mkdtemp(prefix="role-review-build-")) / NOTE
        note.write_text(line + "\n", encoding="utf-8")
        build_data.setdefault("extra_metadata", {})[str(note)] = NOTE

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        mode = requested_mode()
        if mode == "python":
            self._say(build_data, f"evaluator in pure Python ({MODE_VARIABLE}=0)")
            return
        if mode == "auto" and version == "editable":
            self._say(
                build_data,
                f"evaluator in pure Python (an editable install; {MODE_VARIABLE}=1 compiles it)",
            )
            return
        missing = missing_toolchain()
        if missing is not None and mode == "auto":
            self._say(build_data, f"evaluator in pure Python ({missing})")
            return
        hook = self._mypyc()
        trial: dict[str, Any] = {"artifacts": [], "force_include": {}}
        try:
            hook.initialize(version, trial)
        except Exception as error:
            if mode == "compiled":
                raise
            hook.clean([version])
            # hatch-mypyc's message ends with the compiler's or mypy's last word
            last = [line.strip() for line in str(error).splitlines() if line.strip()]
            why = last[-1][:200] if last else type(error).__name__
            self._say(build_data, f"evaluator in pure Python (mypyc failed: {why})")
            return
        build_data["infer_tag"] = True
        build_data["pure_python"] = False
        build_data["artifacts"].extend(trial["artifacts"])
        build_data["force_include"].update(trial["force_include"])
        self._say(build_data, "evaluator compiled with mypyc")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        # A regular wheel holds its compiled files: the checkout it was built from keeps
        # none (Python run there would import them in place of the source). An editable
        # install imports them from the checkout.
        if self.target_name == "wheel" and version != "editable" and not build_data["pure_python"]:
            self._mypyc().clean([version])

    def clean(self, versions: list[str]) -> None:
        self._mypyc().clean(versions)
