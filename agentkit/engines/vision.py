"""``VisionEngine``: the Engine protocol on a transformers vision-language model (tested: the LLaVA family).

Prompts are chats whose messages may hold image parts (``agentkit.engines.base.image_parts``), plain text, token
ids, or ``ImagePrompt`` (ids with their images: the agent loop's later turns). The model's processor renders a
chat with its template and expands each image into the model's image tokens; generation runs through
transformers' own ``generate``, which knows each family's image inputs and positions (Qwen2-VL's 3-D rotary
positions, for one). That is why this engine does not share ``HFEngine``'s prefix cache: image tokens of two
different pictures have equal ids, so keys/values cannot be reused by matching ids.

Sampling follows ``SamplingParams`` (temperature, top-p, top-k, stop strings, n). A prompt with a seed (``seed``
or ``seeds``) is sampled on its own under that seed, so it gets the same samples whatever else is in its call;
prompts without one are batched. Logprobs and entropies are those of the model's own distribution (temperature
1), as ``HFEngine`` gives them. Not offered: constraints (structured outputs) and ``score``.
"""

from __future__ import annotations

from typing import Any

import torch

from agentkit.engines.base import (
    Completion,
    ContextLengthError,
    ImagePrompt,
    LocalTokenizer,
    Prompt,
    SamplingParams,
    Scored,
    chat_images,
    image_parts,
)
from agentkit.engines.hf import _find_stop


def as_template_chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat as processors' templates expect it: every image part a bare ``{"type": "image"}`` placeholder (the
    pictures go to the processor separately)."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = [
                {"type": "image"} if isinstance(p, dict) and p.get("type") in ("image", "image_url") else p
                for p in content
            ]
        out.append({**m, "content": content})
    return out


