"""``AgentGRPOTrainer``: multi-turn GRPO for tool-using agents on TRL's ``GRPOTrainer``, per-token advantages.

What TRL keeps doing: batching and the repeat sampler (G completions per question), the reference and old
log-probabilities, the loss (clipped ratio, KL to the reference, every ``loss_type`` it offers), optimisation,
gradient accumulation, accelerate / DDP, checkpoints and resume, logging. What this subclass changes, at two
points:

1. ``rollout_func`` (TRL's hook for custom generation): each question's G trajectories come from
   ``agentkit.agent.continue_rollout`` on any Engine — an ``HFEngine`` on the policy's own weights (nothing to
   copy; a ``VisionEngine`` when the policy is a vision-language model and the rows have an ``image``, which TRL
   puts into the prompts and into the loss's forward pass), or e.g. a ``VLLMEngine`` that reloads the weights at
   each new step. Token ids are the rollout's own
   (never re-tokenised) and ``env_mask`` marks tool-result tokens, which TRL leaves out of the loss.
2. ``_generate_and_score_completions``: after TRL built the batch, its one-scalar-per-completion advantages are
   replaced by per-token ones: each trajectory's turn rewards (``TurnRewards``; TIPS shaping when a ``shaper``
   is given) go through a registered estimator (``agentkit.rl.advantages``) over the whole batch (all
   processes), and turn k's advantage is given to every model token of turn k. TRL's loss takes advantages of
   shape (B, T) as they are.

Rewards: R = ``outcome.score_row`` of the trajectory and its dataset row (``OutcomeReward``: the final answer
against the row's ``answers``), logged by TRL as the reward ``outcome``. The dataset (``agent_dataset``) has one
row per question: ``prompt`` (the agent's chat), ``answers`` (gold answers), ``id``.

With ``grpo`` and no shaper the loss equals TRL's own GRPO on the same rollouts (tested).
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors.torch as st
import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.models import unwrap_model_for_generation

from agentkit.agent.loop import AgentConfig, agent_prompt, continue_rollout
from agentkit.agent.trajectory import Trajectory
from agentkit.data.tasks import gold_answers
from agentkit.engines.config import EngineConfig, HFConfig
from agentkit.engines.hf import HFEngine
from agentkit.models.sharding import clear_hooks, is_partitioned, whole
from agentkit.rl.advantages import ESTIMATORS, TurnRewards, estimate
from agentkit.rl.buckets import bucketed_logps, compact_fused_head
from agentkit.rl.config import samples_the_policy
from agentkit.rl.rewards import OutcomeReward
from agentkit.tools.base import Tool


def agent_dataset(tasks: Sequence[Any], tools: dict[str, Tool] | list[Tool], agent: AgentConfig):
    """The training dataset ``AgentGRPOTrainer`` takes.

    Args:
        tasks: ``Task`` objects or dicts with id, question, answer or answers.
        tools: the agent's tools (the prompt describes them in json style).
        agent: the loop's settings (system prompt, examples).

    Returns:
        A ``datasets.Dataset``, one row per task: ``prompt`` (the chat the agent starts from), ``answers`` (the
        gold answers), ``id``.

    Raises:
        AgentkitError: a task without a gold answer (named).
    """
    import datasets

    rows = []
    for i, t in enumerate(tasks):
        get = t.get if isinstance(t, dict) else lambda k, d=None, t=t: getattr(t, k, d)
        task_id = str(get("id", f"task-{i}"))
        golds = get("answers") or get("answer")
        rows.append(
            {
                "id": task_id,
                "prompt": agent_prompt(get("question"), tools, agent),
                "answers": gold_answers(task_id, golds),
            }
        )
    return datasets.Dataset.from_list(rows)


def token_advantages(
    trajs: Sequence[Trajectory], per_turn: Sequence[Sequence[float]], width: int, last_only: bool = False
) -> torch.Tensor:
    """``[B, width]``: turn k's value on every token of turn k's model segment (``last_only``: on its last token,
    where a turn's reward sits), 0 on tool tokens and padding; a segment cut off at ``width`` keeps what fits (its
    reward on its last kept token)."""
    out = torch.zeros(len(trajs), width)
    for row, (t, adv) in enumerate(zip(trajs, per_turn)):
        pos, turn = 0, -1
        for seg in t.segments:
            n = len(seg.token_ids)
            if seg.kind == "model":
                turn += 1
                value = adv[min(turn, len(adv) - 1)]
                if not last_only:
                    out[row, pos : pos + n] = value
                elif pos < width:
                    out[row, min(pos + n, width) - 1] += value
            pos += n
    return out


def _model_turns(t: Trajectory) -> int:
    return max(1, sum(s.kind == "model" for s in t.segments))


class AgentGRPOTrainer(GRPOTrainer):
    """GRPO on agent trajectories (see the module docstring).

    Args:
        model: the policy, as for ``GRPOTrainer``.
        args: TRL's ``GRPOConfig`` (``num_generations`` = G trajectories per question; ``grpo_config`` builds one).
        train_dataset: from ``agent_dataset``.
        processing_class: the policy's tokenizer.
        callbacks: transformers callbacks, as for ``GRPOTrainer``.
        peft_config: a PEFT config to train adapters, as for ``GRPOTrainer``.
        tools: the tools the agent may call.
        agent: the rollout's limits and sampling (``n`` is ignored: G comes from ``args``; ``seed`` is offset by
            the step, so each step draws afresh).
        engine: the rollout engine, or the ``EngineConfig`` of one to build on the policy at the first rollout
            (None: ``HFConfig``, an ``HFEngine`` that runs the policy's own weights). An engine that does not share
            the policy's weights (``SHARES_WEIGHTS``) gets them after every optimizer step (``load_weights``).
        estimator: a name in ``agentkit.rl.advantages.ESTIMATORS``.
        estimator_options: keyword options of the estimator.
        shaper: turn rewards beyond the outcome, e.g. ``agentkit.tips.shaping.InfoPotentialShaper``
            (``potentials`` of the local trajectories, ``shape`` on the gathered batch); None: outcome only.
        outcome: the outcome reward (default ``OutcomeReward()``: format 0.4 + EM): ``score_row(trajectory, row)``
            returns at least ``score``, ``em``, ``f1`` and ``format`` (e.g. ``agentkit.gamerl.reward.GameReward``).
        length_buckets: run the loss's forward pass per group of similar lengths, each padded to its own longest
            (``agentkit.rl.buckets``; the same log-probabilities up to rounding); False: TRL's one padded batch.
        rollout_ahead: sample step k+1's trajectories while step k trains, with step k's weights (one step off
            policy, like TRL's ``AsyncGRPOTrainer`` with ``max_staleness=1``). The engine gets a frozen copy of the
            weights (an HFEngine a snapshot; vLLM and servers copy by nature), and the loss's old log-probabilities
            are the sampler's, so the clipped ratio π_θ/π_old corrects for the lag. Needs sampling at temperature 1
            without top-p/top-k (then the sampler's log-probabilities are the behaviour policy's), one iteration per
            generation, and text rows. Pays where rollout and training run on different hardware (a vLLM server, a
            second GPU); on one CPU both share the cores.
    """

    def __init__(
        self,
        model,
        args: GRPOConfig,
        train_dataset,
        *,
        processing_class,
        tools: dict[str, Tool] | list[Tool],
        agent: AgentConfig,
        engine: Any = None,
        estimator: str = "grpo",
        estimator_options: dict[str, Any] | None = None,
        shaper: Any = None,
        outcome: OutcomeReward | None = None,
        callbacks=None,
        peft_config=None,
        length_buckets: bool = True,
        rollout_ahead: bool = False,
    ):
        ESTIMATORS.target(estimator)  # an unknown name fails here, before any rollout
        missing = {"prompt", "answers", "id"} - set(train_dataset.column_names)
        if missing:
            raise ValueError(f"train_dataset lacks {sorted(missing)}: build it with agent_dataset")
        if args.mask_truncated_completions:
            raise ValueError("mask_truncated_completions: agent turns end at stop strings, not EOS; leave it False")
        self.agent_tools = tools if isinstance(tools, dict) else {t.name: t for t in tools}
        self.agent_config = agent
        self.estimator, self.estimator_options = estimator, dict(estimator_options or {})
        self.shaper = shaper
        self.outcome = outcome or OutcomeReward()
        self.length_buckets = length_buckets
        self.rollout_ahead = rollout_ahead
        if rollout_ahead:
            _check_ahead(args, agent, train_dataset)
        self._ahead: _Ahead | None = None  # the next step's rollout, under way
        self._peeked: list = []  # the next step's batch, taken from the data loader early
        self._stale = False  # this batch was sampled by the last step's weights
        self._pool = None
        self._engine = None if engine is None or isinstance(engine, EngineConfig) else engine
        self._engine_config = engine if isinstance(engine, EngineConfig) else HFConfig(model=None)
        self._engine_step = -1
        self._rows: list[dict[str, Any]] = []
        self._trajs: list[Trajectory] = []
        self._scores: list[dict[str, float]] = []
        super().__init__(
            model=model,
            reward_funcs=[outcome_reward],
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            peft_config=peft_config,
            rollout_func=_rollout,
        )
        shares = self._engine is None and self._engine_config.SHARES_WEIGHTS
        if self.is_fsdp_enabled and self.accelerator.num_processes > 1 and shares:
            from agentkit.errors import AgentkitError

            # FSDP2 gathers a module's weights in its forward, a collective: processes whose rollouts end at
            # different lengths would wait for each other forever (ZeRO-3's weights are gathered whole instead)
            raise AgentkitError(
                "rollouts on the policy's own weights under FSDP with several processes would hang",
                "use configs/accelerate/zero3.yaml, or roll out on a server (engine: {kind: openai, upstreams: …})",
            )

    # ---- rollouts -----------------------------------------------------------------------------------------
    def rollout_engine(self):
        """The engine that samples the current policy: built on first use (an HFEngine on the policy's own
        weights), or the given one with the policy's weights loaded once per optimizer step."""
        policy = self.accelerator.unwrap_model(self.model)
        if self._engine is None:  # hf: an HFEngine, or a VisionEngine on a vision-language policy
            name = getattr(policy.config, "name_or_path", None)
            adopts = self._engine_config.SHARES_WEIGHTS  # serves the model object it is given
            shares = adopts and not self.rollout_ahead  # runs the policy's own tensors: never reloaded
            if shares:
                weights = policy
            elif adopts:  # rollout_ahead: a frozen copy, which the optimizer does not change under the rollout
                weights = snapshot(policy)
            else:
                weights = _servable(policy, getattr(self._engine_config, "sync_adapters", False))
            self._engine = build_with_weights(self._engine_config, weights, tokenizer=self.processing_class, name=name)
            self._engine_step = -2 if shares else self.state.global_step
        elif self._engine_step not in (-2, self.state.global_step):
            if self.rollout_ahead:
                refresh_teacher(self._engine, policy)  # a frozen copy, whatever the engine
            else:
                send_weights(self._engine, _servable(policy, getattr(self._engine, "takes_adapters", False)))
            self._engine_step = self.state.global_step
        return self._engine

    def _sample(self, engine, rows: list[dict[str, Any]], prompts: list, step: int) -> tuple[list[Trajectory], float]:
        """``rows``' trajectories on ``engine`` with step ``step``'s seeds, and the seconds they took."""
        cfg = self.agent_config
        if cfg.sampling.seed is not None:
            cfg = cfg.with_sampling(seed=cfg.sampling.seed + 1_000_003 * step)
        first = self.accelerator.process_index * len(rows)  # each row draws with its own seed on every process
        trajs = [
            Trajectory(str(r["id"]), p, engine.encode(p), meta={"sample": first + i})
            for i, (r, p) in enumerate(zip(rows, prompts))
        ]
        t0 = time.perf_counter()
        continue_rollout(engine, trajs, self.agent_tools, cfg)
        return trajs, time.perf_counter() - t0

    def _rollout(self, prompts: list) -> dict[str, list]:
        rows = self._rows
        if len(rows) != len(prompts):
            raise RuntimeError(f"rollout asked for {len(prompts)} prompts but the batch has {len(rows)} rows")
        policy = self.accelerator.unwrap_model(self.model)
        training = policy.training  # read first: building or reloading an HFEngine puts its model in eval mode
        mode = "train" if training else "eval"
        step = self.state.global_step
        ahead, t0 = self._ahead, time.perf_counter()
        # the engine is the rollout's until it ends (an evaluation waits too)
        sampled = ahead.future.result() if ahead is not None else None
        waited = time.perf_counter() - t0
        if training:
            self._ahead = None
        # ZeRO-3 partitions the weights: gathered whole on every process for the rollout, its forward hooks off
        # (each process samples for as long as its own rows need, so no collective may run meanwhile); FSDP1
        # the same way. TRL's own helpers, as for its generate.
        with (
            unwrap_model_for_generation(self.model_wrapped, self.accelerator),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            self._stale = training and ahead is not None and ahead.matches(rows, prompts, step)
            if self._stale:  # sampled while the last step trained
                trajs, seconds = sampled
                self._metrics[mode]["rollout/wait_seconds"].append(waited)
            else:
                if training and ahead is not None:  # its rows or prompts changed at this step: sampled again
                    self._metrics[mode]["rollout/ahead_discarded"].append(1.0)
                engine = self.rollout_engine()
                policy.eval()
                try:
                    trajs, seconds = self._sample(engine, rows, prompts, step)
                finally:
                    policy.train(training)
            upcoming = self._peeked[0] if self._peeked else None
            if training and self.rollout_ahead and upcoming is not None and step + 1 < self.state.max_steps:
                engine = self.rollout_engine()  # this step's weights, a frozen copy: step + 1 samples from them
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(1, thread_name_prefix="agentkit-rollout-ahead")
                upcoming = list(upcoming)
                asked = [copy.deepcopy(r["prompt"]) for r in upcoming]
                future = self._pool.submit(self._sample, engine, upcoming, asked, step + 1)
                self._ahead = _Ahead(step + 1, [str(r["id"]) for r in upcoming], asked, future)
        self._trajs = trajs
        self._scores = [self.outcome.score_row(t, r) for t, r in zip(trajs, rows)]
        generated = sum(sum(t.mask) for t in trajs)
        self._metrics[mode]["rollout/seconds"].append(seconds)
        self._metrics[mode]["rollout/tokens_per_second"].append(generated / max(seconds, 1e-9))
        return {**rollout_fields(trajs), "outcome_score": [s["score"] for s in self._scores]}

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The Trainer's, and with ``rollout_ahead`` one batch more taken early: the next step's rows, which
        ``_rollout`` starts sampling before this step trains (given back first at the next call)."""
        if not self.rollout_ahead:
            return super().get_batch_samples(epoch_iterator, num_batches, device)
        peeked, self._peeked = self._peeked, []
        out = super().get_batch_samples(itertools.chain(peeked, epoch_iterator), num_batches, device)
        self._peeked = list(itertools.islice(epoch_iterator, 1))
        return out

    # ---- the loss's forward pass --------------------------------------------------------------------------
    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **inputs,
    ):
        """TRL's, per length group (``length_buckets``); a batch with images or other per-row inputs, or an MoE
        load-balancing loss, goes through TRL's as one batch. Either way the fused head projects only the labelled
        positions (``compact_fused_head``)."""
        parent = super()._get_per_token_logps_and_entropies
        with compact_fused_head():  # on a CPU TRL's head would also project the prompt and the padding
            if not self.length_buckets or compute_aux_loss or any(v is not None for v in inputs.values()):
                return parent(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size,
                    compute_entropy,
                    compute_aux_loss,
                    **inputs,
                )

            def call(ids, mask, keep):
                return parent(model, ids, mask, keep, batch_size=batch_size, compute_entropy=compute_entropy)[:2]

            return (*bucketed_logps(call, input_ids, attention_mask, logits_to_keep), None)

    # ---- advantages ---------------------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._rows = inputs
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        rewards = self._turn_rewards(mode, inputs)
        out["advantages"] = self._advantages(out, rewards, gather_object([str(r["id"]) for r in inputs]), mode)
        if self._stale:  # sampled by the last step's weights: the loss's π_old is the sampler's (TRL's tensor of
            # the rollout's logprobs, NaN on tool tokens, which the loss masks but a NaN would still poison)
            out["old_per_token_logps"] = out["sampling_per_token_logps"].nan_to_num(0.0)
        self._log_batch(mode, rewards, self._trajs)
        if mode == "train":
            self._record(self._local(rewards), out["advantages"])
        return out

    def _record(self, rewards: list[TurnRewards], advantages) -> None:
        """Append this step's trajectories to ``OUTPUT_DIR/rollouts.p<process>.jsonl`` for ``agentkit view``: each
        with its step, outcome score, correctness, and per model turn its reward and mean advantage; segments keep
        their text, tool calls and entropies (not their ids or logprobs, to stay small)."""
        path = Path(self.args.output_dir) / f"rollouts.p{self.accelerator.process_index}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for t, score, r, adv in zip(self._trajs, self._scores, rewards, advantages.tolist()):
            d = t.to_dict()
            for seg in d["segments"]:
                seg["token_ids"], seg["logprobs"] = [], None
                if seg["entropies"]:
                    seg["entropies"] = [round(e, 3) for e in seg["entropies"]]
            d["prompt_ids"] = []
            d["meta"] = {
                **d["meta"],
                "step": self.state.global_step,
                "reward": score["score"],
                "correct": score["em"] >= 1.0,
                "turn_rewards": r.turns,
                "turn_advantages": _turn_means(t, adv),
            }
            lines.append(json.dumps(d, default=_unserialisable))  # a vision prompt's images: a placeholder
        with open(path, "a") as f:
            f.write("".join(x + "\n" for x in lines))

    def _turn_rewards(self, mode: str, rows: list[dict[str, Any]]) -> list[TurnRewards]:
        """Every trajectory's ``TurnRewards`` over all processes (in process order): the outcome, and TIPS'
        shaping when there is a shaper (potentials scored locally, α over the gathered batch)."""
        outcomes = [s["score"] for s in self._scores]
        if self.shaper is None:
            return gather_object([TurnRewards(r, [0.0] * n) for r, n in zip(outcomes, map(_model_turns, self._trajs))])
        t0 = time.perf_counter()
        pots = gather_object(self.shaper.potentials(self._trajs, [r["answers"] for r in rows]))
        rewards, stats = self.shaper.shape(pots, gather_object(outcomes), self.state.global_step)
        stats["seconds"] = time.perf_counter() - t0
        for k, v in stats.items():
            self._metrics[mode][f"tips/{k}"].append(v)
        return rewards

    def _local(self, gathered: list) -> list:
        """This process's rows of a list gathered over all processes."""
        first = self.accelerator.process_index * len(self._rows)
        return gathered[first : first + len(self._rows)]

    def _advantages(self, out: dict[str, Any], rewards: list[TurnRewards], groups: list[str], mode: str):
        """``[B, T]`` advantages of this process's trajectories: the estimator over the whole batch, turn k's
        advantage on every model token of turn k."""
        per_turn = estimate(self.estimator, rewards, groups, **self.estimator_options)
        width = out["completion_ids"].shape[1]
        return token_advantages(self._trajs, self._local(per_turn), width).to(out["completion_ids"].device)

    def _log_batch(self, mode: str, rewards: list[TurnRewards], trajs: list[Trajectory]) -> None:
        names = ("outcome/em", "outcome/f1", "outcome/format", "tools/calls", "tools/turns")
        rows = gather_object(  # one collective for all of them: a row per trajectory, every process
            [
                (s["em"], s["f1"], float(s["format"] > 0), float(t.tool_calls), float(_model_turns(t)))
                for s, t in zip(self._scores, trajs)
            ]
        )
        for name, values in zip(names, zip(*rows)):
            self._metrics[mode][name].append(sum(values) / len(values))
        self._metrics[mode]["reward/shaped_return"].append(sum(r.total for r in rewards) / max(1, len(rewards)))

    def close(self) -> None:
        """Close the rollout engine this trainer built or was given (after a rollout still under way)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._engine is not None:
            self._engine.close()


@dataclass
class _Ahead:
    """A rollout started a step early: for ``step``'s rows ``ids``."""

    step: int
    ids: list[str]
    prompts: list
    future: Any

    def matches(self, rows: list[dict[str, Any]], prompts: list, step: int) -> bool:
        """The same step, rows and prompts (a subclass may rewrite a row's prompt at its step: then the rollout
        is done again)."""
        return self.step == step and self.ids == [str(r["id"]) for r in rows] and self.prompts == list(prompts)


def _check_ahead(args: GRPOConfig, agent: AgentConfig, train_dataset) -> None:
    """``rollout_ahead``'s conditions (see ``AgentGRPOTrainer``), each refused with what to change."""
    from agentkit.errors import AgentkitError

    if not samples_the_policy(agent.sampling) or args.temperature != 1.0:
        raise AgentkitError(
            "rollout_ahead: the sampler's log-probabilities are the behaviour policy's only at temperature 1 "
            "without top-p/top-k",
            "sample with temperature 1.0, top_p 1.0, top_k 0, or turn rollout_ahead off",
        )
    if args.num_iterations != 1 or args.steps_per_generation != args.gradient_accumulation_steps:
        raise AgentkitError(
            "rollout_ahead: each generation must be trained on once, in one optimizer step",
            "set num_iterations 1 and leave steps_per_generation at gradient_accumulation_steps",
        )
    if "image" in train_dataset.column_names:
        raise AgentkitError("rollout_ahead: rows with images are not sampled ahead", "turn rollout_ahead off")


def _unserialisable(obj: Any) -> str:
    return f"<{type(obj).__name__}>"


def _turn_means(t: Trajectory, token_values: list[float]) -> list[float]:
    """The mean of a per-completion-token row (advantages) over each model turn's tokens."""
    out, pos = [], 0
    for s in t.segments:
        n = len(s.token_ids)
        if s.kind == "model":
            part = token_values[pos : pos + n]
            out.append(round(sum(part) / len(part), 4) if part else 0.0)
        pos += n
    return out


def rollout_fields(trajs: Sequence[Trajectory]) -> dict[str, list]:
    """What a TRL ``rollout_func`` returns for these trajectories: the ids as recorded, the sampler's logprobs
    (None on tool tokens) and ``env_mask`` (0 on tool tokens)."""
    return {
        "prompt_ids": [t.prompt_ids for t in trajs],
        "completion_ids": [t.completion_ids for t in trajs],
        "logprobs": [
            [
                lp
                for s in t.segments
                for lp in (s.logprobs if s.kind == "model" and s.logprobs else [None] * len(s.token_ids))
            ]
            for t in trajs
        ],
        "env_mask": [t.mask for t in trajs],
    }


def replay(trajs: Sequence[Trajectory]):
    """A ``rollout_func`` for TRL's own ``GRPOTrainer`` that returns these trajectories (in batch order): given
    the same rollouts and rewards, its outcome-GRPO loss equals ``AgentGRPOTrainer``'s."""
    return lambda prompts, trainer: rollout_fields(trajs)


def _rollout(prompts: list, trainer: AgentGRPOTrainer) -> dict[str, list]:
    """TRL's ``rollout_func``: the trainer's agent rollouts."""
    return trainer._rollout(prompts)


def outcome_reward(prompts=None, completions=None, outcome_score=None, **_) -> list[float]:
    """TRL's reward function (logged as ``rewards/outcome_reward``): the outcome the rollout computed."""
    return list(outcome_score)


def snapshot(model) -> Any:
    """A frozen copy of a policy for a lagged teacher (of a PEFT model: its merged weights).

    Trainers wrap a model's ``forward`` on the instance (TRL's fused head, accelerate's precision wrappers), in
    closures that hold the original module: a deep copy would still run the live policy. The copy gets its
    classes' own ``forward`` back. A ZeRO-3 policy is copied whole (``whole``), without DeepSpeed's hooks, which
    would fetch the copy's weights as partitions."""
    partitioned = is_partitioned(model)
    with whole(model):
        copied = copy.deepcopy(model)  # a parameter's deep copy is its data alone, without DeepSpeed's attributes
    for module in copied.modules():
        module.__dict__.pop("forward", None)
    if partitioned:
        clear_hooks(copied)
    if hasattr(copied, "merge_and_unload"):
        copied = copied.merge_and_unload()
    for p in copied.parameters():
        p.requires_grad_(False)
    return copied.eval()


def refresh_teacher(teacher, policy) -> None:
    """Give ``teacher`` the policy's current weights, frozen: an HFEngine gets a copy (the policy trains on), any
    other engine loads them (vLLM saves and reloads them, a copy by nature)."""
    policy = getattr(policy, "module", policy)  # DDP
    if isinstance(teacher, HFEngine) or hasattr(policy, "merge_and_unload"):
        send_weights(teacher, snapshot(policy))  # a copy, made whole under ZeRO-3
    else:
        with whole(policy):
            send_weights(teacher, policy)


def send_weights(engine, model) -> None:
    """``engine.load_weights(model=model)``, where every training process calls it at the same point.

    An engine of each process's own (HF, vLLM in the process) loads on each. Engines that share their servers
    across processes (``OpenAIEngine``: ``adopt_weights``) would each save and send the same weights: the main
    process sends them, the others wait for it and then request the version it sent. A failure to send is
    raised on every process (none waits forever).
    """
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState()
    if state.num_processes == 1 or not hasattr(engine, "adopt_weights"):
        engine.load_weights(model=model)
        return
    sent: list[Any] = [None]
    if state.is_main_process:
        try:
            engine.load_weights(model=model)
            sent = [engine.weights]
        except Exception as e:
            broadcast_object_list([f"the main process could not send the weights: {type(e).__name__}: {e}"])
            raise
    broadcast_object_list(sent)
    if isinstance(sent[0], str):
        raise RuntimeError(sent[0])
    if not state.is_main_process:
        engine.adopt_weights(sent[0])


def build_with_weights(config: EngineConfig, weights, *, tokenizer=None, name: str | None = None):
    """``config.build(weights, …)``, called by every training process at the same point; on servers shared by
    the processes (``SHARED_SERVERS``) the weights are sent once (``send_weights``)."""
    if not config.SHARED_SERVERS:
        return config.build(weights, tokenizer=tokenizer, name=name)
    engine = config.build(None, tokenizer=tokenizer, name=name)
    send_weights(engine, weights)
    return engine


def _servable(policy, adapters: bool = False) -> Any:
    """What another engine can load: the policy itself, or a merged copy of a PEFT policy (whose own
    ``save_pretrained`` writes only the adapter) unless the engine takes ``adapters`` (``OpenAIEngine``)."""
    return snapshot(policy) if hasattr(policy, "merge_and_unload") and not adapters else policy


class TeacherRefresh(TrainerCallback):
    """TIPS' lagged teacher: every ``every`` optimizer steps it becomes a frozen copy of the current policy
    (``every`` = 0: never, a fixed teacher). An HFEngine teacher is saved with each checkpoint
    (``teacher.safetensors``) and ``restore`` loads it back, so a resumed run scores with the teacher it had; a
    teacher on another engine restarts from the resumed policy."""

    FILE = "teacher.safetensors"

    def __init__(self, teacher, every: int = 200):
        self.teacher, self.every = teacher, every
        self.refreshed_at: list[int] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every and state.global_step % self.every == 0:
            refresh_teacher(self.teacher, model)
            self.refreshed_at.append(state.global_step)

    def on_save(self, args, state, control, **kwargs):
        where = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if isinstance(self.teacher, HFEngine) and state.is_world_process_zero and where.is_dir():
            st.save_model(self.teacher.model, str(where / self.FILE))  # handles tied embeddings

    def restore(self, checkpoint: str | Path) -> bool:
        """Load the teacher saved with ``checkpoint``; False when there is none (then it stays as it is)."""
        path = Path(checkpoint) / self.FILE
        if not (isinstance(self.teacher, HFEngine) and path.is_file()):
            return False
        st.load_model(self.teacher.model, str(path))
        if self.teacher.prefix_cache is not None:
            self.teacher.prefix_cache.clear()
        return True
