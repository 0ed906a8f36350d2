"""OpenAIEngine: the Engine protocol against any OpenAI-compatible server (``vllm serve``, ``agentkit serve``…).

Chats go to ``/v1/chat/completions``, text and token-id prompts to ``/v1/completions``. Timeouts and retries with
exponential backoff are the official client's (``timeout``, ``max_retries``). Entropies are *estimated* from the
``top_logprobs`` the server returns (OpenAI caps k at 20; vLLM allows up to its ``max_logprobs``): see
``topk_entropy``. ``score`` uses ``/v1/completions`` with ``echo`` and ``max_tokens=0`` (prompt logprobs), which
vLLM and agentkit support and api.openai.com does not.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from agentkit.engines.base import Completion, Prompt, SamplingParams, Scored, topk_entropy


class OpenAIEngine:
    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float = 120.0, max_retries: int = 3, max_concurrency: int = 16, entropy_top_k: int = 20):
        import openai

        self.model_name = model
        self.client = openai.OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                    api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
                                    timeout=timeout, max_retries=max_retries)
        self.max_concurrency = max_concurrency
        self.entropy_top_k = entropy_top_k

    def _map(self, fn, items):
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(items)))) as pool:
            return list(pool.map(fn, items))

    def _common(self, p: SamplingParams) -> tuple[dict, int]:
        """Request fields shared by both endpoints, and how many top logprobs to ask for."""
        extra = {"top_k": p.top_k} if p.top_k else {}
        if p.include_stop_str_in_output or p.ignore_eos:
            extra.update(include_stop_str_in_output=p.include_stop_str_in_output, ignore_eos=p.ignore_eos)
        k = max(p.top_logprobs, self.entropy_top_k if p.entropy else 0)
        return dict(model=self.model_name, n=p.n, temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_tokens,
                    seed=p.seed, stop=p.stop or None, extra_body=extra or None), k

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        params = params or SamplingParams()
        params.check_seeds(len(prompts))
        if params.seeds is None:
            return self._map(lambda pr: self._one(pr, params), prompts)
        return self._map(lambda a: self._one(a[0], replace(params, seed=a[1], seeds=None)),
                         list(zip(prompts, params.seeds)))

    def _one(self, prompt: Prompt, p: SamplingParams) -> list[Completion]:
        kw, k = self._common(p)
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):
            r = self.client.chat.completions.create(messages=prompt, logprobs=True, top_logprobs=k or None, **kw)
            out = []
            for ch in r.choices:
                items = (ch.logprobs.content or []) if ch.logprobs else []
                alts = [[(t.token, t.logprob) for t in (it.top_logprobs or [])] for it in items]
                out.append(self._completion(ch.message.content or "", [it.token for it in items],
                                            [it.logprob for it in items], alts, ch.finish_reason, r.usage, p, k))
            return out
        r = self.client.completions.create(prompt=prompt, logprobs=k or 1, **kw)
        out = []
        for ch in r.choices:
            lp = ch.logprobs
            alts = [list((t or {}).items()) for t in (lp.top_logprobs or [])] if lp else []
            out.append(self._completion(ch.text, lp.tokens if lp else [], list(lp.token_logprobs or []) if lp else [],
                                        alts, ch.finish_reason, r.usage, p, k))
        return out

    def _completion(self, text, tokens, lps, alts, finish, usage, p: SamplingParams, k: int) -> Completion:
        """``alts``: per token, the (token string, logprob) alternatives. The entropy is computed from this list,
        not from a dict keyed by token string: different tokens can decode to the same string."""
        # Remote servers return token strings, not ids; ids are filled where the string is an integer id (vLLM's
        # `return_tokens_as_token_ids`), else left as -1 so lengths still align.
        ids = [int(t[9:]) if isinstance(t, str) and t.startswith("token_id:") else -1 for t in tokens]
        ents = [topk_entropy([lp for _, lp in a][:k]) for a in alts] if p.entropy else None
        tops = [dict(a) for a in alts]
        return Completion(text=text, token_ids=ids, logprobs=[x if x is not None else 0.0 for x in lps],
                          finish_reason="length" if finish == "length" else "stop",
                          prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0, entropies=ents,
                          top_logprobs=tops if p.top_logprobs else None)

    def score(self, contexts: list[Prompt], continuations: list[str | list[int]],
              entropy: bool = False) -> list[Scored]:
        def one(pair):
            ctx, cont = pair
            if not isinstance(ctx, str) or not isinstance(cont, str):
                raise TypeError("OpenAIEngine.score takes text contexts and continuations")
            r = self.client.completions.create(model=self.model_name, prompt=ctx + cont, max_tokens=0, echo=True,
                                               logprobs=self.entropy_top_k if entropy else 1, temperature=0)
            lp = r.choices[0].logprobs
            keep = [i for i, off in enumerate(lp.text_offset) if off >= len(ctx)]
            tops = lp.top_logprobs or [{}] * len(lp.tokens)
            return Scored(token_ids=[-1] * len(keep), logprobs=[lp.token_logprobs[i] for i in keep],
                          entropies=[topk_entropy(list((tops[i] or {}).values())) for i in keep] if entropy else None)

        return self._map(one, list(zip(contexts, continuations)))
