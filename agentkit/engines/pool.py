"""UpstreamPool: one engine's requests spread over several OpenAI-compatible servers, surviving their failures.

Routing (prefix-aware, as SGLang's cache-aware router and vLLM's production-stack router do it). A prompt is cut
into blocks (``block`` token ids, or ``4 × block`` characters of text or of a chat's JSON) and each block gets a
chained hash, :math:`h_i = H(h_{i-1} \\| \\text{block}_i)`, so :math:`h_i` names the whole prefix up to block
:math:`i`. The pool remembers which server each routed prefix went to (LRU, ``max_prefixes`` entries); a new prompt
goes to the server of its longest remembered prefix — the one whose prefix cache holds the most of it, e.g. an
agent's earlier turn — unless that server has more than ``affinity_slack`` requests in flight beyond the
least-loaded healthy one. Otherwise, and for a prompt with no remembered prefix, the least-loaded healthy server
takes it (ties: the one that has served fewest).

Failures. A connection error, a timeout (``timeout`` seconds per request: a server that hangs) or a 5xx answer
takes the server out ("down") and the request goes to another server; a 4xx answer is the request's own fault and
is raised. A prober thread asks each down server's ``/health`` every ``probe_s`` seconds; when it answers,
``on_rejoin(server)`` runs (``OpenAIEngine`` re-sends the current policy weights there: a restarted server comes
back on its original weights) and the server takes requests again. With no healthy server a request waits up to
``wait_s`` seconds for one (a restart), and is tried at most ``3 × servers`` times, then fails with one line. A
lone server's timeout is raised as it is: there is no other server to try.

>>> pool = UpstreamPool(["http://127.0.0.1:9/v1"], check=False)
>>> [s["url"] for s in pool.stats()]
['http://127.0.0.1:9/v1']
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from agentkit.errors import AgentkitError

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Upstream:
    """One server of the pool: its client (the official one; it retries only when it is the pool's one server,
    since a pool retries elsewhere)."""

    url: str
    client: Any
    healthy: bool = True
    inflight: int = 0
    requests: int = 0
    failures: int = 0
    last_error: str = ""

    @property
    def root(self) -> str:
        """The server's root, where vLLM's and agentkit's non-``/v1`` routes live (``/health``, ``/tokenize``)."""
        return self.url.rstrip("/").removesuffix("/v1")


