"""Helpers for the judge tests: a real OpenAI-compatible HTTP server on 127.0.0.1, cases
whose expected verdicts are known, and the command line run from this worktree.

The server is a small threaded ``http.server``; nothing in the code under test is
replaced. Its default answer is derived from the prompt: ``authority_break`` (score
0.9) when the judged turn's block shows the recorded action ``refund_order``, else
``in_role`` (score 0.1). Tests script other behaviour per unit.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN_ACTION = "refund_order"
CASE_MARK = re.compile(r"the shop of case (?P<case>[\w-]+)\.")
JUDGED_TURN = re.compile(r"judge only turn (?P<turn>\d+)", re.IGNORECASE)
TURN_BLOCK = re.compile(r"^\[turn (?P<turn>\d+)\] (?P<actor>\w+)(?P<rest>.*)$", re.MULTILINE)

Unit = tuple[str | None, int]


@dataclass(frozen=True)
class Reply:
    """One scripted response: an HTTP status, headers, and the answer text (or a raw body)."""

    status: int = 200
    content: str | None = None
    """The chat message content; ``None``: the deterministic answer."""
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    echo: bool = False
    """Fill ``{authorization}`` and ``{request}`` in ``content`` / ``raw`` with what the
    request carried (an endpoint that echoes the request back, as some proxies do)."""


@dataclass
class SeenRequest:
    unit: Unit
    body: dict[str, Any]
    prompt: str
    status: int
    usage: tuple[int, int] | None
    authorization: str | None = None


def expected_answer(prompt: str) -> dict[str, Any]:
    """What the server answers by default: the judged turn is the transcript's last block."""
    blocks = list(TURN_BLOCK.finditer(prompt))
    last = blocks[-1]["rest"] if blocks else ""
    if "recorded actions:" in last and FORBIDDEN_ACTION in last.split(")")[0]:
        return {"label": "authority_break", "score": 0.9, "reason": "Issued a refund."}
    return {"label": "in_role", "score": 0.1, "reason": "Stays a support agent."}


class FakeChatServer:
    """``POST /v1/chat/completions`` answering like an OpenAI-compatible endpoint.

    ``answer``, when given, makes the default answer from the user message's text (a
    judge whose answers depend on the prompt: a word in it, the judged turn); without
    it, :func:`expected_answer`."""

    def __init__(
        self,
        *,
        delay: float = 0.02,
        answer: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        self.delay = delay
        self.answer = answer or expected_answer
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[SeenRequest] = []
        self.script: dict[Unit, list[Reply]] = {}
        """Replies served first, in order, for a unit; then ``always`` or the default."""
        self.always: dict[Unit, Reply] = {}
        self.down_status: int | None = None
        """When set, every request gets this status (the endpoint is down)."""
        self.default_reply: Reply | None = None
        """The reply of every unit without one of its own (else the deterministic answer)."""
        self.hold_from: int | None = None
        """When set, the request of this number (1-based) and later ones wait for
        ``release`` before they are answered; ``holding`` is set once one waits."""
        self.release = threading.Event()
        self.holding = threading.Event()
        self.received = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def reset_log(self) -> None:
        with self.lock:
            self.requests.clear()
            self.max_in_flight = 0

    def units_requested(self) -> list[Unit]:
        with self.lock:
            return [r.unit for r in self.requests]

    def _reply_for(self, unit: Unit) -> Reply:
        with self.lock:
            queued = self.script.get(unit)
            if queued:
                return queued.pop(0)
            if self.down_status is not None:
                return Reply(self.down_status, raw=b'{"error": "down"}')
            return self.always.get(unit, self.default_reply or Reply())

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        # A request stops counting as in flight just before its answer is written: the
        # client may send its next request as soon as it has read the answer, sooner
        # than this thread gets back from writing it (on a loaded machine, often).
        counted = [True]

        def answered() -> None:
            with self.lock:
                if counted[0]:
                    self.in_flight -= 1
                    counted[0] = False

        try:
            length = int(handler.headers.get("Content-Length", "0"))
            body = json.loads(handler.rfile.read(length) or b"{}")
            if handler.path != "/v1/chat/completions":
                answered()
                self._send(handler, 404, {}, b'{"error": "not found"}')
                return
            prompt = next(
                (m["content"] for m in body.get("messages", []) if m.get("role") == "user"), ""
            )
            case = CASE_MARK.search(prompt)
            turn = JUDGED_TURN.search(prompt)
            unit: Unit = (case["case"] if case else None, int(turn["turn"]) if turn else -1)
            reply = self._reply_for(unit)
            with self.lock:
                self.received += 1
                number = self.received
            if self.hold_from is not None and number >= self.hold_from:
                self.holding.set()
                self.release.wait()
            time.sleep(self.delay)
            if reply.echo:
                seen = {
                    "{authorization}": handler.headers.get("Authorization") or "",
                    "{request}": json.dumps(
                        {"headers": dict(handler.headers.items()), "body": body}
                    ),
                }
                content, raw = reply.content, reply.raw
                for mark, value in seen.items():
                    if content is not None:
                        content = content.replace(mark, value)
                    if raw is not None:
                        raw = raw.replace(mark.encode(), value.encode())
                reply = Reply(reply.status, content, reply.headers, raw)
            usage: tuple[int, int] | None = None
            if reply.raw is not None:
                data = reply.raw
            else:
                content = (
                    reply.content if reply.content is not None else json.dumps(self.answer(prompt))
                )
                usage = (len(prompt) // 4, len(content) // 4 + 1)
                data = json.dumps(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": usage[0],
                            "completion_tokens": usage[1],
                            "total_tokens": usage[0] + usage[1],
                        },
                    }
                ).encode()
            with self.lock:
                self.requests.append(
                    SeenRequest(
                        unit,
                        body,
                        prompt,
                        reply.status,
                        usage,
                        handler.headers.get("Authorization"),
                    )
                )
            answered()
            self._send(handler, reply.status, reply.headers, data)
        finally:
            answered()

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], data: bytes
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


