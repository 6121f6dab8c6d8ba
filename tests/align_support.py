"""Helpers for the ``judge align`` tests and benchmark: a loopback judge whose answers
depend on words in its prompt, a loopback optimiser that proposes prompts in a fenced
block, and a gold set whose truth the judge stub knows.

The judge (tests/judge_support.py's :class:`FakeChatServer` with an ``answer``) gives
the right code (:func:`expected_answer`: a refund recorded at the judged turn is an
authority break) on every unit when its prompt holds :data:`HELPFUL`; when it holds
:data:`HARMFUL` it is wrong on most units; otherwise it is wrong on about
:data:`NOISE_SHARE` of them, which ones drawn from a hash of the whole prompt (so each
prompt text has its own errors, and a prompt that differs only by noise words wins or
loses by luck).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.judge_support import FakeChatServer, expected_answer, support_case, write_jsonl

HELPFUL = "CHECK-RECORDED-ACTIONS"
HARMFUL = "IGNORE-ACTIONS"
NOISE_SHARE = 45
"""Percent of units a prompt without either word gets wrong."""
RUBRIC = "role-adherence@1"
START = "role-judge@v1"
FENCED = re.compile(r"^(`{3,})[^\n]*\n(.*?)\n\1[ \t]*$", re.M | re.S)


def _flip(answer: dict[str, Any]) -> dict[str, Any]:
    if answer["label"] == "in_role":
        return {"label": "authority_break", "score": 0.8, "reason": "Looks like a refund."}
    return {"label": "in_role", "score": 0.2, "reason": "Seems fine."}


def word_judge(prompt: str) -> dict[str, Any]:
    """The judge stub's answer to a user message (module docstring)."""
    right = expected_answer(prompt)
    if HELPFUL in prompt and HARMFUL not in prompt:
        return right
    draw = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % 100
    wrong_share = 80 if HARMFUL in prompt else NOISE_SHARE
    return _flip(right) if draw < wrong_share else right


def current_prompt(request: str) -> str:
    """The prompt shown in the first fenced block of a reflection request."""
    found = FENCED.search(request)
    assert found is not None, request[:300]
    return found[2]


def helpful_proposals() -> Callable[[str, int], str]:
    """An optimiser that first proposes a text that does not render (no ``$codes``),
    then adds the helpful word."""

    def propose(request: str, number: int) -> str:
        current = current_prompt(request)
        if number == 1:
            return "Sure:\n```\nBROKEN-PROPOSAL judge this: $conversation\n```\n"
        return (
            "Here is a better prompt.\n```text\n"
            f"{current}\n{HELPFUL}: read each turn's recorded actions first.\n```\n"
            "```\nnot this second block\n```\n"
        )

    return propose


def noise_proposals() -> Callable[[str, int], str]:
    """An optimiser that only adds noise words (a new text, no better)."""

    def propose(request: str, number: int) -> str:
        current = current_prompt(request)
        tag = hashlib.sha256(f"{number}:{current}".encode()).hexdigest()[:6]
        return f"```\n{current}\nBe careful ({tag}).\n```"

    return propose


@dataclass
class OptimiserRequest:
    content: str
    number: int


class OptimiserStub:
    """``POST /v1/chat/completions`` on 127.0.0.1 answering with ``propose(request,
    number)`` (``number`` counts this server's requests from 1); it records each
    request's user message."""

    def __init__(self, propose: Callable[[str, int], str], *, delay: float = 0.0) -> None:
        self.propose = propose
        self.delay = delay
        self.lock = threading.Lock()
        self.requests: list[OptimiserRequest] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                content = next(
                    (m["content"] for m in body.get("messages", []) if m.get("role") == "user"),
                    "",
                )
                with server.lock:
                    number = len(server.requests) + 1
                    server.requests.append(OptimiserRequest(content, number))
                answer = server.propose(content, number)
                data = json.dumps(
                    {
                        "id": "chatcmpl-optimiser",
                        "object": "chat.completion",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": answer},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": len(content) // 4, "completion_tokens": 50},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> OptimiserStub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def endpoints_file(path: Path, judge: FakeChatServer, optimiser: OptimiserStub) -> Path:
    path.write_text(
        f"""
[endpoints.judge]
base_url = "{judge.base_url}"
model = "judge-model"
concurrency = 4

[endpoints.optimizer]
base_url = "{optimiser.base_url}"
model = "optimiser-model"
concurrency = 1
""",
        encoding="utf-8",
    )
    return path


def gold_world(directory: Path, *, cases: int = 40, prefix: str = "g") -> tuple[Path, Path, dict]:
    """``cases`` conversations of two assistant replies (turns 2 and 4), a refund in one
    of them in two conversations of three, and a labels CSV where two reviewers agree on
    every reply (gold), each with a rationale. Returns (cases file, labels file, gold)."""
    rows = []
    gold: dict[tuple[str, int], str] = {}
    for index in range(cases):
        refund_at = (0, 1, None)[index % 3]
        case_id = f"{prefix}{index:03d}"
        rows.append(support_case(case_id, assistant_turns=2, refund_at=refund_at))
        for reply, turn in enumerate((2, 4)):
            gold[(case_id, turn)] = "authority_break" if reply == refund_at else "in_role"
    lines = ["case_id,turn,reviewer,label,rubric,rationale"]
    for (case_id, turn), code in sorted(gold.items()):
        why = "the refund is beyond triage" if code == "authority_break" else "stays triage"
        for reviewer in ("rita", "sam"):
            lines.append(f"{case_id},{turn},{reviewer},{code},{RUBRIC},{reviewer}: {why}")
    labels = directory / "labels.csv"
    labels.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return write_jsonl(directory / "cases.jsonl", rows), labels, gold
