"""The evaluator as the README's own install command installs it, against the seed's.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_installed_evaluator.py [--cases 20000] [--rounds 5]

Builds a wheel of this checkout with no build variable set (``pip install .``: the
evaluator compiled with mypyc where a C compiler and Python's headers are, pure Python
elsewhere: hatch_build.py), installs it into a temporary directory, and runs
``benchmarks/bench_foundation.py --skip-import`` with that directory first on the path,
so the evaluator it measures is the installed one. Prints the build's one line and
bench_foundation's figures (target: >= 2.5x the seed's evaluator). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_and_install(workdir: Path) -> Path:
    """The wheel ``pip install .`` builds here, installed into ``workdir/site``."""
    tree = workdir / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", ".gitignore", "hatch_build.py"):
        shutil.copy2(REPO / name, tree / name)
    for name in ("review_app", "storage", "rubrics"):
        shutil.copytree(
            REPO / name, tree / name, ignore=shutil.ignore_patterns("*.so", "__pycache__")
        )
    environment = {k: v for k, v in os.environ.items() if k != "HATCH_BUILD_HOOK_ENABLE_MYPYC"}
    wheels = workdir / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", str(tree), "-w", str(wheels)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    said = [line for line in (built.stdout + built.stderr).splitlines() if "role-review:" in line]
    print(said[0].strip() if said else "(the build said nothing about the evaluator)")
    [wheel] = wheels.glob("*.whl")
    site = workdir / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
        check=True,
    )
    return site


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="role-review-installed-") as tmp:
        site = build_and_install(Path(tmp))
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join((str(site), str(REPO))))
        subprocess.run(
            [
                sys.executable,
                str(REPO / "benchmarks" / "bench_foundation.py"),
                "--skip-import",
                "--cases",
                str(args.cases),
                "--rounds",
                str(args.rounds),
            ],
            env=environment,
            cwd=tmp,
            check=True,
        )


if __name__ == "__main__":
    main()
