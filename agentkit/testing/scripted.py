"""A scripted engine for fast agent-loop tests: it replies from a script instead of a model.

``ScriptedEngine({"question text": ["turn 1 reply", "turn 2 reply", ...]})`` answers a prompt whose user
message contains the question with the reply for the current turn: the number of ``<result>`` or
``<tool_response>`` blocks already after the question. A question may instead map to a list of
such scripts (``{"q": [["a1", "a2"], ["b1"]]}``): the seed of the first turn picks one (seed mod their number; the agent loop
seeds each sample of a question differently, so a group gets different trajectories), later turns follow the
script whose earlier replies the prompt holds. Token ids
come from the tiny model's byte-level tokenizer, so masks and lengths are real.
"""

from __future__ import annotations

from agentkit.engines.base import Completion, LocalTokenizer, Prompt, SamplingParams
from agentkit.models.tiny import build_tiny_tokenizer


class ScriptedEngine(LocalTokenizer):
    model_name = "scripted"
    max_model_len = 4096
    default_stop: list[str] = []

    def __init__(self, script: dict[str, list[str] | list[list[str]]]):
        self.script = script
        self.tokenizer = build_tiny_tokenizer()
        self.calls: list[int] = []  # batch size of each generate call
        self.loads = 0  # load_weights calls

    def stats(self) -> dict[str, int]:
        return {"requests": len(self.calls)}

    def load_weights(self, model=None, path=None) -> None:
        """The script does not depend on weights; counted, so tests can see a trainer sync them."""
        self.loads += 1

    def score(self, contexts, continuations, entropy: bool = False, top_logprobs: int = 0):
        raise NotImplementedError("a scripted engine does not score")

    def close(self) -> None:
        pass

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        params = params or SamplingParams()
        self.calls.append(len(prompts))
        out = []
        for p, seed in zip(prompts, params.per_prompt("seeds", len(prompts))):
            text = self.tokenizer.decode(self.encode(p))
            key = next(k for k in self.script if k in text)
            turns = self.script[key]
            tail = text[text.rindex(key) :]  # after the question: the rollout so far, in one turn or many
            done = sum(tail.count(m) for m in ("<result>", "<tool_response>", "<|im_start|>tool"))  # results so far
            if turns and isinstance(turns[0], list):  # alternatives: those whose earlier replies are in the
                fits = [a for a in turns if all(r in tail for r in a[:done])] or turns  # prompt; the seed picks
                turns = fits[(seed or 0) % len(fits)]
            reply = turns[min(done, len(turns) - 1)]
            stop = next((s for s in params.stop if s in reply), None)
            if stop is not None:
                reply = reply[: reply.index(stop) + (len(stop) if params.include_stop_str_in_output else 0)]
            ids = self.tokenizer(reply, add_special_tokens=False).input_ids
            finish = "stop"  # at the stop string, or at the end of the reply (as at an EOS token)
            if len(ids) > params.max_tokens:
                ids, finish, stop = ids[: params.max_tokens], "length", None
            out.append(
                [
                    Completion(
                        text=self.tokenizer.decode(ids),
                        token_ids=ids,
                        logprobs=[-0.1] * len(ids),
                        finish_reason=finish,
                        prompt_tokens=len(self.encode(p)),
                        entropies=[0.5] * len(ids) if params.entropy else None,
                        stop_reason=stop,
                    )
                ]
            )
        return out
