"""Stored responses of the Responses API (``store: true``): SQLite, bounded in size, each response expiring.

A row holds one response (its JSON, as ``GET /v1/responses/{id}`` answers it) and its **context**: every input item
the model saw for it, the inherited conversation of ``previous_response_id`` first. A follow-up's conversation is
its previous response's context, that response's output items, then its own input, so function calls and their
``function_call_output`` round-trip across ``previous_response_id`` (the items are stored, not re-derived from text).

Bounds: at most ``max_responses`` rows and ``max_mb`` of JSON; beyond either the oldest rows go first. Each row
expires ``ttl_s`` after it was written (an expired row reads as absent and is swept on the next write). One
connection, one writer at a time (a lock); a file-backed store survives restarts, ``":memory:"`` does not.

>>> store = ResponseStore(":memory:", max_responses=2)
>>> for i in range(3):
...     store.put({"id": f"resp_{i}", "status": "completed"}, [{"role": "user", "content": str(i)}])
>>> store.get("resp_0") is None, store.get("resp_2")[1]
(True, [{'role': 'user', 'content': '2'}])
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    written REAL NOT NULL,
    expires REAL NOT NULL,
    bytes INTEGER NOT NULL,
    response TEXT NOT NULL,
    context TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_written ON responses (written);
"""


class ResponseStore:
    """Responses by id, with the input items behind each.

    Args:
        path: the SQLite file (its folder is created), or ``":memory:"``.
        max_responses: the most rows kept; the oldest go first.
        max_mb: the most JSON kept, in MB; the oldest go first (a response larger than this is not stored).
        ttl_s: seconds a response stays readable after it was last written.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        max_responses: int = 10_000,
        max_mb: float = 256.0,
        ttl_s: float = 30 * 86400,
    ):
        for name, value in (("max_responses", max_responses), ("max_mb", max_mb), ("ttl_s", ttl_s)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if str(path) != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            path = str(Path(path).expanduser())
        self.path, self.max_responses, self.max_bytes, self.ttl_s = str(path), max_responses, int(max_mb * 2**20), ttl_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def put(self, response: dict[str, Any], context: list[dict[str, Any]]) -> bool:
        """Write (or overwrite) ``response`` under its ``id``; False when it alone is larger than the bound."""
        body, ctx = json.dumps(response), json.dumps(context)
        size = len(body) + len(ctx)
        if size > self.max_bytes:
            return False
        now = time.time()
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM responses WHERE expires <= ?", (now,))
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                (response["id"], now, now + self.ttl_s, size, body, ctx),
            )
            self._evict()
        return True

    def _evict(self) -> None:
        count, total = self._db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses").fetchone()
        if count <= self.max_responses and total <= self.max_bytes:
            return
        drop, freed = [], 0
        for rid, size in self._db.execute("SELECT id, bytes FROM responses ORDER BY written, rowid"):
            if count - len(drop) <= self.max_responses and total - freed <= self.max_bytes:
                break
            drop.append((rid,))
            freed += size
        self._db.executemany("DELETE FROM responses WHERE id = ?", drop)

    def get(self, response_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """(response, context) of ``response_id``; None when unknown, deleted, evicted or expired."""
        with self._lock:
            row = self._db.execute(
                "SELECT response, context FROM responses WHERE id = ? AND expires > ?", (response_id, time.time())
            ).fetchone()
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    def delete(self, response_id: str) -> bool:
        """Remove ``response_id``; False when there was no such response."""
        with self._lock, self._db:
            return self._db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses WHERE expires > ?", (time.time(),)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
