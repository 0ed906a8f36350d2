"""``agentkit bench rl-step``: one multi-turn GRPO step of ``agentkit.rl`` against TRL's ``GRPOTrainer(tools=…)``.

Same model, same prompts token for token, same questions (8 multi-hop questions of suite (b)), same search
tool, G = 4, up to 3 tool turns (4 model turns), 64 new tokens per turn, temperature 1, the same optimizer
settings, in the same process. The conversation is the chat template's on both sides (Qwen 2.5's, which TRL
parses tool calls from and whose ``<|im_start|>`` tokens SmolLM2 has): hermes calls, each turn ended by the
model's end-of-turn token, results as tool messages (``AgentConfig(style="json", tool_turns="chat")``).

The untuned SmolLM2 barely calls tools in this format, so the bench first tunes it to (``warm_start``
questions, disjoint from the bench's, one SFT epoch on planned trajectories in this very format, the shared
Tool-Light SFT code); ``warm_start=0`` skips that. TRL generates with ``model.generate`` and re-encodes the
whole conversation at every tool turn; ``agentkit.rl`` rolls out with ``HFEngine`` (KV cache reused across
turns, finished rows dropped).

Reported per side: rollout seconds, model-written tokens, rollout tokens/s, training seconds (the step less the
rollout), step seconds, tool calls per trajectory. ``agentkit.rl`` runs twice: with its length buckets (the
default) and with TRL's one padded batch (``length_buckets=False``); the same seeds give both the same rollouts,
so the training seconds measure the buckets alone (both project only completion positions through the fused
head, ``agentkit.rl.buckets.compact_fused_head``). Then TRL is given agentkit's rollouts (``rollout_func``
replaying them): with outcome GRPO both trainers must compute the same loss.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from agentkit.agent import AgentConfig
from agentkit.agent.suites import agent_suite
from agentkit.argtypes import NONNEG_INT, POS_INT, number
from agentkit.command import add_model_option, add_out_option
from agentkit.engines.base import SamplingParams
from agentkit.eval.bench import write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL

SYSTEM = "You are a helpful assistant."


@dataclass
class SameSchema:
    """Our side's search tool described by the schema TRL derives from its function, so both prompts match."""

    tool: Any
    name: str
    description: str
    parameters: dict

    def __call__(self, **arguments):
        return self.tool(**arguments)

    def close(self) -> None:
        pass


def budget(turns: int, max_tokens: int) -> int:
    """Completion tokens per trajectory, tool results included, on both sides: TRL has no per-turn limit (a turn
    ends at the end-of-turn token), so the total is what bounds it."""
    return turns * max_tokens + (turns - 1) * 64


def _args(out: str, questions: int, group: int, max_tokens: int, turns: int):
    import torch
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out,
        max_steps=1,
        num_generations=group,
        per_device_train_batch_size=questions * group,
        learning_rate=1e-6,
        loss_type="dapo",  # TRL's default; unlike "grpo" (mean of per-sequence means: −mean A = 0 at the first
        # iteration) its loss is not zero by construction, so the same-rollouts check compares real values
        max_completion_length=budget(turns, max_tokens),
        max_tool_calling_iterations=turns - 1,
        temperature=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=0,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,  # TRL's default is True: bf16 autocast, slow on CPUs without bf16 units, and other numerics
    )


