"""A scripted engine for fast agent-loop tests: it replies from a script instead of a model.

``ScriptedEngine({"question text": ["turn 1 reply", "turn 2 reply", ...]})`` answers a prompt whose user
message contains the question with the reply for the current turn: the number of ``<result>`` or
``<tool_response>`` blocks already in the assistant's part of the prompt. Token ids come from the tiny model's
byte-level tokenizer, so masks and lengths are real.
"""

from __future__ import annotations

from agentkit.engines.base import Completion, LocalTokenizer, Prompt, SamplingParams
from agentkit.models.tiny import build_tiny_tokenizer


class ScriptedEngine(LocalTokenizer):
    model_name = "scripted"
    max_model_len = 4096
    default_stop: list[str] = []

    def __init__(self, script: dict[str, list[str]]):
        self.script = script
        self.tokenizer = build_tiny_tokenizer()
        self.calls: list[int] = []  # batch size of each generate call

    def stats(self) -> dict[str, int]:
        return {"requests": len(self.calls)}

    def load_weights(self, model=None, path=None) -> None:
        raise NotImplementedError("a scripted engine has no weights")

    def score(self, contexts, continuations, entropy: bool = False):
        raise NotImplementedError("a scripted engine does not score")

    def close(self) -> None:
        pass

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        params = params or SamplingParams()
        self.calls.append(len(prompts))
        out = []
        for p in prompts:
            text = self.tokenizer.decode(self.encode(p))
            key = next(k for k in self.script if k in text)
            turns = self.script[key]
            tail = text.split("<|im_start|>assistant")[-1]
            done = tail.count("<result>") + tail.count("<tool_response>")  # tool results fed back so far
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
