"""HTTP pieces shared by `agentkit serve` and the tool servers: OpenAI-shaped errors, bearer-key auth, and
helpers to start a local server process and wait for it."""

from __future__ import annotations

import hmac
import socket
import subprocess
import time
import urllib.request

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def openai_error(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None):
    """``{"error": {"message", "type", "param", "code"}}`` with that HTTP status."""
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": type_, "param": param,
                                                               "code": status}})


def require_bearer_key(app: FastAPI, api_key: str | None) -> None:
    """With a key, every ``/v1/`` route needs ``Authorization: Bearer KEY`` (401 otherwise); health stays open."""
    if not api_key:
        return
    expected = f"Bearer {api_key}".encode()

    @app.middleware("http")
    async def auth(request: Request, call_next):
        if request.url.path.startswith("/v1/") and not hmac.compare_digest(
                request.headers.get("authorization", "").encode(), expected):
            return openai_error(401, "missing or wrong API key (send 'Authorization: Bearer KEY')",
                                "authentication_error")
        return await call_next(request)


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
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {url} did not come up") from None
            time.sleep(0.1)