def run(
    model: str = DEFAULT_CHAT_MODEL,
    questions: int = 8,
    group: int = 4,
    turns: int = 4,
    max_tokens: int = 64,
    warm_start: int = 96,
):
    import tempfile

    import datasets
    import torch
    from transformers.utils import get_json_schema
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentkit.data.multihop import MultiHopKB
    from agentkit.models import load_model
    from agentkit.rl.rewards import OutcomeReward
    from agentkit.rl.trainer import AgentGRPOTrainer, agent_dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    policy, tok = load_model(model)
    tok.chat_template = qwen2_5_chat_template
    agent = AgentConfig(
        style="json",
        tool_turns="chat",
        max_turns=turns,
        max_tool_calls=turns - 1,
        max_total_tokens=budget(turns, max_tokens),
        sampling=SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=0, entropy=False),
    )
    outcome = OutcomeReward()
    res: dict = {"model": model, "questions": questions, "group": group, "max_model_turns": turns}
    kb = MultiHopKB.build(0)
    with (
        agent_suite("multihop", questions, seed=5, few_shot=False, kb=kb, top_k=1) as suite,
        tempfile.TemporaryDirectory() as tmp,
    ):

        def search(query: str):
            """Search the documents.

            Args:
                query: what to look for.
            """
            return suite.tool(query=query).output

        fn = get_json_schema(search)["function"]
        tool = SameSchema(suite.tool, fn["name"], fn["description"], fn["parameters"])
        data = agent_dataset(suite.tasks, [tool], agent)
        trl_prompts = [
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": t.question}] for t in suite.tasks
        ]
        ours_text = tok.apply_chat_template(data[0]["prompt"], add_generation_prompt=True, tokenize=False)
        trl_text = tok.apply_chat_template(trl_prompts[0], tools=[search], add_generation_prompt=True, tokenize=False)
        if ours_text != trl_text:
            raise RuntimeError("the two trainers' prompts differ:\n" + ours_text + "\n---\n" + trl_text)
        res["prompt_tokens"] = len(tok(ours_text, add_special_tokens=False).input_ids)
        if warm_start:
            res["warm_start"] = _warm_start(policy, tok, kb, suite, tool, agent, warm_start, f"{tmp}/sft")

        # ---- agentkit.rl, and the same step without length buckets (the same rollouts: same seeds) ----
        def one_step(out: str, buckets: bool):
            trainer = AgentGRPOTrainer(
                copy.deepcopy(policy),
                _args(out, questions, group, max_tokens, turns),
                data,
                processing_class=tok,
                tools=[tool],
                agent=agent,
                outcome=outcome,
                length_buckets=buckets,
            )
            t0 = time.perf_counter()
            trainer.train()
            step = time.perf_counter() - t0
            log = next(h for h in trainer.state.log_history if "rollout/seconds" in h)
            trajs = trainer._trajs
            tokens = sum(sum(t.mask) for t in trajs)
            lengths = [len(t.prompt_ids) + len(t.completion_ids) for t in trajs]
            return trainer, {
                "rollout_seconds": round(log["rollout/seconds"], 2),
                "model_tokens": tokens,
                "rollout_tokens_per_s": round(tokens / log["rollout/seconds"], 1),
                "step_seconds": round(step, 2),
                "train_seconds": round(step - log["rollout/seconds"], 2),
                "tool_calls_per_trajectory": round(sum(t.tool_calls for t in trajs) / len(trajs), 2),
                "sequence_tokens": sum(lengths),
                "padded_tokens": len(lengths)
                * (max(len(t.prompt_ids) for t in trajs) + max(len(t.completion_ids) for t in trajs)),
            }

        print("agentkit.rl: one step …", file=sys.stderr, flush=True)
        ours, res["agentkit"] = one_step(f"{tmp}/a", True)
        trajs = ours._trajs
        print("agentkit.rl without length buckets: one step …", file=sys.stderr, flush=True)
        _, res["agentkit_one_padded_batch"] = one_step(f"{tmp}/a0", False)

        # ---- TRL's GRPOTrainer(tools=…) ----
        print(f"agentkit.rl: {res['agentkit']}\nTRL GRPOTrainer(tools=…): one step …", file=sys.stderr, flush=True)
        trl_data = datasets.Dataset.from_list(
            [{"prompt": p, "answer": t.answer} for p, t in zip(trl_prompts, suite.tasks)]
        )

        def reward(completions, answer, **_):
            from agentkit.eval.metrics import exact_match
            from agentkit.tools.parsers import parse_hermes_calls

            out = []
            for msgs, gold in zip(completions, answer):
                text = msgs[-1].get("content") or "" if isinstance(msgs, list) else msgs
                content, calls = parse_hermes_calls(text)
                out.append(0.0 if calls or not content.strip() else 0.4 + exact_match(content.strip(), gold))
            return out

        theirs = GRPOTrainer(
            copy.deepcopy(policy),
            reward_funcs=[reward],
            args=_args(f"{tmp}/b", questions, group, max_tokens, turns),
            train_dataset=trl_data,
            processing_class=tok,
            tools=[search],
        )
        timed = {"seconds": 0.0}
        real = theirs._generate

        def generate(prompts):
            g0 = time.perf_counter()
            try:
                return real(prompts)
            finally:
                timed["seconds"] += time.perf_counter() - g0

        theirs._generate = generate
        t0 = time.perf_counter()
        theirs.train()
        step = time.perf_counter() - t0
        tlog = next(h for h in theirs.state.log_history if "completions/mean_length" in h)
        n = questions * group
        tokens = round(tlog["completions/mean_length"] * n)
        res["trl"] = {
            "rollout_seconds": round(timed["seconds"], 2),
            "model_tokens": tokens,
            "rollout_tokens_per_s": round(tokens / timed["seconds"], 1),
            "step_seconds": round(step, 2),
            "train_seconds": round(step - timed["seconds"], 2),
            "tool_calls_per_trajectory": round(tlog.get("tools/call_frequency", 0.0), 2),
        }

        # ---- the same rollouts through both losses (outcome GRPO) ----
        res["same_rollouts_loss"] = _same_loss(
            ours, trajs, policy, tok, data, f"{tmp}/c", questions, group, max_tokens, turns
        )
    a, b = res["agentkit"], res["trl"]
    res["rollout_throughput_ratio"] = round(a["rollout_tokens_per_s"] / b["rollout_tokens_per_s"], 2)
    res["step_time_ratio"] = round(a["step_seconds"] / b["step_seconds"], 3)
    res["train_time_ratio"] = round(a["train_seconds"] / b["train_seconds"], 3)
    res["length_buckets_train_speedup"] = round(
        res["agentkit_one_padded_batch"]["train_seconds"] / a["train_seconds"], 2
    )
    del torch
    return res


