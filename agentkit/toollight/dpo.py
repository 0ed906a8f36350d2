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

from agentkit.agent.trajectory import Trajectory
from agentkit.toollight.pairs import Pair


def to_dpo_dataset(pairs: list[Pair]):
    """Pairs -> a ``datasets.Dataset`` of ids and masks (both trajectories of a pair share the prompt)."""
    import datasets

    rows = []
    for p in pairs:
        if p.chosen.prompt_ids != p.rejected.prompt_ids:
            raise ValueError(f"pair {p.chosen.task_id}: chosen and rejected have different prompts")
        rows.append({"prompt_ids": p.chosen.prompt_ids, "chosen_ids": p.chosen.completion_ids,
                     "rejected_ids": p.rejected.completion_ids, "chosen_mask": p.chosen.mask,
                     "rejected_mask": p.rejected.mask, "rule": p.rule, "difficulty": p.difficulty})
    return datasets.Dataset.from_list(rows)


def conversational(pairs: list[Pair]) -> list[dict]:
    """TRL's conversational prompt / chosen / rejected form, for export (text only: masks cannot ride along)."""
    def reply(t: Trajectory):
        return [{"role": "assistant", "content": t.text}]

    return [{"prompt": p.chosen.prompt, "chosen": reply(p.chosen), "rejected": reply(p.rejected)} for p in pairs]


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
                kwargs["data_collator"] = MaskedCollator(pad_token_id=tok.pad_token_id or tok.eos_token_id,
                                                         max_length=a.max_length, truncation_mode="keep_start")
            super().__init__(*args, **kwargs)

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if "prompt_ids" in dataset.column_names:  # already tokenised from trajectories: keep ids and masks
                return dataset
            return super()._prepare_dataset(dataset, processing_class, args, dataset_name)

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            self._signature_columns = [*self._signature_columns, "chosen_mask", "rejected_mask"]

    return MaskedDPOTrainer
