"""HTTP pieces shared by `agentkit serve` and the tool servers: OpenAI-shaped errors on every path, bearer-key
auth, and a helper to run a local server process with its log in a file."""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from agentkit.errors import AgentkitError
from agentkit.jsontext import json_depth

log = logging.getLogger("agentkit.server")


class RequestError(Exception):
    """An error answered to the client: HTTP ``status`` with the OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code


def openai_error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
):
    """``{"error": {"message", "type", "param", "code"}}`` with that HTTP status; ``code`` is a string or null,
    as OpenAI sends it (``model_not_found``, ``invalid_api_key``…)."""
    return JSONResponse(
        status_code=status,
        headers=headers,
        content={"error": {"message": message, "type": type_, "param": param, "code": code}},
    )


def field_path(loc: tuple, body: Any, missing: bool = False) -> str:
    """The client's name for a field in a validation error: ``messages[0].content``, not
    ``messages.0.content.str``. Pydantic puts the member of a union it tried (``str``, ``list[str]``) into the
    location; walking the request body alongside tells which parts are keys and indices the client sent
    (``missing``: the last part names a field the client left out).

    >>> field_path(("stop", "str"), {"stop": 3})
    'stop'
    >>> field_path(("messages", 0, "content", "list[dict[str,any]]", 1), {"messages": [{"content": [1, 2]}]})
    'messages[0].content[1]'
    >>> field_path(("messages", 0, "role"), {"messages": [{}]}, missing=True)
    'messages[0].role'
    """
    out, cur = "", body
    for i, part in enumerate(loc):
        if isinstance(part, int) and isinstance(cur, list):
            out, cur = f"{out}[{part}]", cur[part] if part < len(cur) else None
        elif isinstance(part, str) and isinstance(cur, dict) and (part in cur or missing and i == len(loc) - 1):
            out, cur = f"{out}.{part}" if out else part, cur.get(part)
        # anything else is the tag of a union member, not part of the client's field path
    return out


def validation_error(errors: list[dict[str, Any]], body: Any) -> RequestError:
    """One 400 error listing every problem (``field: what is wrong``); ``param`` is the first field."""
    if not isinstance(body, dict):
        return RequestError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    problems: dict[str, list[str]] = {}  # field -> what is wrong (the members of a union: one each)
    for err in errors:
        path = field_path(tuple(err.get("loc", ())), body, err.get("type") == "missing")
        problems.setdefault(path or "body", []).append(err.get("msg", "invalid"))
    text = "; ".join(f"{path}: {' or '.join(dict.fromkeys(msgs))}" for path, msgs in problems.items())
    first = next(iter(problems), "body")
    return RequestError(400, text, param=None if first == "body" else first)


# Limits on a JSON body, checked before it is parsed (a body nested 100,000 deep exhausts the parser's recursion).
MAX_JSON_DEPTH = 64
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]", re.IGNORECASE)


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def parse_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """A request body as a JSON object, or a ``RequestError``. Before parsing, the body may nest at most
    ``max_depth`` deep; after, text must be valid Unicode (JSON's ``\\ud800`` escapes can spell lone surrogates,
    which no tokenizer takes; NUL is valid text and passes)."""
    depth = json_depth(raw)
    if depth > max_depth:
        raise RequestError(
            400, f"the request body nests {depth} levels deep; at most {max_depth} are accepted", code="too_deep"
        )
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(400, f"the request body is not valid JSON ({e})") from None
    except RecursionError:  # a parser with less stack than the depth limit assumes
        raise RequestError(400, "the request body nests too deeply", code="too_deep") from None
    if not isinstance(body, dict):
        raise validation_error([], body)
    if _SURROGATE.search(raw) and _lone_surrogate(body):
        raise RequestError(
            400, "the request has text with a lone UTF-16 surrogate (\\ud800-\\udfff), not valid Unicode"
        )
    return body


class CheckedJSONRoute(APIRoute):
    """A route whose JSON body is read and checked before FastAPI validates it into the route's typed body
    parameter: at most ``max_body_bytes`` (413 as soon as it grows past them), nested at most ``max_json_depth``
    deep, valid JSON and valid Unicode, whatever its ``Content-Type`` says (both limits from
    ``app.state.body_limits``, a ``(max_bytes, max_depth)`` pair; 16 MiB and 64 when unset). A large body is parsed
    off the event loop, which other requests need."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def checked(request: Request):
            max_bytes, max_depth = getattr(request.app.state, "body_limits", (16 << 20, MAX_JSON_DEPTH))
            raw = await read_body(request, max_bytes)
            if len(raw) > 1 << 18:
                body = await run_in_threadpool(parse_json, raw, max_depth)
            else:
                body = parse_json(raw, max_depth)
            headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
            json_request = Request(
                {**request.scope, "headers": [*headers, (b"content-type", b"application/json")]}, request.receive
            )
            json_request._body, json_request._json = raw, body  # what FastAPI reads next: the checked body
            return await handler(json_request)

        return checked


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request's body, refused with 413 as soon as it grows past ``max_bytes`` (not after reading it all)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(
            413, f"the request body has {int(declared)} bytes; at most {max_bytes} are accepted", code="too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(413, f"the request body is larger than {max_bytes} bytes", code="too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def install_error_handlers(app: FastAPI) -> None:
    """Every non-2xx answer in the OpenAI error shape: ``RequestError``, unknown routes (404), wrong methods
    (405), FastAPI's own body validation, and any other exception (500, logged once with its traceback)."""

    @app.exception_handler(RequestError)
    async def request_error(_: Request, e: RequestError):
        return openai_error(e.status, e.message, e.type, e.param, e.code)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException):
        codes = {404: "unknown_url", 405: "method_not_allowed"}
        message = {
            404: f"unknown URL: {request.method} {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(e.status_code, str(e.detail))
        return openai_error(
            e.status_code, message, "invalid_request_error", None, codes.get(e.status_code), dict(e.headers or {})
        )

    @app.exception_handler(RequestValidationError)
    async def bad_body(_: Request, e: RequestValidationError):
        errors = [
            {**x, "loc": tuple(x.get("loc", ()))[1:] if x.get("loc", ())[:1] == ("body",) else x.get("loc", ())}
            for x in e.errors()
        ]
        err = validation_error(errors, e.body)
        return openai_error(err.status, err.message, err.type, err.param)

    app.add_middleware(_ServerErrors)


# Both middlewares are plain ASGI, not Starlette's ``BaseHTTPMiddleware``: under that one an endpoint never learns
# that its client hung up (``request.is_disconnected()`` stays False), and a server must cancel such work.
class _ServerErrors:
    """Any exception a route raises before its response starts: a 500 in the OpenAI shape, logged once."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as e:  # a bug or an engine failure: the client still gets the OpenAI shape
            if not getattr(e, "agentkit_logged", False):
                log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if started:
                raise
            await openai_error(500, f"{type(e).__name__}: {e}", "server_error")(scope, receive, send)


class _BearerKey:
    def __init__(self, app, expected: bytes):
        self.app, self.expected = app, expected

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                answer = openai_error(
                    401,
                    "missing or wrong API key (send 'Authorization: Bearer KEY')",
                    "authentication_error",
                    code="invalid_api_key",
                )
                return await answer(scope, receive, send)
        await self.app(scope, receive, send)


OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs"})


class BearerKeyFromEnv(_BearerKey):
    """``_BearerKey`` for vLLM's server, whose ``--middleware`` takes a class it builds with the app alone: the key
    is ``VLLM_API_KEY``. vLLM's own check guards only ``/v1…``, which leaves its weight-update routes
    (``/collective_rpc``, ``/pause``…) open; ``agentkit vllm-serve`` adds this when it has a key."""

    def __init__(self, app):
        super().__init__(app, f"Bearer {os.environ['VLLM_API_KEY']}".encode())


def require_bearer_key(app: FastAPI, api_key: str | None) -> None:
    """With a key, every route needs ``Authorization: Bearer KEY`` (401 otherwise) but ``/health`` and the API's
    own description (``/openapi.json``, ``/docs``)."""
    if api_key:
        app.add_middleware(_BearerKey, expected=f"Bearer {api_key}".encode())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(url: str, timeout_s: float = 300.0, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers; raise if ``proc`` exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the server at {url} exited with code {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server at {url} did not come up in {timeout_s:g} s") from None
            time.sleep(0.1)


def _prctl():
    """libc's ``prctl``, bound here, before any fork: the forked child should not import (another thread may hold
    the import lock at the fork, and the child would wait for it before exec)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


