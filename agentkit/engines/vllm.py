"""VLLMEngine: the Engine protocol over ``vllm.LLM`` (GPU). Importing this module does not import vllm.

Logprobs are of the raw model distribution (``logprobs_mode="raw_logprobs"`` where the installed vLLM has it);
entropies are estimated from the top-``entropy_top_k`` logprobs (``max_logprobs`` is raised to match; Tool-Light
uses k=50). ``score`` uses ``prompt_logprobs`` with one generated token.
"""

from __future__ import annotations

from agentkit.engines.base import Completion, Prompt, SamplingParams, Scored, encode_prompt, topk_entropy


class VLLMEngine:
    def __init__(self, model: str = "smollm2-135m", *, entropy_top_k: int = 50, **llm_kwargs):
        try:
            import vllm
        except ImportError as e:  # pragma: no cover - depends on the install
            from agentkit.errors import AgentkitError

            raise AgentkitError("VLLMEngine needs vLLM", "run: pip install 'agentkit[vllm]' on a CUDA machine") from e
        from agentkit.models import resolve

        self._vllm = vllm
        self.model_name = model
        self.entropy_top_k = entropy_top_k
        llm_kwargs.setdefault("max_logprobs", max(entropy_top_k, 20))
        llm_kwargs.setdefault("enable_prefix_caching", True)
        try:
            self.llm = vllm.LLM(model=str(resolve(model)), logprobs_mode="raw_logprobs", **llm_kwargs)
        except TypeError:  # older vLLM without logprobs_mode
            self.llm = vllm.LLM(model=str(resolve(model)), **llm_kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def _inputs(self, prompts: list[Prompt]):
        return [{"prompt": p} if isinstance(p, str) else {"prompt_token_ids": self.encode(p)} for p in prompts]

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        p = params or SamplingParams()
        k = max(p.top_logprobs, self.entropy_top_k if p.entropy else 0, 1)
        p.check_seeds(len(prompts))

        def params_for(seed):
            return self._vllm.SamplingParams(n=p.n, temperature=p.temperature, top_p=p.top_p, top_k=p.top_k or -1,
                                             max_tokens=p.max_tokens, seed=seed, stop=p.stop or None, logprobs=k,
                                             include_stop_str_in_output=p.include_stop_str_in_output,
                                             ignore_eos=p.ignore_eos)

        sp = [params_for(s) for s in p.seeds] if p.seeds is not None else params_for(p.seed)
        results = self.llm.generate(self._inputs(prompts), sp, use_tqdm=False)
        out = []
        for r in results:
            comps = []
            for o in r.outputs:
                steps = o.logprobs or []
                lps = [s[t].logprob for s, t in zip(steps, o.token_ids)]
                tops = [{tid: lp.logprob for tid, lp in s.items()} for s in steps]
                comps.append(Completion(
                    text=o.text, token_ids=list(o.token_ids), logprobs=lps,
                    finish_reason="length" if o.finish_reason == "length" else "stop",
                    prompt_tokens=len(r.prompt_token_ids or []),
                    entropies=[topk_entropy(sorted(t.values(), reverse=True)[:k]) for t in tops] if p.entropy else None,
                    top_logprobs=tops if p.top_logprobs else None, stop_reason=o.stop_reason))
            out.append(comps)
        return out

    def score(self, contexts: list[Prompt], continuations: list[str | list[int]],
              entropy: bool = False) -> list[Scored]:
        ctx_ids = [self.encode(c) for c in contexts]
        cont_ids = [list(c) if not isinstance(c, str) else self.tokenizer(c, add_special_tokens=False).input_ids
                    for c in continuations]
        k = self.entropy_top_k if entropy else 1
        sp = self._vllm.SamplingParams(max_tokens=1, prompt_logprobs=k, temperature=0)
        res = self.llm.generate([{"prompt_token_ids": a + b} for a, b in zip(ctx_ids, cont_ids)], sp, use_tqdm=False)
        out = []
        for r, a, b in zip(res, ctx_ids, cont_ids):
            steps = (r.prompt_logprobs or [])[len(a):]
            out.append(Scored(token_ids=b, logprobs=[s[t].logprob for s, t in zip(steps, b)],
                              entropies=[topk_entropy([x.logprob for x in s.values()]) for s in steps]
                              if entropy else None))
        return out
