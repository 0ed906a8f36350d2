"""``agentkit bench rl-step``: one multi-turn GRPO step of ``agentkit.rl`` against TRL's ``GRPOTrainer(tools=…)``.

Same model (the embedded SmolLM2-135M, chat template set to TRL's Qwen-2.5 one, which TRL can parse tool calls
from and whose ``<|im_start|>`` tokens SmolLM2 has), same questions (8 multi-hop questions of suite (b)), same
search tool, G = 4, up to 3 tool turns (4 model turns), 64 new tokens per turn, temperature 1, the same
optimizer settings, in the same process. Both prompts carry the same worked example as chat messages (two
searches with their results, then the answer), which the untuned model imitates. TRL generates with
``model.generate`` and re-encodes the whole conversation at every tool turn; ``agentkit.rl`` rolls out with
``HFEngine`` (KV cache reused across turns, finished rows dropped).

Reported per side: rollout seconds, model-written tokens, rollout tokens/s, step seconds, tool calls per
trajectory. Then TRL is given agentkit's rollouts (``rollout_func`` replaying them): with outcome GRPO both
trainers must compute the same loss.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time

from agentkit.agent import AgentConfig
from agentkit.agent.suites import agent_suite
from agentkit.eval.bench import write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


def _call(query: str) -> dict:
    return {"type": "function", "function": {"name": "search", "arguments": {"query": query}}}


# A worked two-search exchange as chat messages (tool calls and tool results as the chat template renders them),
# the same on both sides, so the untuned model calls the tool in the format each trainer parses.
EXAMPLE = [
    {"role": "user", "content": "In which city was the founder of Morvane Optics born?"},
    {"role": "assistant", "content": "", "tool_calls": [_call("founder of Morvane Optics")]},
    {
        "role": "tool",
        "name": "search",
        "content": "[1] Morvane Optics (doc-morvane-optics)\nMorvane Optics is a company founded in 1971 by Tessa Kulir.",
    },
    {"role": "assistant", "content": "", "tool_calls": [_call("Tessa Kulir born")]},
    {
        "role": "tool",
        "name": "search",
        "content": "[1] Tessa Kulir (doc-tessa-kulir)\nTessa Kulir is an architect born in 1940 in the city of Brevik.",
    },
    {"role": "assistant", "content": "Brevik"},
]


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
        loss_type="grpo",
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


def run(model: str = DEFAULT_CHAT_MODEL, questions: int = 8, group: int = 4, turns: int = 4, max_tokens: int = 64):
    import tempfile

    import datasets
    import torch
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentkit.models import load_model
    from agentkit.rl.rewards import OutcomeReward
    from agentkit.rl.trainer import AgentGRPOTrainer, agent_dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    policy, tok = load_model(model)
    tok.chat_template = qwen2_5_chat_template
    agent = AgentConfig(
        style="json",
        examples=EXAMPLE,
        max_turns=turns,
        max_tool_calls=turns - 1,
        max_tokens_per_turn=max_tokens,
        max_total_tokens=budget(turns, max_tokens),
        temperature=1.0,
        seed=0,
        entropy=False,
    )
    outcome = OutcomeReward()
    res: dict = {"model": model, "questions": questions, "group": group, "max_model_turns": turns}
    with (
        agent_suite("multihop", questions, seed=5, few_shot=False, top_k=1) as suite,
        tempfile.TemporaryDirectory() as tmp,
    ):
        tool = suite.tool
        data = agent_dataset(suite.tasks, [tool], agent)

        def search(query: str) -> str:
            """Search the documents.

            Args:
                query: what to look for.
            """
            return tool(query=query).output

        # ---- agentkit.rl ----
        print("agentkit.rl: one step …", file=sys.stderr, flush=True)
        ours = AgentGRPOTrainer(
            copy.deepcopy(policy),
            _args(f"{tmp}/a", questions, group, max_tokens, turns),
            data,
            processing_class=tok,
            tools=[tool],
            agent=agent,
            outcome=outcome,
        )
        t0 = time.perf_counter()
        ours.train()
        step = time.perf_counter() - t0
        log = next(h for h in ours.state.log_history if "rollout/seconds" in h)
        trajs = ours._trajs
        tokens = sum(sum(t.mask) for t in trajs)
        res["agentkit"] = {
            "rollout_seconds": round(log["rollout/seconds"], 2),
            "model_tokens": tokens,
            "rollout_tokens_per_s": round(tokens / log["rollout/seconds"], 1),
            "step_seconds": round(step, 2),
            "tool_calls_per_trajectory": round(sum(t.tool_calls for t in trajs) / len(trajs), 2),
        }

        # ---- TRL's GRPOTrainer(tools=…) ----
        print(f"agentkit.rl: {res['agentkit']}\nTRL GRPOTrainer(tools=…): one step …", file=sys.stderr, flush=True)
        trl_data = datasets.Dataset.from_list(
            [{"prompt": [*EXAMPLE, {"role": "user", "content": t.question}], "answer": t.answer} for t in suite.tasks]
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
            "tool_calls_per_trajectory": round(tlog.get("tools/call_frequency", 0.0), 2),
        }

        # ---- the same rollouts through both losses (outcome GRPO) ----
        res["same_rollouts_loss"] = _same_loss(
            ours, trajs, policy, tok, data, f"{tmp}/c", questions, group, max_tokens, turns
        )
    a, b = res["agentkit"], res["trl"]
    res["rollout_throughput_ratio"] = round(a["rollout_tokens_per_s"] / b["rollout_tokens_per_s"], 2)
    res["step_time_ratio"] = round(a["step_seconds"] / b["step_seconds"], 3)
    del torch
    return res


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
    return {"agentkit": la, "trl": lb, "abs_diff": abs(la - lb)}


def main(model: str = DEFAULT_CHAT_MODEL, questions: int = 8, group: int = 4, out: str | None = None) -> int:
    res = run(model, questions, group)
    print(json.dumps(res, indent=2))
    a, b = res["agentkit"], res["trl"]
    print(
        f"\nrollouts: agentkit.rl {a['rollout_tokens_per_s']} tokens/s vs TRL {b['rollout_tokens_per_s']} tokens/s "
        f"({res['rollout_throughput_ratio']}x); step {a['step_seconds']} s vs {b['step_seconds']} s; "
        f"same-rollout loss difference {res['same_rollouts_loss']['abs_diff']:.1e}"
    )
    write_json(out, res)
    return 0
