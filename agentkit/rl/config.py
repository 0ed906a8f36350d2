"""GRPO settings shared by the RL recipes (TIPS, Game-RL) and the TRL ``GRPOConfig`` they become."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN, AgentConfig
from agentkit.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt, option
from agentkit.engines.base import SamplingParams


def samples_the_policy(sampling: SamplingParams) -> bool:
    """Whether sampling with ``sampling`` draws from the policy itself, so that the sampler's log-probabilities are
    the behaviour policy's: temperature 1, no top-p or top-k truncation (``rollout_ahead`` reads them as π_old)."""
    return sampling.temperature == 1.0 and sampling.top_p >= 1.0 and not sampling.top_k


@dataclass
class RLSettings:
    """GRPO settings: ``questions_per_step × group_size`` trajectories per optimizer step (G = group_size; over all
    processes under accelerate), trained in micro-batches of ``micro_batch`` per process, rolled out by ``agent``."""

    RENAMED: ClassVar[dict[str, str]] = {
        "temperature": "agent.sampling.temperature",
        "top_p": "agent.sampling.top_p",
        "max_turns": "agent.max_turns",
        "max_tokens_per_turn": "agent.sampling.max_tokens",
        "max_total_tokens": "agent.max_total_tokens",
    }

    steps: PosInt = option(30, "optimizer steps per run")
    questions_per_step: PosInt = option(4, "questions per optimizer step")
    group_size: Annotated[int, at.Ge(2)] = option(4, "trajectories per question (GRPO's group G)")
    micro_batch: PosInt = option(8, "trajectories per forward/backward pass on each process")
    learning_rate: PosFloat = option(1e-5, "AdamW's learning rate (constant after warm-up)")
    warmup_ratio: Fraction = option(0.0, "share of the steps the learning rate warms up over")
    max_grad_norm: PosFloat = option(1.0, "gradient clipping norm")
    beta: NonNegFloat = option(0.0, "KL penalty to the reference model (0: no reference model is loaded)")
    epsilon: PosFloat = option(0.2, "PPO ratio clip ε")
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo"] = option(
        "dapo", "TRL's loss aggregation: dapo (token mean over the batch), grpo (sequence mean), dr_grpo, bnpo"
    )
    agent: AgentConfig = option(
        AgentConfig(
            max_turns=4,
            max_tool_calls=4,
            max_total_tokens=768,
            sampling=SamplingParams(temperature=1.0, top_p=1.0, max_tokens=TIR_TOKENS_PER_TURN, seed=0),
        ),
        "the rollouts: the agent's limits and sampling (sampling.temperature also scales the trained log-probs)",
    )
    rollout_ahead: bool = option(
        False,
        "sample step k+1 while step k trains, with step k's weights (one step off policy; GRPO methods; needs "
        "agent.sampling temperature 1, top_p 1, top_k 0)",
    )
    save_steps: PosInt = option(5, "checkpoint interval in steps (the resume point)")
    lora_r: NonNegInt = option(0, "rank of LoRA adapters to train instead of all weights (0: full fine-tuning)")

    def problems(self) -> list[str]:
        """Rules across fields (``agentkit.config.cross_checks``)."""
        per_step = self.questions_per_step * self.group_size
        out = []
        if per_step % self.micro_batch:
            out.append(f"micro_batch: {self.micro_batch} does not divide questions_per_step × group_size = {per_step}")
        if self.agent.sampling.temperature == 0:
            out.append("agent.sampling.temperature: 0 samples every trajectory of a group alike (no advantage)")
        if self.rollout_ahead and not samples_the_policy(self.agent.sampling):
            out.append(
                "rollout_ahead: needs agent.sampling temperature 1.0, top_p 1.0 and top_k 0 (the sampler's "
                "log-probabilities are the loss's old ones)"
            )
        return out


def grpo_config(r: RLSettings, out: Path, seed: int, processes: int = 1, quiet: bool = False):
    """TRL's ``GRPOConfig`` for one run: ``questions_per_step × group_size`` trajectories per optimizer step over
    ``processes`` processes, checkpoints every ``save_steps`` under ``out`` (the resume point)."""
    import torch
    from trl import GRPOConfig

    from agentkit.tracking import trainer_kwargs

    per_step = r.questions_per_step * r.group_size  # trajectories per optimizer step, over all processes
    if per_step % (r.micro_batch * processes):
        from agentkit.errors import AgentkitError

        raise AgentkitError(
            f"rl: {per_step} trajectories per step do not split into micro-batches of {r.micro_batch} on "
            f"{processes} processes",
            "make questions_per_step × group_size a multiple of micro_batch × processes",
        )
    return GRPOConfig(
        output_dir=str(out),
        max_steps=r.steps,
        num_generations=r.group_size,
        per_device_train_batch_size=r.micro_batch,
        gradient_accumulation_steps=per_step // (r.micro_batch * processes),
        learning_rate=r.learning_rate,
        warmup_steps=r.warmup_ratio,
        max_grad_norm=r.max_grad_norm,
        lr_scheduler_type="constant_with_warmup",
        beta=r.beta,
        epsilon=r.epsilon,
        loss_type=r.loss_type,
        max_completion_length=r.agent.max_total_tokens,
        temperature=r.agent.sampling.temperature,
        logging_steps=1,
        save_strategy="steps",
        save_steps=r.save_steps,
        save_total_limit=1,
        seed=seed,
        data_seed=seed,
        **trainer_kwargs(out.name),  # report_to and run_name: the run's trackers (agentkit run --report-to)
        disable_tqdm=quiet,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
    )


def describe_machine() -> str:
    """The CPU or GPU this runs on, in a few words (a report's budget line)."""
    import os

    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = f"{usable} of {os.cpu_count()}" if usable != os.cpu_count() else f"{os.cpu_count()}"
    return f"{cores} CPU cores, torch {torch.get_num_threads()} threads"
