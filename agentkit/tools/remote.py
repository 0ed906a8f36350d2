"""RemoteTool: a tool served by ``agentkit tool-server`` (or any server with the same contract), used exactly
like a local tool. Network failures become error results the model sees, never exceptions."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from agentkit.tools.base import ToolResult


class RemoteTool:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0):
        self.url, self.api_key, self.timeout = url.rstrip("/"), api_key, timeout
        spec = self._request("GET", "/v1/tool")
        self.name, self.description, self.parameters = spec["name"], spec["description"], spec["parameters"]

    def _request(self, method: str, path: str, body: dict | None = None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(
            self.url + path,
            method=method,
            headers=headers,
            data=json.dumps(body).encode() if body is not None else None,
        )
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            return json.loads(r.read())

    def __call__(self, session_id: str | None = None, **arguments: Any) -> ToolResult:
        try:
            r = self._request("POST", "/v1/call", {"arguments": arguments, "session_id": session_id})
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read())["error"]["message"]
            except Exception:
                msg = str(e)
            return ToolResult(f"Error: the {self.name} server answered {e.code}: {msg}", ok=False)
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            return ToolResult(f"Error: the {self.name} server is unreachable ({e})", ok=False)
        return ToolResult(r["output"], ok=r["ok"], meta=r.get("meta", {}))

    def close_session(self, session_id: str) -> None:
        """End a session on the server (``DELETE /v1/sessions/ID``); a server without sessions ignores it."""
        from urllib.parse import quote

        try:
            self._request("DELETE", "/v1/sessions/" + quote(session_id, safe=""))
        except (urllib.error.URLError, TimeoutError, OSError):
            pass  # the server reaps idle sessions itself

    def close(self) -> None:
        """Nothing to release: each call is its own connection, and the server closes idle sessions."""