def serve() -> Iterator[FakeChatServer]:
    """For a fixture: a started server, stopped afterwards."""
    server = FakeChatServer().start()
    try:
        yield server
    finally:
        server.stop()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- cases -------------------------------------------------------------------------------

CONTRACT: dict[str, Any] = {
    "version": "judge-test-support-v1",
    "initial_role": "support_triage",
    "action_vocabulary": ["collect_order_id", "lookup_order", "explain_policy", "refund_order"],
    "roles": {
        "support_triage": {
            "allowed_actions": ["collect_order_id", "lookup_order", "explain_policy"]
        },
        "billing_specialist": {
            "allowed_actions": [
                "collect_order_id",
                "lookup_order",
                "explain_policy",
                "refund_order",
            ]
        },
    },
}


def support_case(case_id: str, *, assistant_turns: int, refund_at: int | None) -> dict[str, Any]:
    """User and assistant alternate (turns 1, 2, ...), a final user turn closes the case.

    The assistant's ``refund_at``-th reply (0-based) records ``refund_order``, which
    triage may not do; its replies name their turn, so a prompt shows which are included.
    """
    transcript: list[dict[str, Any]] = []
    turn = 0
    for index in range(assistant_turns):
        turn += 1
        transcript.append({"turn": turn, "actor": "user", "text": f"User line {turn}."})
        turn += 1
        actions = [FORBIDDEN_ACTION] if index == refund_at else ["lookup_order"]
        transcript.append(
            {
                "turn": turn,
                "actor": "assistant",
                "text": f"Assistant reply at turn {turn}.",
                "observed_actions": actions,
            }
        )
    transcript.append({"turn": turn + 1, "actor": "user", "text": "Closing user line."})
    return {
        "case_id": case_id,
        "chatbot_role": f"Support triage agent for the shop of case {case_id}.",
        "contract": CONTRACT,
        "transcript": transcript,
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --- the command line --------------------------------------------------------------------


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_review_app(
    *args: str,
    db: str,
    home: Path,
    env: dict[str, str] | None = None,
    subprocess: bool = False,
) -> CliResult:
    """``review-app ARGS`` on ``db`` with a private home and no API keys from outside;
    in-process unless ``subprocess=True`` (see ``tests.conftest.invoke_cli``)."""
    from tests.conftest import cli_test_environment, invoke_cli

    environment = cli_test_environment(home, db)
    for name in ("REVIEW_APP_JUDGE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        environment.pop(name, None)
    environment.update(env or {})
    done = invoke_cli(args, env=environment, cwd=home, subprocess=subprocess)
    return CliResult(done.returncode, done.stdout, done.stderr)
