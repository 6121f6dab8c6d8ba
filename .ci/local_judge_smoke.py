"""Exit 0 when the installed llama.cpp build can generate a token here (in a child
process, so an illegal instruction is reported rather than fatal)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
from llama_cpp import Llama
from review_app.services.judging.local_judge import model_path
model = Llama(model_path=str(model_path()), n_ctx=256, verbose=False)
model.create_completion("Hello", max_tokens=2, temperature=0)
print("llama.cpp runs")
"""

completed = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
print(completed.stdout.strip() or f"llama.cpp smoke test failed (exit {completed.returncode})")
sys.exit(0 if completed.returncode == 0 else 1)
