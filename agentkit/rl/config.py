"""GRPO settings shared by the RL recipes (TIPS, Game-RL) and the TRL ``GRPOConfig`` they become."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt


@dataclass
class RLSettings:
    """steps: optimizer steps per run. questions_per_step × group_size trajectories per step (G = group_size; over
    all processes under accelerate), trained in micro-batches of micro_batch per process. learning_rate,
    warmup_ratio, max_grad_norm: the optimizer. beta: KL to the reference (0: no reference model). epsilon: the
    ratio clip. loss_type: TRL's aggregation (dapo: token mean over the batch, grpo: sequence mean, dr_grpo, bnpo).
    temperature, top_p: sampling. max_turns, max_tokens_per_turn, max_total_tokens: the agent's limits.
    save_steps: checkpoint interval (resume point). lora_r > 0: train LoRA adapters instead of all weights."""

    steps: PosInt = 30
    questions_per_step: PosInt = 4
    group_size: Annotated[int, at.Ge(2)] = 4
    micro_batch: PosInt = 8
    learning_rate: PosFloat = 1e-5
    warmup_ratio: Fraction = 0.0
    max_grad_norm: PosFloat = 1.0
    beta: NonNegFloat = 0.0
    epsilon: PosFloat = 0.2
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo"] = "dapo"
    temperature: PosFloat = 1.0
    top_p: Annotated[float, at.Interval(gt=0, le=1)] = 1.0
    max_turns: PosInt = 4
    max_tokens_per_turn: PosInt = TIR_TOKENS_PER_TURN
    max_total_tokens: PosInt = 768
    save_steps: PosInt = 5
    lora_r: NonNegInt = 0

    def problems(self) -> list[str]:
        per_step = self.questions_per_step * self.group_size
        if per_step % self.micro_batch:
            return [f"micro_batch: {self.micro_batch} does not divide questions_per_step × group_size = {per_step}"]
        return []


def grpo_config(r: RLSettings, out: Path, seed: int, processes: int = 1, quiet: bool = False):
    """TRL's ``GRPOConfig`` for one run: ``questions_per_step × group_size`` trajectories per optimizer step over
    ``processes`` processes, checkpoints every ``save_steps`` under ``out`` (the resume point)."""
    import torch
    from trl import GRPOConfig

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
        max_completion_length=r.max_total_tokens,
        temperature=r.temperature,
        logging_steps=1,
        save_strategy="steps",
        save_steps=r.save_steps,
        save_total_limit=1,
        seed=seed,
        data_seed=seed,
        report_to=[],
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
    return f"{os.cpu_count()} CPU cores, torch {torch.get_num_threads()} threads"