class VisionEngine(LocalTokenizer):
    """Generate with a vision-language model (see the module docstring).

    Args:
        model: a catalog name, a local directory or hub id of an image-text-to-text model, or a loaded model.
        processor: required when ``model`` is a loaded model (its ``AutoProcessor``).
        name: the model's name (default: ``model`` when it is a name, else the loaded model's ``name_or_path``).
        max_batch_size: most unseeded sequences generated together.
    """

    def __init__(
        self,
        model: Any = "tiny-random-vlm",
        processor: Any = None,
        *,
        name: str | None = None,
        dtype: str = "float32",
        device: str | None = None,
        max_batch_size: int = 16,
        max_model_len: int | None = None,
    ):
        from agentkit.models.catalog import load_vision_model, stop_strings_for

        self._options = dict(dtype=dtype, device=device)
        if isinstance(model, str):
            self.model_name = name or model
            self.model, self.processor = load_vision_model(model, dtype=dtype, device=device)
        else:
            if processor is None:
                raise ValueError("pass the processor with a loaded model")
            self.model, self.processor = model.eval(), processor
            self.model_name = name or getattr(model.config, "name_or_path", "") or type(model).__name__
        self.tokenizer = self.processor.tokenizer
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.default_stop = stop_strings_for(self.model_name, self.tokenizer)
        self.max_batch_size = max_batch_size
        text_cfg = getattr(self.model.config, "text_config", self.model.config)
        self.max_model_len = max_model_len or getattr(text_cfg, "max_position_embeddings", 2048)
        eos = {self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)}
        self.eos_ids = {i for e in eos for i in (e if isinstance(e, (list, tuple)) else [e]) if i is not None}
        self.counts = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}

    # ---- prompts ------------------------------------------------------------------------------------------
    def prepare(self, prompt: Prompt) -> ImagePrompt:
        """A prompt as the model's ids (each image expanded into its tokens) and its images."""
        if isinstance(prompt, ImagePrompt):
            return prompt
        if isinstance(prompt, str):
            return ImagePrompt(self.tokenizer(prompt).input_ids, [])
        if not prompt:
            raise ValueError("empty prompt")
        if isinstance(prompt[0], int):
            return ImagePrompt(list(prompt), [])  # type: ignore[arg-type]
        images = chat_images(prompt)
        text = self.processor.apply_chat_template(
            as_template_chat(prompt),  # type: ignore[arg-type]
            add_generation_prompt=True,
            tokenize=False,
        )
        if not images:
            return ImagePrompt(self.tokenizer(text, add_special_tokens=False).input_ids, [])
        ids = self.processor(text=[text], images=images, add_special_tokens=False).input_ids[0]
        return ImagePrompt(list(ids), images)

    def encode(self, prompt: Prompt) -> list[int]:
        return self.prepare(prompt).ids

    # ---- the Engine protocol ------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        return dict(self.counts)

    def load_weights(self, model: Any = None, path: str | None = None) -> None:
        """Serve ``model`` (the object itself) or the model saved at ``path``."""
        if model is None:
            if path is None:
                raise ValueError("load_weights needs a model or a path")
            from agentkit.models.catalog import load_vision_model

            model, _ = load_vision_model(str(path), **self._options)
        self.model = model.eval()

    def close(self) -> None:
        pass

    def score(
        self,
        contexts: list[Prompt],
        continuations: list[str | list[int]],
        entropy: bool = False,
        top_logprobs: int = 0,
    ) -> list[Scored]:
        raise NotImplementedError("VisionEngine does not score continuations; score text with HFEngine")

    @torch.inference_mode()
    def generate(
        self, prompts: list[Prompt], params: SamplingParams | None = None, on_text=None
    ) -> list[list[Completion]]:
        """``params.n`` completions per prompt, grouped per prompt and in order. ``on_text`` is not streamed:
        each completion's text arrives whole when it is done."""
        params = params or SamplingParams()
        params.check_per_prompt(len(prompts))
        if params.constraint is not None or params.constraints is not None:
            raise ValueError("VisionEngine has no structured outputs (constraint); use HFEngine or vLLM")
        prepared = [self.prepare(p) for p in prompts]
        for i, p in enumerate(prepared):
            if len(p.ids) >= self.max_model_len:
                raise ContextLengthError(
                    f"prompt {i} has {len(p.ids)} tokens; the model's context is {self.max_model_len}"
                )
        self.counts["requests"] += 1
        self.counts["prompt_tokens"] += sum(len(p.ids) for p in prepared)
        seeds = params.per_prompt("seeds", len(prompts))
        out: list[list[Completion]] = [[] for _ in prompts]
        unseeded = [i for i, s in enumerate(seeds) if s is None]
        step = max(1, self.max_batch_size // params.n)
        groups = [unseeded[k : k + step] for k in range(0, len(unseeded), step)]
        groups += [[i] for i, s in enumerate(seeds) if s is not None]
        for group in groups:
            seed = seeds[group[0]]
            with torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(seed)
                comps = self._generate_group([prepared[i] for i in group], params)
            for k, i in enumerate(group):
                out[i] = comps[k * params.n : (k + 1) * params.n]
                self.counts["completion_tokens"] += sum(c.completion_tokens for c in out[i])
                if on_text:
                    for j, c in enumerate(out[i]):
                        on_text(i, j, c.text)
        return out

    def _generate_group(self, prompts: list[ImagePrompt], params: SamplingParams) -> list[Completion]:
        device = next(self.model.parameters()).device
        width = max(len(p.ids) for p in prompts)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, p in enumerate(prompts):
            ids[r, width - len(p.ids) :] = torch.tensor(p.ids)
            mask[r, width - len(p.ids) :] = 1
        inputs: dict[str, Any] = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
        images = [im for p in prompts for im in p.images]
        if images:  # every image kwarg the family needs (pixel_values, image_grid_thw, image_sizes, …)
            extra = self.processor.image_processor(images=images, return_tensors="pt")
            inputs.update({k: v.to(device) for k, v in extra.items() if isinstance(v, torch.Tensor)})
        budget = min(params.max_tokens, self.max_model_len - width)
        stop = params.stop + self.default_stop
        sample = params.temperature > 0
        gen = self.model.generate(
            **inputs,
            max_new_tokens=max(1, budget),
            min_new_tokens=budget if params.ignore_eos else None,
            do_sample=sample,
            temperature=params.temperature if sample else None,
            top_p=params.top_p if sample else None,
            top_k=params.top_k if sample else None,
            num_return_sequences=params.n,
            stop_strings=stop or None,
            tokenizer=self.tokenizer if stop else None,
            pad_token_id=pad,
            return_dict_in_generate=True,
            output_logits=True,
        )
        new = gen.sequences[:, width:]
        logp = torch.stack(gen.logits, dim=1).float().log_softmax(-1)  # [B·n, T, V], the model's own distribution
        chosen = logp.gather(-1, new[..., None])[..., 0]
        ent = -(logp.exp() * logp).sum(-1) if params.entropy else None
        return [
            self._completion(
                prompts[r // params.n], new[r].tolist(), chosen[r], ent[r] if ent is not None else None, params, stop
            )
            for r in range(new.shape[0])
        ]

    def _completion(self, prompt: ImagePrompt, toks: list[int], lps, ents, params: SamplingParams, stop) -> Completion:
        """One row of ``generate``'s output, cut where this engine's rules end it: an EOS token (kept), the first
        stop string (the text cut before it unless ``include_stop_str_in_output``), else the token budget."""
        reason, why, end = "length", None, len(toks)
        for k, t in enumerate(toks):
            if t in self.eos_ids and not params.ignore_eos:
                reason, why, end = "stop", t, k + 1
                break
            if stop:
                hit = _find_stop(self.tokenizer.decode(toks[: k + 1], skip_special_tokens=True), stop)
                if hit is not None:
                    reason, why, end = "stop", hit, k + 1
                    break
        toks = toks[:end]
        text = self.tokenizer.decode(toks, skip_special_tokens=True)
        if isinstance(why, str):
            cut = text.find(why)
            text = text[: cut + (len(why) if params.include_stop_str_in_output else 0)]
        return Completion(
            text=text,
            token_ids=toks,
            logprobs=lps[:end].tolist(),
            finish_reason=reason,  # type: ignore[arg-type]
            prompt_tokens=len(prompt.ids),
            entropies=ents[:end].tolist() if ents is not None else None,
            stop_reason=why,
        )


__all__ = ["VisionEngine", "as_template_chat", "image_parts"]
