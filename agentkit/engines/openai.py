"""OpenAIEngine: the Engine protocol against any OpenAI-compatible server (``vllm serve``, ``agentkit serve``…).

Chats go to ``/v1/chat/completions``, text and token-id prompts to ``/v1/completions``. Timeouts and retries with
exponential backoff are the official client's (``timeout``, ``max_retries``). Entropies are *estimated* from the
``top_logprobs`` the server returns (OpenAI caps k at 20; vLLM allows up to its ``max_logprobs``): see
``topk_entropy``. ``score`` uses ``/v1/completions`` with ``echo`` and ``max_tokens=0`` (prompt logprobs), which
vLLM and agentkit support and api.openai.com does not.

Tokens: with ``tokenizer`` (a local tokenizer of the same model: a catalog name, directory or hub id) they are
computed here; without, they come from the upstream's ``POST /tokenize`` and ``POST /detokenize`` (vLLM's routes,
which ``agentkit serve`` has too). ``token_ids=True`` asks the server for each sampled token's id
(``return_tokens_as_token_ids``, vLLM and agentkit), so completions carry real ids, as the agent loop needs;
set it False for servers that reject unknown fields (api.openai.com); ids are then -1. Constraints go as
``response_format`` (JSON, chat prompts: any OpenAI-compatible server) or as vLLM's ``structured_outputs`` field
(regex, choice, grammar, text prompts: vLLM and ``agentkit serve``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentkit.engines.base import Completion, LocalTokenizer, Prompt, SamplingParams, Scored, topk_entropy
from agentkit.engines.pool import UpstreamPool, check_base_url
from agentkit.errors import AgentkitError
from agentkit.files import atomic_dir
from agentkit.models.catalog import get_info
from agentkit.models.sharding import gathered_out


class OpenAIEngine(LocalTokenizer):
    """The Engine protocol over one or more OpenAI-compatible servers (the module's docstring says what goes where).

    Args:
        model: the served model's name (None: the first one the server lists).
        base_url: the server (``http://HOST:PORT/v1``; default: ``OPENAI_BASE_URL``), or a list of servers of the
            same model, a pool (``agentkit.engines.pool``: prefix-aware least-loaded routing, failed servers taken
            out and their requests retried elsewhere); each checked before anything else.
        api_key: its key (default: ``OPENAI_API_KEY``, else ``EMPTY``).
        tokenizer: a local tokenizer of the same model (catalog name, directory or hub id); without one, tokens
            come from the server's ``/tokenize`` and ``/detokenize``.
        token_ids: ask for sampled tokens' ids (vLLM, agentkit); False for servers that reject unknown fields.
        timeout: seconds per request (a server slower than this counts as hung and is taken out of a pool).
        max_retries: retries with exponential backoff on one server (the official client's); a pool of several
            servers retries on another instead.
        max_concurrency: requests in flight at once.
        entropy_top_k: top logprobs asked per token to estimate entropies (OpenAI caps k at 20).
        wait_s: how long a request waits for a server to come back when none answers (a restart).
        weights_dir: where ``load_weights`` saves a policy for the servers to read (a directory they can see: this
            machine's, or a shared file system); None: a temporary directory here.
        sync_adapters: a PEFT policy goes to the servers as a LoRA adapter (loaded at run time, served under its
            version's name) instead of merged weights.
        weight_transfer: how full weights reach the servers: ``reload`` (saved under ``weights_dir``, each server
            reads them), or through vLLM's weight-transfer API without a file (``agentkit.engines.weight_transfer``):
            ``nccl`` (GPU to GPU) or ``gloo`` (TCP; CPU servers). The servers must be started with that backend
            (``agentkit vllm-serve --weight-transfer``).
        transfer_address: this machine's address the servers' workers reach it at for ``nccl``/``gloo`` (each
            server gets a port of its own).

    Raises:
        AgentkitError: a base URL is missing, not http(s), or does not answer.
    """

    def __init__(
        self,
        model: str | None,
        base_url: str | list[str] | None = None,
        api_key: str | None = None,
        *,
        tokenizer: str | None = None,
        token_ids: bool = True,
        timeout: float = 120.0,
        max_retries: int = 3,
        max_concurrency: int = 16,
        entropy_top_k: int = 20,
        wait_s: float = 300.0,
        weights_dir: str | None = None,
        sync_adapters: bool = True,
        weight_transfer: str = "reload",
        transfer_address: str = "127.0.0.1",
    ):
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        urls = urls or [check_base_url(os.environ.get("OPENAI_BASE_URL"))]
        key = api_key or os.environ.get("OPENAI_API_KEY", "EMPTY")
        self.pool = UpstreamPool(
            urls, key, timeout=timeout, max_retries=max_retries, wait_s=wait_s, on_rejoin=self._rejoin
        )
        self.client = self.pool.servers[0].client
        if not model:  # the first model the server lists (a trainer's rollout server runs the policy's base)
            model = self.pool.call(lambda server: server.client.models.list()).data[0].id
        self.model_name = model
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.entropy_top_k = entropy_top_k
        self.token_ids = token_ids
        self.tokenizer = None
        if tokenizer:
            from agentkit.models import load_tokenizer

            self.tokenizer = load_tokenizer(tokenizer)
        info = get_info(model)
        self.default_stop = list(info.stop) if info is not None and info.stop else []
        self._max_len: int | None = None
        self._pieces: dict[int, str] = {}  # token id -> its text, learned from the upstream
        self.counts = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_prompt_tokens": 0}
        self.weights_dir, self.takes_adapters = weights_dir, sync_adapters
        self.weights: WeightsVersion | None = None  # what load_weights last sent (or adopt_weights took)
        self._adopted = False  # whether another engine sent them (and so unloads them)
        self._token = secrets.token_hex(4)  # names this engine's weight versions apart from another run's
        self._adapters: dict[str, str] = {}  # load_adapter's, loaded again on a server that rejoins
        self.sync_seconds: list[float] = []  # each load_weights' wall time
        if weight_transfer not in ("reload", "gloo", "nccl"):
            raise AgentkitError(f"weight_transfer {weight_transfer!r}: reload, gloo or nccl")
        self.weight_transfer, self.transfer_address = weight_transfer, transfer_address
        self._transfers: dict[str, Any] = {}  # server URL -> its trainer-side transfer engine (weight_transfer)
        self._policy: Any = None  # the model the last transfer sent, sent again to a server that rejoins

    # ---- tokens (local tokenizer, else the upstream's /tokenize and /detokenize) ---------------------------
    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        def on(server) -> dict[str, Any]:
            return _http(server.root + path, {"model": self.model_name, **body}, self._headers, self.timeout)

        try:
            out = self.pool.call(on)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise AgentkitError(
                    f"the upstream server has no {path} route",
                    "pass tokenizer= (a local tokenizer of the same model), or use vLLM or agentkit serve",
                ) from None
            body = e.read()[:300].decode(errors="replace")
            raise AgentkitError(f"{path} on the upstream answered {e.code}: {body}") from None
        if "max_model_len" in out:
            self._max_len = out["max_model_len"]
        return out

    def encode(self, prompt: Prompt) -> list[int]:
        if self.tokenizer is not None:
            return super().encode(prompt)
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            return list(prompt)  # type: ignore[arg-type]
        if isinstance(prompt, str):
            return self._post("/tokenize", {"prompt": prompt, "add_special_tokens": True})["tokens"]
        if not prompt:
            raise ValueError("empty prompt")
        return self._post(
            "/tokenize", {"messages": prompt, "add_generation_prompt": True, "add_special_tokens": False}
        )["tokens"]

    def tokenize(self, text: str) -> list[int]:
        if self.tokenizer is not None:
            return super().tokenize(text)
        return self._post("/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        if self.tokenizer is not None:
            return super().decode(ids, skip_special_tokens)
        return self._post("/detokenize", {"tokens": list(ids)})["prompt"] if ids else ""

    def token_strings(self, ids: list[int]) -> list[str]:
        if self.tokenizer is not None:
            return super().token_strings(ids)
        missing = list(dict.fromkeys(t for t in ids if t not in self._pieces))
        for t, text in zip(missing, self._map(lambda t: self.decode([t], False), missing)):
            self._pieces[t] = text
        return [self._pieces[t] for t in ids]

    @property
    def max_model_len(self) -> int:  # type: ignore[override]
        if self._max_len is None:
            for m in self.pool.call(lambda server: server.client.models.list()).data:
                if m.id == self.model_name and (m.model_extra or {}).get("max_model_len"):
                    self._max_len = int(m.model_extra["max_model_len"])
            if self._max_len is None:
                self._post("/tokenize", {"prompt": "", "add_special_tokens": False})
        return self._max_len or 0

    # ---- generation and scoring ---------------------------------------------------------------------------
    def _map(self, fn, items):
        if len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(items)))) as pool:
            return list(pool.map(fn, items))

    def _common(self, p: SamplingParams) -> tuple[dict, int]:
        """Request fields shared by both endpoints, and how many top logprobs to ask for."""
        extra: dict[str, Any] = {"top_k": p.top_k} if p.top_k else {}
        if p.include_stop_str_in_output or p.ignore_eos:
            extra.update(include_stop_str_in_output=p.include_stop_str_in_output, ignore_eos=p.ignore_eos)
        if self.token_ids:
            extra["return_tokens_as_token_ids"] = True
        k = max(p.top_logprobs, self.entropy_top_k if p.entropy else 0)
        stop = [s for s in p.stop + self.default_stop if s] or None
        return dict(
            model=p.adapter or self.served_name,  # a LoRA adapter is a model of its own on the server (vLLM's way)
            n=p.n,
            temperature=p.temperature,
            top_p=p.top_p,
            max_tokens=p.max_tokens,
            seed=p.seed,
            stop=stop,
            extra_body=extra or None,
        ), k

    def load_adapter(self, name: str, path: str) -> None:
        """Have every server load a LoRA adapter (vLLM's ``POST /v1/load_lora_adapter``; vLLM needs
        ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``, agentkit ``--runtime-lora``); requests
        with ``SamplingParams.adapter=name`` then name it as their model. A server that rejoins the pool loads it
        again."""
        self.pool.each(lambda server: self._control(server, "/v1/load_lora_adapter", lora_name=name, lora_path=path))
        self._adapters[name] = str(path)

    def unload_adapter(self, name: str) -> None:
        self.pool.each(lambda server: self._control(server, "/v1/unload_lora_adapter", lora_name=name))
        self._adapters.pop(name, None)

    def _control(self, server, path: str, query: str = "", **body: Any) -> dict[str, Any]:
        """POST one of a server's control routes (vLLM's, ``agentkit vllm-serve`` turns them on)."""
        try:
            return _http(server.root + path + query, body, self._headers, self.timeout)
        except urllib.error.HTTPError as e:
            if e.code == 404 and not path.startswith("/v1/"):
                raise AgentkitError(
                    f"{server.url} has no {path} route: it cannot take new weights",
                    "start it with `agentkit vllm-serve` (vLLM with its weight-update routes)",
                ) from None
            raise ValueError(f"{path} on {server.url}: the server answered {e.code}: {e.read()[:300]!r}") from None

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        params = params or SamplingParams()
        self.counts["requests"] += 1
        return self._map(lambda a: self._one(*a), list(zip(prompts, params.split(len(prompts)))))

    def _one(self, prompt: Prompt, p: SamplingParams) -> list[Completion]:
        kw, k = self._common(p)
        chat = isinstance(prompt, list) and prompt and isinstance(prompt[0], dict)
        if p.constraint is not None:  # OpenAI's response_format where it can say it, else vLLM's field
            fmt = p.constraint.response_format() if chat else None
            if fmt is not None:
                kw["response_format"] = fmt
            else:
                kw["extra_body"] = {**(kw["extra_body"] or {}), "structured_outputs": p.constraint.vllm_kwargs()}
        if chat:
            r = self.pool.call(
                lambda server: server.client.chat.completions.create(
                    messages=prompt, logprobs=True, top_logprobs=k or None, **kw
                ),
                prompt,
            )
            out = []
            for ch in r.choices:
                items = (ch.logprobs.content or []) if ch.logprobs else []
                alts = [[(t.token, t.logprob) for t in (it.top_logprobs or [])] for it in items]
                out.append(
                    self._completion(
                        ch.message.content or "",
                        [it.token for it in items],
                        [it.logprob for it in items],
                        alts,
                        ch.finish_reason,
                        r.usage,
                        p,
                        k,
                    )
                )
        else:
            r = self.pool.call(
                lambda server: server.client.completions.create(prompt=prompt, logprobs=k or 1, **kw), prompt
            )
            out = []
            for ch in r.choices:
                lp = ch.logprobs
                alts = [list((t or {}).items()) for t in (lp.top_logprobs or [])] if lp else []
                out.append(
                    self._completion(
                        ch.text,
                        lp.tokens if lp else [],
                        list(lp.token_logprobs or []) if lp else [],
                        alts,
                        ch.finish_reason,
                        r.usage,
                        p,
                        k,
                    )
                )
        self._count(r.usage)
        return out

    def _count(self, usage) -> None:
        if usage is None:
            return
        self.counts["prompt_tokens"] += usage.prompt_tokens or 0
        self.counts["completion_tokens"] += usage.completion_tokens or 0
        details = getattr(usage, "prompt_tokens_details", None)
        self.counts["cached_prompt_tokens"] += (getattr(details, "cached_tokens", None) or 0) if details else 0

    def _completion(self, text, tokens, lps, alts, finish, usage, p: SamplingParams, k: int) -> Completion:
        """``alts``: per token, the (token string, logprob) alternatives. The entropy is computed from this list,
        not from a dict keyed by token string: different tokens can decode to the same string."""
        ids = [_token_id(t) for t in tokens]
        ents = [topk_entropy([lp for _, lp in a][:k]) for a in alts] if p.entropy else None
        tops = [self._best(a, p.top_logprobs) for a in alts]
        return Completion(
            text=text,
            token_ids=ids,
            logprobs=[x if x is not None else 0.0 for x in lps],
            finish_reason="length" if finish == "length" else "stop",
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            entropies=ents,
            top_logprobs=tops if p.top_logprobs else None,
        )

    def _best(self, alts: list[tuple[str, float]], k: int) -> dict:
        """The ``k`` best of a position's (token string, logprob) alternatives, best first (more may have been
        asked for the entropy), keyed by token id where the upstream returns ids."""
        return {_token_id(t) if self.token_ids else t: lp for t, lp in sorted(alts, key=lambda x: -x[1])[:k]}

    def score(
        self,
        contexts: list[Prompt],
        continuations: list[str | list[int]],
        entropy: bool = False,
        top_logprobs: int = 0,
    ) -> list[Scored]:
        """Teacher forcing through ``echo``: the context's and continuation's ids are sent as one prompt, and the
        prompt logprobs of the continuation's positions come back."""
        ctx = [self.encode(c) for c in contexts]
        cont = self.continuation_ids(continuations)

        def one(pair):
            a, b = pair
            r = self.pool.call(
                lambda server: server.client.completions.create(
                    model=self.served_name,
                    prompt=a + b,
                    max_tokens=0,
                    echo=True,
                    logprobs=max(self.entropy_top_k if entropy else 1, top_logprobs),
                    temperature=0,
                    # the alternatives' ids, where the server gives them (vLLM, agentkit)
                    extra_body={"return_tokens_as_token_ids": True} if self.token_ids and top_logprobs else None,
                ),
                a + b,
            )
            lp = r.choices[0].logprobs
            tops = lp.top_logprobs or [{}] * len(lp.tokens)
            keep = range(len(a), len(a) + len(b))
            return Scored(
                token_ids=b,
                logprobs=[lp.token_logprobs[i] for i in keep],
                entropies=[topk_entropy(list((tops[i] or {}).values())) for i in keep] if entropy else None,
                top_logprobs=[self._best(list((tops[i] or {}).items()), top_logprobs) for i in keep]
                if top_logprobs
                else None,
            )

        return self._map(one, list(zip(ctx, cont)))

    # ---- life cycle ---------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Usage the upstreams reported (``cached_prompt_tokens`` where they fill ``prompt_tokens_details``); with
        several servers, ``servers``: each one's load and health (``UpstreamPool.stats``)."""
        out: dict[str, Any] = dict(self.counts)
        if len(self.pool.servers) > 1:
            out["servers"] = self.pool.stats()
        return out

    # ---- new weights on the servers -----------------------------------------------------------------------
    @property
    def served_name(self) -> str:
        """The model requests name: the policy's adapter once ``load_weights`` sent one, else the model."""
        return self.weights.version if self.weights is not None and self.weights.adapter else self.model_name

    def load_weights(self, model=None, path: str | None = None) -> None:
        """Serve new weights on every server from now on (a trainer's policy after its optimizer step).

        A PEFT ``model`` (with ``sync_adapters``) or a ``path`` holding ``adapter_config.json`` goes as a LoRA
        adapter: saved under ``weights_dir``, loaded by each server at run time (vLLM's
        ``/v1/load_lora_adapter``), served under a new name, the previous one unloaded. Other weights are saved
        as safetensors (or read from ``path``) and each server reloads them in place through vLLM's RL routes:
        ``/pause`` (in-flight requests finish), ``/collective_rpc reload_weights``, ``/reset_prefix_cache``,
        ``/update_weight_version``, ``/resume``. A server that is down then, or comes back after a restart on
        its original weights, gets them when it rejoins the pool (its version is checked first).

        Raises:
            AgentkitError: a server has no weight routes (start it with ``agentkit vllm-serve``).
        """
        t0 = time.perf_counter()
        if model is None and path is None:
            raise ValueError("load_weights needs a model or a path")
        n = 1 + (self.weights.n if self.weights else 0)
        version = f"{self.model_name}@{self._token}-{n}"
        adapter = (path is None and self.takes_adapters and hasattr(model, "peft_config")) or (
            path is not None and (Path(path) / "adapter_config.json").is_file()
        )
        owned = path is None and (adapter or self.weight_transfer == "reload")
        if path is None and not owned:  # through vLLM's weight-transfer API: no file
            path = ""
            self._policy = model if not hasattr(model, "merge_and_unload") else _merged(model)
        if owned:
            root = Path(self.weights_dir or tempfile.gettempdir()) / f"agentkit-weights-{self._token}"
            path = str(root / str(n))
            weights = model if adapter or not hasattr(model, "merge_and_unload") else _merged(model)
            # written beside and swapped in: a server never reads half a checkpoint
            atomic_dir(Path(path), lambda tmp: weights.save_pretrained(tmp, safe_serialization=True))
        new = WeightsVersion(version, str(path), adapter, owned, n)
        previous, self.weights, self._adopted = self.weights, new, False
        self.pool.each(lambda server: self._send_or_down(server, new, previous))
        if previous is not None and previous.owned:
            shutil.rmtree(previous.path, ignore_errors=True)
        self.sync_seconds.append(time.perf_counter() - t0)

    def adopt_weights(self, weights: WeightsVersion) -> None:
        """Serve ``weights`` that another engine on the same servers sent (the main training process's
        ``load_weights``; the others adopt its version rather than send the same weights again). The sender owns
        and deletes the files, so this engine never does."""
        self.weights, self._adopted = replace(weights, owned=False), True

    def _send_or_down(self, server, new: WeightsVersion, previous: WeightsVersion | None) -> None:
        """``_send``; a server that cannot be reached is taken out of the pool (it gets ``new`` when it rejoins)."""
        try:
            self._send(server, new, previous)
        except OSError as e:  # refused or reset (an answer with an error status is raised by _control)
            self.pool.mark_down(server, e)

    def _send(self, server, new: WeightsVersion, previous: WeightsVersion | None) -> None:
        """Put ``new`` on ``server`` (``previous``: what it served, whose adapter is unloaded)."""
        if new.transferred:
            return self._transfer(server, new)
        if new.adapter:
            self._control(server, "/v1/load_lora_adapter", lora_name=new.version, lora_path=new.path)
            if previous is not None and previous.adapter:
                try:
                    self._control(server, "/v1/unload_lora_adapter", lora_name=previous.version)
                except ValueError:  # a restarted server never had it
                    pass
        else:
            self._control(server, "/pause", "?mode=wait")
            try:
                self._control(server, "/collective_rpc", method="reload_weights", kwargs={"weights_path": new.path})
                self._control(server, "/reset_prefix_cache")
                self._control(server, "/update_weight_version", new_version=new.version)
            finally:
                self._control(server, "/resume")

    def _transfer(self, server, new: WeightsVersion) -> None:
        """Send the policy's tensors to ``server`` through vLLM's weight-transfer API (joining its group first),
        between ``/pause`` and ``/resume`` as a reload."""
        import socket

        from agentkit.engines.weight_transfer import connect, send

        engine = self._transfers.get(server.url)
        if engine is None:
            workers = _http(server.root + "/get_world_size", None, self._headers, self.timeout)["world_size"]

            def post(path: str, **body: Any) -> dict[str, Any]:
                return self._control(server, path, **body)

            with socket.socket() as sock:  # a free port for the group's store, which this process hosts
                sock.bind((self.transfer_address, 0))
                port = sock.getsockname()[1]
            try:
                engine = connect(self.weight_transfer, post, 1 + workers, self.transfer_address, port, self._policy)
            except ValueError as e:
                if "not configured" not in str(e):
                    raise
                raise AgentkitError(
                    f"{server.url} takes no weights over {self.weight_transfer}: no weight transfer is configured",
                    f"start it with `agentkit vllm-serve --weight-transfer {self.weight_transfer}`, or use "
                    "weight_transfer: reload",
                ) from None
            self._transfers[server.url] = engine
        self._control(server, "/pause", "?mode=wait")
        try:
            try:
                send(engine, self._policy)
            except (RuntimeError, ValueError) as e:  # the group broke (a worker died mid-transfer): set up anew
                self._transfers.pop(server.url, None)
                raise ConnectionError(f"weight transfer to {server.url} failed: {e}") from e
            self._control(server, "/reset_prefix_cache")
            self._control(server, "/update_weight_version", new_version=new.version)
        finally:
            self._control(server, "/resume")

    def served_version(self, server) -> str | None:
        """What ``server`` serves now: the version of the weights ``load_weights`` sent it (vLLM's
        ``/weight_info``, or the policy adapter in its ``/v1/models``), None when it serves neither."""
        if self.weights is not None and self.weights.adapter:
            names = {m.id for m in server.client.models.list().data}
            return self.weights.version if self.weights.version in names else None
        return _http(server.root + "/weight_info", None, self._headers, self.timeout).get("weight_version")

    def _rejoin(self, server) -> None:
        """A server that answers again (maybe restarted, on its original weights) gets the current weights and
        adapters before it takes requests."""
        if self.weights is not None and self.served_version(server) != self.weights.version:
            if self._adopted and self.weights.transferred:
                # the tensors are the sender's (the main training process): it sends them when the server rejoins it
                raise ConnectionError(f"{server.url} waits for the weights from the process that sent them")
            if self.weights.transferred and gathered_out(self._policy):
                raise ConnectionError(
                    f"{server.url} cannot be sent the policy between syncs: its weights are ZeRO-3 partitions now "
                    "(use weight_transfer: reload to have restarted servers rejoin mid-run)"
                )
            self._transfers.pop(server.url, None)  # a restarted server has left the transfer group
            self._send(server, self.weights, None)
        for name, path in self._adapters.items():
            try:
                self._control(server, "/v1/load_lora_adapter", lora_name=name, lora_path=path)
            except ValueError:  # it still has it
                pass

    def close(self) -> None:
        """Unload the policy adapter this engine sent (servers outlive a run), stop the pool, delete the files."""
        if self.weights is not None and self.weights.adapter and not self._adopted:
            for server in self.pool.servers:
                try:
                    self._control(server, "/v1/unload_lora_adapter", lora_name=self.weights.version)
                except (OSError, ValueError):  # down, or it never had it (restarted): nothing to unload there
                    pass
        for url, transfer in self._transfers.items():
            server = next(s for s in self.pool.servers if s.url == url)
            try:
                self._control(server, "/shutdown_weight_transfer_engine")
            except (OSError, ValueError, AgentkitError):  # down: its group went with it
                pass
            transfer.shutdown()
        self.pool.close()
        if self.weights is not None and self.weights.owned:
            shutil.rmtree(Path(self.weights.path).parent, ignore_errors=True)


@dataclass(frozen=True)
class WeightsVersion:
    """Weights ``OpenAIEngine.load_weights`` sent: the name servers know them by, where they were read from, whether
    they are a LoRA adapter, whether the engine wrote them (and so deletes them), and the count so far."""

    version: str
    path: str
    adapter: bool
    owned: bool
    n: int

    @property
    def transferred(self) -> bool:
        """Sent as tensors through vLLM's weight-transfer API: no file, no adapter."""
        return not self.path and not self.adapter


def _merged(model: Any) -> Any:
    """A PEFT model's weights merged into a copy of its base (its own ``save_pretrained`` writes only the
    adapter)."""
    import copy

    return copy.deepcopy(model).merge_and_unload()


def _http(url: str, body: dict[str, Any] | None, headers: dict[str, str], timeout: float) -> dict[str, Any]:
    """POST ``body`` as JSON (None: GET); the answer's JSON, or ``{"text": …}`` for a plain-text one (vLLM's LoRA
    routes)."""
    req = urllib.request.Request(url, None if body is None else json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
    try:
        return json.loads(data) if data.strip() else {}
    except ValueError:
        return {"text": data.decode(errors="replace")}


def _token_id(token: Any) -> int:
    """vLLM's and agentkit's ``token_id:123`` → 123; any other token string → -1 (unknown)."""
    return int(token[9:]) if isinstance(token, str) and token.startswith("token_id:") else -1