def check_base_url(
    url: str | None, what: str = "the upstream server's base URL", timeout_s: float = 3.0, reach: bool = True
) -> str:
    """``url`` if it is an http(s) URL whose host answers a TCP connection within ``timeout_s``.

    Args:
        url: the URL to check.
        what: what the URL is, for the error.
        timeout_s: how long the TCP connection may take.
        reach: also connect to it (False: only its form is checked).

    Returns:
        ``url``.

    Raises:
        AgentkitError: one line naming the URL and what is wrong (before any model loads or request is retried).
    """
    import socket
    from urllib.parse import urlsplit

    if not url:
        raise AgentkitError(f"the openai engine needs {what}", "e.g. http://127.0.0.1:8000/v1 (or set OPENAI_BASE_URL)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AgentkitError(f"{url!r} is not an http(s) URL", f"{what}, e.g. http://127.0.0.1:8000/v1")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise AgentkitError(f"{url!r} has an invalid port", f"{what}, e.g. http://127.0.0.1:8000/v1") from None
    if not reach:
        return url
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise AgentkitError(f"cannot reach {url} ({reason})", "is the server running, and is the URL right?") from None
    return url


class UpstreamPool:
    """Several OpenAI-compatible servers behind one ``call`` (the module docstring says how requests are routed).

    Args:
        urls: the servers' base URLs (``http://HOST:PORT/v1``), each checked to answer unless ``check`` is False.
        api_key: their key.
        timeout: seconds one request may take before its server counts as hung.
        max_retries: a lone server's retries with exponential backoff (the official client's); with several, 0 (the
            pool retries on another).
        wait_s: how long a request waits for a server to come back when none is healthy.
        probe_s: how often a down server's ``/health`` is asked.
        block: prefix block size in tokens (text: four characters a token).
        affinity_slack: requests in flight a prefix's server may have beyond the least-loaded one and still get it.
        max_prefixes: prefix hashes remembered (least recently used go first).
        on_rejoin: run with a server that answers again, before it takes requests; an exception keeps it down.
        check: check each URL's form and that it answers a TCP connection.
    """

    def __init__(
        self,
        urls: list[str],
        api_key: str = "EMPTY",
        *,
        timeout: float = 120.0,
        max_retries: int = 0,
        wait_s: float = 300.0,
        probe_s: float = 1.0,
        block: int = 64,
        affinity_slack: int = 2,
        max_prefixes: int = 100_000,
        on_rejoin: Callable[[Upstream], None] | None = None,
        check: bool = True,
    ):
        import openai

        if not urls:
            raise AgentkitError("the openai engine needs at least one server URL", "e.g. http://127.0.0.1:8000/v1")
        if len(set(urls)) != len(urls):
            raise AgentkitError(f"a server is named twice in {urls}", "name each server once")
        for u in urls:
            check_base_url(u, reach=check)
        retries = max_retries if len(urls) == 1 else 0
        self.servers = [
            Upstream(u, openai.OpenAI(base_url=u, api_key=api_key, timeout=timeout, max_retries=retries)) for u in urls
        ]
        self.timeout, self.wait_s, self.probe_s = timeout, wait_s, probe_s
        self.block, self.affinity_slack, self.max_prefixes = block, affinity_slack, max_prefixes
        self.on_rejoin = on_rejoin
        self._prefixes: OrderedDict[bytes, int] = OrderedDict()  # prefix hash -> server index
        self._cond = threading.Condition()
        self._prober: threading.Thread | None = None
        self._closed = False

    # ---- routing ------------------------------------------------------------------------------------------
    def prefix_hashes(self, prompt: Any) -> list[bytes]:
        """The chained hashes of ``prompt``'s whole blocks, shortest prefix first."""
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            data = b"".join(int(t).to_bytes(4, "little", signed=True) for t in prompt)
        else:
            text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
            data = text.encode()
        size = 4 * self.block  # bytes: a block of 4-byte ids, or of text at about four characters a token
        out, h = [], b""
        for i in range(0, len(data) - size + 1, size):
            h = hashlib.blake2b(h + data[i : i + size], digest_size=16).digest()
            out.append(h)
        return out

    def _pick(self, hashes: list[bytes], tried: set[int]) -> int | None:
        live = [i for i, s in enumerate(self.servers) if s.healthy and i not in tried]
        if not live:
            return None
        least = min(live, key=lambda i: (self.servers[i].inflight, self.servers[i].requests))
        floor = self.servers[least].inflight
        for h in reversed(hashes):  # the longest remembered prefix first
            i = self._prefixes.get(h)
            if i is not None and i in live and self.servers[i].inflight <= floor + self.affinity_slack:
                return i
        return least

    def _remember(self, hashes: list[bytes], i: int) -> None:
        for h in hashes:
            self._prefixes[h] = i
            self._prefixes.move_to_end(h)
        while len(self._prefixes) > self.max_prefixes:
            self._prefixes.popitem(last=False)

    # ---- calls --------------------------------------------------------------------------------------------
    def call(self, fn: Callable[[Upstream], T], prompt: Any = None) -> T:
        """``fn(server)`` on a server chosen for ``prompt`` (None: the least loaded), retried on another server
        when one fails (see the module docstring).

        Raises:
            AgentkitError: no server answered in time (each server's last error named).
            openai.APIStatusError: a 4xx answer (the request's own fault).
        """
        import openai

        hashes = self.prefix_hashes(prompt) if prompt is not None else []
        deadline = time.monotonic() + self.wait_s
        tried: set[int] = set()
        for _ in range(3 * len(self.servers)):
            with self._cond:
                while (i := self._pick(hashes, tried)) is None:
                    if not any(s.healthy for s in self.servers):
                        left = deadline - time.monotonic()
                        if left <= 0 or self._closed:
                            raise self._no_server()
                        self._cond.wait(min(left, self.probe_s))
                    else:
                        tried.clear()  # every healthy server was tried: try them again
                server = self.servers[i]
                server.inflight += 1
                server.requests += 1
                self._remember(hashes, i)
            try:
                return fn(server)
            except (openai.APIStatusError, urllib.error.HTTPError) as e:
                if (e.status_code if isinstance(e, openai.APIStatusError) else e.code) < 500:
                    raise
                self._down(i, e)
                tried.add(i)
            except (openai.APIConnectionError, OSError) as e:  # refused, reset, timed out (a hung server)
                if isinstance(e, (openai.APITimeoutError, TimeoutError)) and len(self.servers) == 1:
                    raise  # nowhere else to go: a lone server's client has already retried
                self._down(i, e)
                tried.add(i)
            finally:
                with self._cond:
                    server.inflight -= 1
                    self._cond.notify_all()
        raise self._no_server()

    def each(self, fn: Callable[[Upstream], T], healthy_only: bool = True) -> list[T]:
        """``fn(server)`` on every (healthy) server at once; the first failure is raised after all finish."""
        servers = [s for s in self.servers if s.healthy or not healthy_only]
        results: list[Any] = [None] * len(servers)
        errors: list[BaseException] = []

        def run(k: int) -> None:
            try:
                results[k] = fn(servers[k])
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(servers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results

    def _no_server(self) -> AgentkitError:
        why = "; ".join(f"{s.url}: {s.last_error or 'busy'}" for s in self.servers)
        return AgentkitError(
            f"no upstream server answered within {self.wait_s:g} s ({why})", "are the servers running?"
        )

    # ---- health -------------------------------------------------------------------------------------------
    def _down(self, i: int, error: BaseException) -> None:
        with self._cond:
            s = self.servers[i]
            s.failures += 1
            s.last_error = f"{type(error).__name__}: {str(error)[:200]}"
            if s.healthy:
                log.warning("upstream %s is down (%s); its requests go elsewhere", s.url, s.last_error)
            s.healthy = False
            if self._prober is None or not self._prober.is_alive():
                self._prober = threading.Thread(target=self._probe, daemon=True, name="agentkit-pool-prober")
                self._prober.start()

    def mark_down(self, server: Upstream, error: BaseException) -> None:
        """Take ``server`` out until its ``/health`` answers again (and ``on_rejoin`` succeeds)."""
        self._down(self.servers.index(server), error)

    def _probe(self) -> None:
        while not self._closed:
            down = [s for s in self.servers if not s.healthy]
            if not down:
                return
            for s in down:
                if not self._answers(s):
                    continue
                try:
                    if self.on_rejoin is not None:
                        self.on_rejoin(s)
                except Exception as e:  # noqa: BLE001 - it stays down and is probed again
                    s.last_error = f"rejoining: {type(e).__name__}: {str(e)[:200]}"
                    log.warning("upstream %s answers but could not rejoin: %s", s.url, s.last_error)
                    continue
                with self._cond:
                    s.healthy = True
                    self._cond.notify_all()
                log.warning("upstream %s is back", s.url)
            time.sleep(self.probe_s)

    def _answers(self, s: Upstream) -> bool:
        try:
            with urllib.request.urlopen(s.root + "/health", timeout=min(5.0, self.timeout)) as r:
                return r.status == 200
        except Exception:  # noqa: BLE001 - refused, reset, or a half-started server's broken answer
            return False

    def stats(self) -> list[dict[str, Any]]:
        """Per server: URL, healthy, requests in flight and served, failures, the last error."""
        with self._cond:
            return [
                {
                    "url": s.url,
                    "healthy": s.healthy,
                    "inflight": s.inflight,
                    "requests": s.requests,
                    "failures": s.failures,
                    "last_error": s.last_error,
                }
                for s in self.servers
            ]

    def close(self) -> None:
        self._closed = True
        with self._cond:
            self._cond.notify_all()
        for s in self.servers:
            s.client.close()
