"""Loopback HTTP servers that speak the Anthropic Messages API and OpenAI chat.completions from a script.

The real SDKs talk to them over 127.0.0.1, so requests and responses go through the same code as in production.
A script is a callable `(index, request_body) -> (status, body)`; helpers build tool-use turns and errors.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    """Its request threads are joined when it closes: none outlives its test to print into a later test's output
    (a request the client gave up on, whose answer then found the socket closed, did so under pytest-xdist)."""

    daemon_threads = False
    block_on_close = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the client stopped waiting for this answer (a timeout the test provoked)
        super().handle_error(request, client_address)


class Loopback:
    def __init__(self, script):
        self.script = script
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _answer(self, status: int, body: dict, headers: dict | None = None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    return self._answer(200, {"object": "list", "data": [
                        {"id": "served-model", "object": "model", "created": 0, "owned_by": "test"}]})
                self._answer(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer.lock:
                    index = len(outer.requests)
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    outer.requests.append({"path": self.path, "body": body, "headers": headers})
                answer = outer.script(index, body)
                status, payload = answer[0], answer[1]
                self._answer(status, payload, answer[2] if len(answer) > 2 else None)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Loopback:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def sequence(responses):
    """A script that plays `responses` in order, then repeats the last one."""
    def script(index, body):
        return responses[min(index, len(responses) - 1)]
    return script


_IDS = itertools.count(1)


# -- Anthropic Messages API --------------------------------------------------------------------------------------------

def anthropic_turn(*calls, text: str = "", usage=(1000, 50), model: str = "claude-sonnet-5-5", ids=None):
    """200 response with a text block and tool_use blocks; each call is (name, input)."""
    content = [{"type": "text", "text": text}] if text else []
    for i, (name, arguments) in enumerate(calls):
        call_id = ids[i] if ids else f"toolu_{next(_IDS):06d}"
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return 200, {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0},
    }


def anthropic_error(status: int, kind: str, message: str = "try again", headers: dict | None = None):
    return status, {"type": "error", "error": {"type": kind, "message": message}}, headers or {}


# -- OpenAI chat.completions -------------------------------------------------------------------------------------------

def openai_turn(*calls, text: str | None = None, usage=(1000, 50), model: str = "served-model"):
    """200 response; each call is (name, arguments) where arguments is a dict or a raw string."""
    tool_calls = [{"id": f"call_{i}_{name}", "type": "function",
                   "function": {"name": name, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                  for i, (name, a) in enumerate(calls)]
    message = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return 200, {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def openai_error(status: int, message: str = "try again"):
    return status, {"error": {"message": message, "type": "server_error", "code": None}}