def _warm_start(policy, tok, kb, suite, tool, agent, n: int, out: str) -> dict:
    """Tune ``policy`` in place to call the tool in the bench's format: one SFT epoch on ``n`` planned
    trajectories of other questions of the same world (the shared Tool-Light SFT code)."""
    from agentkit.data.tasks import split_held_out
    from agentkit.toollight.sft import SFTSettings, to_sft_dataset, train_sft
    from agentkit.toollight.sft_data import make_trajectories

    print(f"warm start: one SFT epoch on {n} planned trajectories …", file=sys.stderr, flush=True)
    train, _ = split_held_out(kb.questions(n, 300), suite.tasks)
    titles = {d["id"]: d["title"] for d in kb.corpus()}
    trajs = make_trajectories(train, tok, {tool.name: tool}, titles, agent)
    t0 = time.perf_counter()
    history, _ = train_sft(policy, tok, to_sft_dataset(trajs), SFTSettings(epochs=1), out, progress=False)
    losses = [h["loss"] for h in history if "loss" in h]
    return {"examples": len(trajs), "seconds": round(time.perf_counter() - t0, 1), "loss": [losses[0], losses[-1]]}


def _same_loss(ours, trajs, policy, tok, data, out, questions, group, max_tokens, turns) -> dict:
    """Our batch from ``trajs`` and TRL's batch from the same trajectories (replayed through ``rollout_func``,
    rewards = our outcome), both losses on the same weights."""
    import torch
    from trl import GRPOTrainer

    from agentkit.rl.trainer import replay, rollout_fields

    by_id = {r["id"]: r for r in data}
    rows = [by_id[t.task_id] for t in trajs]
    scores = [ours.outcome(t, r["answers"])["score"] for t, r in zip(trajs, rows)]

    real = ours._rollout

    def fixed(prompts):  # our trainer on the same trajectories: no new sampling
        ours._trajs, ours._scores = trajs, [ours.outcome(t, r["answers"]) for t, r in zip(trajs, rows)]
        return {**rollout_fields(trajs), "outcome_score": scores}

    ours._rollout = fixed
    theirs = GRPOTrainer(
        copy.deepcopy(policy),
        reward_funcs=[lambda completions, **_: scores],
        args=_args(out, questions, group, max_tokens, turns),
        train_dataset=data,
        processing_class=tok,
        rollout_func=replay(trajs),
    )
    theirs.model.load_state_dict(ours.model.state_dict())
    for t in (ours, theirs):
        t.model.train()
        t.current_gradient_accumulation_steps = 1
    a = ours._generate_and_score_completions(rows)
    b = theirs._generate_and_score_completions(rows)
    with torch.no_grad():
        la, lb = ours.compute_loss(ours.model, a).item(), theirs.compute_loss(theirs.model, b).item()
    ours._rollout = real
    mask = (b["completion_mask"] * b.get("tool_mask", 1)).bool()  # the model's tokens, where TRL's loss reads
    adv = (a["advantages"] - b["advantages"][:, None])[mask].abs().max().item()  # ours (B, T), TRL's (B,)
    return {"agentkit": la, "trl": lb, "abs_diff": abs(la - lb), "max_token_advantage_diff": adv}


