"""Supervised fine-tuning on tool-integrated trajectories with TRL's ``SFTTrainer``.

The dataset is pre-tokenised (``input_ids``, ``labels``): ``labels`` is -100 on the prompt and on every
tool-result token, so the loss is ``−Σ_t m_t log p(x_t | x_<t) / Σ_t m_t`` with ``m_t = 1`` only on tokens the
model wrote. TRL uses a ``labels`` column as is, so nothing re-tokenises text and the mask cannot drift from the
ids (the failure mode of trl#5144).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from agentkit.agent.trajectory import Trajectory
from agentkit.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt, option
from agentkit.files import save_pretrained_dir


def to_sft_dataset(trajectories: list[Trajectory], max_length: int | None = None):
    """Trajectories as an SFT dataset whose loss covers the model's own tokens only.

    Args:
        trajectories: the trajectories (their tool-result tokens are masked out).
        max_length: rows longer than this are dropped (a cut row would train on a broken call).

    Returns:
        A ``datasets.Dataset`` with ``input_ids`` = prompt + completion, ``labels`` (-100 outside the model's
        tokens) and ``task_id``.
    """
    import datasets

    rows = []
    for t in trajectories:
        ids = t.prompt_ids + t.completion_ids
        labels = [-100] * len(t.prompt_ids) + [x if m else -100 for x, m in zip(t.completion_ids, t.mask)]
        if max_length is None or len(ids) <= max_length:
            rows.append({"input_ids": ids, "labels": labels, "task_id": t.task_id})
    return datasets.Dataset.from_list(rows)


@dataclass
class SFTSettings:
    """SFT with TRL's SFTTrainer: full fine-tuning, or LoRA adapters with lora_r > 0."""

    epochs: NonNegFloat = option(2.0, "passes over the SFT set (0: skip SFT)")
    learning_rate: PosFloat = option(5e-5, "AdamW's learning rate")
    batch_size: PosInt = option(8, "rows per device per step")
    grad_accum: PosInt = option(1, "micro-batches per optimizer step")
    max_length: PosInt = option(1024, "tokens per row; longer rows are dropped")
    warmup_ratio: Fraction = option(0.05, "share of the steps the learning rate warms up over")
    lora_r: NonNegInt = option(0, "rank of LoRA adapters to train instead of all weights (0: full fine-tuning)")
    seed: int = option(0, "the trainer's seed (data order, LoRA init)")


def train_sft(
    model,
    tokenizer,
    dataset,
    settings: SFTSettings,
    output_dir: str | Path,
    progress: bool = True,
    adapter_dir: str | Path | None = None,
):
    """Train ``model`` in place with TRL's ``SFTTrainer`` (LoRA when ``settings.lora_r``).

    Args:
        model: a transformers causal LM.
        tokenizer: its tokenizer.
        dataset: from ``to_sft_dataset``.
        settings: epochs, learning rate, batch sizes, LoRA rank…
        output_dir: the trainer's folder.
        progress: the trainer's progress bar.
        adapter_dir: with LoRA, where the trained adapter (and the tokenizer) is also saved before it is merged,
            servable per request on the model it started from (``agentkit serve --lora NAME=DIR``).

    Returns:
        The trainer's log history.
    """
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(**trainer_args(settings, len(dataset), output_dir, progress), dataset_num_proc=None)
    peft_config = lora_config(settings.lora_r)
    patched = "forward" in model.__dict__
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset.remove_columns(["task_id"]),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    model.train()
    trainer.train()
    if peft_config is not None:
        if adapter_dir is not None:
            save_pretrained_dir(Path(adapter_dir), trainer.model, tokenizer)
        trainer.model = trainer.model.merge_and_unload()
    release([model, trainer.model], patched)
    return trainer.state.log_history, trainer.model


def labelled_logits_trainer():
    """``SFTTrainer`` whose loss computes logits only at the positions that predict a labelled token.

    Loss: −Σ_{b,t} m_{b,t+1} log p(x_{b,t+1} | x_{b,≤t}) / Σ m (m = labels ≠ -100), the same value as the full
    forward's. The LM head runs on the union over the batch of positions t whose next token is labelled
    (``logits_to_keep`` as an index tensor): ``[B, P, V]`` instead of ``[B, T, V]``. With short answers after long
    prompts and a large vocabulary (Gemma 3: 262k) that is most of a step's time and memory. TRL's extra metrics
    (entropy, token accuracy) are not computed."""
    import torch.nn.functional as F
    from trl import SFTTrainer

    class LabelledLogitsSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs["labels"]
            nxt = labels[:, 1:]  # the token each position t predicts
            pos = (nxt != -100).any(0).nonzero().squeeze(-1)
            kept = {k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask", "position_ids")}
            out = model(**kept, logits_to_keep=pos, use_cache=False)
            target = nxt[:, pos]
            loss = F.cross_entropy(
                out.logits.float().flatten(0, 1), target.flatten(), ignore_index=-100, reduction="sum"
            )
            n = num_items_in_batch if num_items_in_batch is not None else (target != -100).sum()
            loss = loss / n.to(loss.device) if hasattr(n, "to") else loss / n
            return (loss, out) if return_outputs else loss

    return LabelledLogitsSFTTrainer


def trainer_args(settings, n_rows: int, output_dir: str | Path, progress: bool) -> dict:
    """The training-argument fields SFT and DPO rounds share, from ``SFTSettings`` / ``DPOSettings``: cosine
    schedule, about 20 logged points, no checkpoints, the CPU unless a GPU is present."""
    import torch

    from agentkit.tracking import trainer_kwargs

    steps = math.ceil(n_rows / (settings.batch_size * settings.grad_accum)) * settings.epochs
    return dict(
        output_dir=str(output_dir),
        num_train_epochs=settings.epochs,
        learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        max_length=settings.max_length,
        warmup_steps=settings.warmup_ratio,  # < 1: a ratio
        lr_scheduler_type="cosine",
        logging_steps=max(1, int(steps) // 20),
        save_strategy="no",
        # report_to and run_name: the run's trackers (agentkit run --report-to)
        **trainer_kwargs(
            {"SFTSettings": "sft", "DPOSettings": "dpo"}.get(type(settings).__name__, Path(output_dir).name)
        ),
        seed=settings.seed,
        disable_tqdm=not progress,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
    )


def lora_config(r: int):
    """PEFT LoRA on all linear layers (alpha = 2r), or None for full fine-tuning (r = 0)."""
    if not r:
        return None
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=2 * r, task_type="CAUSAL_LM", target_modules="all-linear")


def release(models, patched: bool) -> None:
    """Leave trained models plain and ready to generate (every process calls it). TRL installs a fused ``forward`` on the instance whose
    closure holds the original module: a deepcopy (e.g. DPO's reference model) would then run the original's
    weights, so the class forward is put back (unless the model came with its own)."""
    from agentkit.models.sharding import unpartition

    for m in {id(m): m for m in models}.values():
        unpartition(m)  # trained under ZeRO-3: whole again on every process, to generate on one
        m.eval()
        if not patched:
            m.__dict__.pop("forward", None)
        m.config.use_cache = True