_PRCTL = _prctl()


def _die_with_parent() -> None:
    """In the child, before exec: Linux sends it SIGTERM when the parent dies (no orphaned servers)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ServerProcess:
    """A server started as a child process, its output appended to ``log_path`` (never a pipe: a pipe nobody
    reads fills after ~64 KB and blocks the server on its own logging).

    ``args`` are the command's arguments after the Python interpreter (``["-m", "agentkit", "serve", ...]``);
    the port is appended as ``--port N``. Use as a context manager: entering waits for ``GET health``, leaving
    stops the process. Failures raise ``AgentkitError`` naming the log file and quoting its last line.
    """

    def __init__(
        self,
        args: list[str],
        log_path: str | Path,
        *,
        startup_timeout_s: float = 300.0,
        health: str = "/health",
        env: dict[str, str] | None = None,
        python: str = sys.executable,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_path)
        self.cmd = [python, *args, "--port", str(self.port)]
        self.startup_timeout_s, self.health = startup_timeout_s, health
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                # Linux ties the death signal to the thread that forks: a server started from a thread that then
                # ends would be killed with it, so only the main thread asks for it
                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
            )
        try:
            wait_until_healthy(self.url + self.health, self.startup_timeout_s, self.proc)
        except RuntimeError as e:
            self.stop()
            raise self.error(str(e)) from None
        return self

    def error(self, message: str) -> Exception:
        """``message`` with where the server's log is and its last line (one line, for the CLI)."""
        last = next((x.strip() for x in reversed(self.tail().splitlines()) if x.strip()), "")
        return AgentkitError(
            message, f"server log: {self.log_path}" + (f"; its last line: {last[-300:]}" if last else "")
        )

    def tail(self, chars: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - chars))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout_s)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