def main(
    model: str = DEFAULT_CHAT_MODEL, questions: int = 8, group: int = 4, warm_start: int = 96, out: str | None = None
) -> int:
    res = run(model, questions, group, warm_start=warm_start)
    print(json.dumps(res, indent=2))
    a, b = res["agentkit"], res["trl"]
    print(
        f"\nrollouts: agentkit.rl {a['rollout_tokens_per_s']} tokens/s vs TRL {b['rollout_tokens_per_s']} tokens/s "
        f"({res['rollout_throughput_ratio']}x); step {a['step_seconds']} s vs {b['step_seconds']} s; "
        f"same-rollout loss difference {res['same_rollouts_loss']['abs_diff']:.1e}, "
        f"token advantages {res['same_rollouts_loss']['max_token_advantage_diff']:.1e}"
    )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    a, t, same = res["agentkit"], res["trl"], res["same_rollouts_loss"]
    table = (
        "| trainer | rollout | model tokens | rollout tokens/s | training | step | tool calls per trajectory |\n"
        "|---|---|---|---|---|---|---|\n"
        f"| TRL `GRPOTrainer(tools=…)` | {t['rollout_seconds']} s | {t['model_tokens']:,} | {t['rollout_tokens_per_s']} | "
        f"{t.get('train_seconds', round(t['step_seconds'] - t['rollout_seconds'], 2))} s | {t['step_seconds']} s | "
        f"{t['tool_calls_per_trajectory']} |\n"
    )
    padded = res.get("agentkit_one_padded_batch")
    if padded:
        table += (
            f"| `AgentGRPOTrainer(length_buckets=False)` | {padded['rollout_seconds']} s | {padded['model_tokens']:,} | "
            f"{padded['rollout_tokens_per_s']} | {padded['train_seconds']} s | {padded['step_seconds']} s | "
            f"{padded['tool_calls_per_trajectory']} |\n"
        )
    table += (
        f"| `agentkit.rl` `AgentGRPOTrainer` | {a['rollout_seconds']} s | {a['model_tokens']:,} | "
        f"{a['rollout_tokens_per_s']} (**{res['rollout_throughput_ratio']}×**) | "
        f"{a.get('train_seconds', round(a['step_seconds'] - a['rollout_seconds'], 2))} s | {a['step_seconds']} s "
        f"(**{res['step_time_ratio']}×** the time: {t['step_seconds'] / a['step_seconds']:.3f}× TRL's speed) | {a['tool_calls_per_trajectory']} |\n\n"
    )
    buckets = (
        f"Length buckets: the loss's passes ran over {a['sequence_tokens']:,} tokens in groups instead of "
        f"{a['padded_tokens']:,} in one padded batch; training {res['length_buckets_train_speedup']}× faster than "
        f"the same trainer without them (same rollouts, same seeds). "
        if padded
        else "The step's remainder is mostly the loss's forward and backward passes, the same code on both sides. "
    )
    return (
        table + buckets + f"Same rollouts through both trainers: loss {same['agentkit']:.7f} and {same['trl']:.7f} "
        f"(difference {same['abs_diff']:.1e}), per-token advantages within {same['max_token_advantage_diff']:.1e}. "
        f"The warm start took {res['warm_start']['seconds']:.0f} s."
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read."""
    return {
        "rollout tokens/s: agentkit / TRL": (res["rollout_throughput_ratio"], "higher"),
        "step time: agentkit / TRL": (res["step_time_ratio"], "lower"),
        **(
            {"training: one padded batch / length buckets": (res["length_buckets_train_speedup"], "higher")}
            if "length_buckets_train_speedup" in res
            else {}
        ),
    }


HELP = "one multi-turn GRPO step: agentkit.rl vs TRL's GRPOTrainer(tools=...)"


def add_arguments(parser) -> None:
    """``agentkit bench rl-step``'s options: ``main``'s parameters."""
    add_model_option(parser)
    parser.add_argument("--questions", type=POS_INT, default=8, help="questions per step")
    parser.add_argument("--group", type=number(int, 2), default=4, help="trajectories per question (G, at least 2)")
    parser.add_argument(
        "--warm-start",
        type=NONNEG_INT,
        default=96,
        help="SFT questions that first teach the model the format (0: none)",
    )
    add_out_option(parser)
