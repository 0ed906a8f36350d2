"""DPO on tool-integrated pairs with TRL's ``DPOTrainer``, tool-result tokens out of the log-ratios.

TRL tokenises text pairs itself and marks every completion token as trained, so a chosen trajectory's
``<result>…</result>`` tokens would enter ``log π(y|x)`` (the official code very likely trains on them).
``MaskedDPOTrainer`` takes pairs already tokenised from ``Trajectory`` objects (``prompt_ids``, ``chosen_ids``,
``rejected_ids`` and per-token ``chosen_mask`` / ``rejected_mask``, 0 on tool tokens), so the sequence
log-probability in the DPO loss

    L = −log σ(β [(log π(y_w|x) − log π_ref(y_w|x)) − (log π(y_l|x) − log π_ref(y_l|x))])

sums over the model's own tokens only, for the policy and the reference alike.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

from agentkit.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt, option
from agentkit.engines.base import encode_prompt
from agentkit.errors import AgentkitError
from agentkit.files import save_pretrained_dir
from agentkit.toollight.pairs import Pair
from agentkit.toollight.sft import lora_config, release, trainer_args


def to_dpo_dataset(pairs: list[Pair]):
    """Preference pairs as a dataset for DPO.

    Args:
        pairs: the pairs (both trajectories of a pair share the prompt).

    Returns:
        A ``datasets.Dataset`` in TRL's conversational form (``prompt`` messages, ``chosen`` / ``rejected``
        assistant messages, for any preference trainer) plus the exact ids and per-token masks that
        ``MaskedDPOTrainer`` trains on.

    Raises:
        ValueError: a pair whose trajectories have different prompts.
    """
    import datasets

    rows = []
    for p in pairs:
        if p.chosen.prompt_ids != p.rejected.prompt_ids:
            raise ValueError(f"pair {p.chosen.task_id}: chosen and rejected have different prompts")
        rows.append(
            {
                "prompt": p.chosen.prompt,
                "chosen": _reply(p.chosen.text),
                "rejected": _reply(p.rejected.text),
                "prompt_ids": p.chosen.prompt_ids,
                "chosen_ids": p.chosen.completion_ids,
                "rejected_ids": p.rejected.completion_ids,
                "chosen_mask": p.chosen.mask,
                "rejected_mask": p.rejected.mask,
                "task_id": p.chosen.task_id,
                "rule": p.rule,
                "difficulty": p.difficulty,
                "chosen_calls": p.chosen.tool_calls,
                "rejected_calls": p.rejected.tool_calls,
            }
        )
    return datasets.Dataset.from_list(rows)


def _reply(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# A tool result inside an assistant message, as the loop feeds it back (tag style or hermes style).
_RESULT = re.compile(r"\n?<result>.*?</result>\n?|\n?<tool_response>.*?</tool_response>\n?", re.S)


def tokenize_pairs(dataset, tokenizer):
    """Pairs brought as text (TRL's conversational or standard prompt / chosen / rejected columns) -> the ids and
    masks ``MaskedDPOTrainer`` needs. Each ``<result>…</result>`` (or ``<tool_response>``) span in a reply is
    tokenised on its own and masked, the way the agent loop records tool results. A dataset that already has
    ``prompt_ids`` is returned unchanged."""
    if "prompt_ids" in dataset.column_names:
        return dataset
    missing = {"prompt", "chosen", "rejected"} - set(dataset.column_names)
    if missing:
        raise ValueError(f"pairs need prompt, chosen and rejected columns; missing {sorted(missing)}")

    def completion(reply) -> tuple[list[int], list[int]]:
        text = reply if isinstance(reply, str) else "".join(m["content"] for m in reply if m["role"] == "assistant")
        ids, mask, pos = [], [], 0
        for m in [*_RESULT.finditer(text), None]:
            end = m.start() if m else len(text)
            for piece, keep in ((text[pos:end], 1), (m.group(0) if m else "", 0)):
                if piece:
                    new = tokenizer(piece, add_special_tokens=False).input_ids
                    ids += new
                    mask += [keep] * len(new)
            pos = m.end() if m else pos
        return ids, mask

    def row(r):
        prompt = r["prompt"] if isinstance(r["prompt"], list) else [{"role": "user", "content": r["prompt"]}]
        (c, cm), (j, jm) = completion(r["chosen"]), completion(r["rejected"])
        return {
            "prompt_ids": encode_prompt(tokenizer, prompt),
            "chosen_ids": c,
            "chosen_mask": cm,
            "rejected_ids": j,
            "rejected_mask": jm,
        }

    return dataset.map(row)


def load_pairs(path: str | Path, tokenizer):
    """Preference pairs from a saved HF dataset directory, a JSONL file or a Parquet file (ours, with ids and
    masks, or anyone's TRL-style text pairs), ready for ``train_dpo``."""
    import datasets

    path = Path(path)
    if path.is_dir():
        ds = datasets.load_from_disk(str(path))
    elif path.suffix in (".jsonl", ".json"):
        from agentkit.data.tasks import read_jsonl

        ds = datasets.Dataset.from_list(read_jsonl(path, required=("prompt", "chosen", "rejected")))
    elif path.suffix == ".parquet":
        from agentkit.data.tasks import read_parquet

        ds = datasets.Dataset(read_parquet(path).read())
    else:
        raise AgentkitError(
            f"{path}: not a dataset directory, .jsonl or .parquet file",
            "save pairs with Dataset.save_to_disk or as JSONL rows {prompt, chosen, rejected}",
        )
    try:
        return tokenize_pairs(ds, tokenizer)
    except ValueError as e:
        raise AgentkitError(f"{path}: {e}") from None


def masked_dpo_trainer_cls():
    """``MaskedDPOTrainer``, built lazily so importing agentkit does not import TRL."""
    import torch
    from trl import DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    class MaskedCollator(DataCollatorForPreference):
        def torch_call(self, examples):
            out = super().torch_call(examples)
            masks = [[0] * len(e["prompt_ids"]) + list(e["chosen_mask"]) for e in examples]
            masks += [[0] * len(e["prompt_ids"]) + list(e["rejected_mask"]) for e in examples]
            if self.max_length is not None:  # the parent truncates keep_start; do the same
                masks = [m[: self.max_length] for m in masks]
            cm = torch.zeros_like(out["completion_mask"])
            for i, m in enumerate(masks):
                cm[i, : len(m)] = torch.tensor(m, dtype=cm.dtype)
            out["completion_mask"] = cm
            return out

    class MaskedDPOTrainer(DPOTrainer):
        def __init__(self, *args, **kwargs):
            if kwargs.get("data_collator") is None:
                tok = kwargs["processing_class"]
                a = kwargs["args"]
                kwargs["data_collator"] = MaskedCollator(
                    pad_token_id=tok.pad_token_id or tok.eos_token_id,
                    max_length=a.max_length,
                    truncation_mode="keep_start",
                )
            super().__init__(*args, **kwargs)

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if "prompt_ids" in dataset.column_names:  # already tokenised from trajectories: keep ids and masks
                return dataset
            return super()._prepare_dataset(dataset, processing_class, args, dataset_name)

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            self._signature_columns = [*self._signature_columns, "chosen_mask", "rejected_mask"]

    return MaskedDPOTrainer


FULL_LR = 7e-6  # the paper's
LORA_LR = 5e-5  # chosen on validation questions for a round of ~33 pairs (docs/toollight.md, "The DPO learning rate")


@dataclasses.dataclass
class DPOSettings:
    """One DPO round with TRL's DPOTrainer. With LoRA the adapters are merged after the round, so the merged
    model is the next round's policy and reference either way."""

    beta: PosFloat = option(0.1, "the sigmoid loss's β (paper 0.1)")
    epochs: NonNegFloat = option(3.0, "passes over the round's pairs (the paper's 3)")
    learning_rate: PosFloat | None = option(
        None,
        f"AdamW's learning rate (None: {LORA_LR:g} with LoRA, the paper's {FULL_LR:g} with full fine-tuning; the "
        f"paper's {FULL_LR:g} with LoRA is for its thousands of pairs: on a round of ~33 pairs it leaves the policy "
        f"unchanged, and {LORA_LR:g} is the largest rate that kept the validation score: docs/toollight.md)",
    )
    batch_size: PosInt = option(4, "pairs per device per step")
    grad_accum: PosInt = option(1, "micro-batches per optimizer step")
    max_length: PosInt = option(
        1024,
        "prompt + completion tokens; the collator keeps the first max_length of a longer pair, so set it above the longest chain",
    )
    warmup_ratio: Fraction = option(0.1, "share of the steps the learning rate warms up over")
    lora_r: NonNegInt = option(
        8, "rank of LoRA adapters on all linear layers (the paper's 8), merged after the round (0: full fine-tuning)"
    )
    seed: int = option(0, "the trainer's seed")

    def lr(self) -> float:
        """The learning rate in force.

        >>> DPOSettings().lr(), DPOSettings(lora_r=0).lr(), DPOSettings(learning_rate=1e-5).lr()
        (5e-05, 7e-06, 1e-05)
        """
        if self.learning_rate is not None:
            return self.learning_rate
        return LORA_LR if self.lora_r else FULL_LR


def train_dpo(
    model,
    tokenizer,
    dataset,
    settings: DPOSettings,
    output_dir: str | Path,
    progress: bool = True,
    adapter_dir: str | Path | None = None,
):
    """One DPO round, tool-result tokens out of the loss; the reference is a frozen copy of ``model`` as it is now
    (the previous round's model).

    Args:
        model: a transformers causal LM.
        tokenizer: its tokenizer.
        dataset: from ``to_dpo_dataset``.
        settings: β, epochs, learning rate, batch sizes, LoRA rank…
        output_dir: the trainer's folder.
        progress: the trainer's progress bar.
        adapter_dir: with LoRA, where the round's adapter (and the tokenizer) is also saved before it is merged,
            servable per request on the model the round started from (``agentkit serve --lora NAME=DIR``).

    Returns:
        ``(log history, trained model)``.
    """
    from trl import DPOConfig

    settings = dataclasses.replace(settings, learning_rate=settings.lr())
    args = DPOConfig(
        **trainer_args(settings, len(dataset), output_dir, progress), beta=settings.beta, loss_type=["sigmoid"]
    )
    peft_config = lora_config(settings.lora_r)
    # with LoRA, TRL's reference is the same model with the adapters switched off
    ref = None if peft_config is not None else copy.deepcopy(model).eval().requires_grad_(False)
    keep = ["prompt_ids", "chosen_ids", "rejected_ids", "chosen_mask", "rejected_mask"]
    dataset = dataset.select_columns(keep)
    patched = "forward" in model.__dict__
    trainer = masked_dpo_trainer_cls()(
        model=model,
        ref_model=ref,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    model.train()
    trainer.train()
    if peft_config is not None and adapter_dir is not None:
        save_pretrained_dir(Path(adapter_dir), trainer.model, tokenizer)
    trained = trainer.model.merge_and_unload() if peft_config is not None else trainer.model
    release([model, trained], patched)
    return trainer.state.log_history, trained
