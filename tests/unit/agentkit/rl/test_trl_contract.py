"""The TRL internals agentkit.rl relies on (pinned trl>=1.16,<1.17): if a new TRL changes them, these fail first.

AgentGRPOTrainer (1) passes ``rollout_func`` whose output carries ``env_mask`` (TRL's tool mask) and extra fields
for the reward functions, (2) overrides ``_generate_and_score_completions(inputs) -> dict`` and replaces its
``advantages`` with a (B, T) tensor, which (3) ``_compute_loss`` must use token by token; (4) its length buckets
wrap ``_get_per_token_logps_and_entropies``, and ``rollout_ahead`` wraps the Trainer's ``get_batch_samples`` and
sets ``old_per_token_logps``.
"""

import inspect

import pytest
import torch

trl = pytest.importorskip("trl")


def test_signatures_and_hooks():
    from trl import GRPOTrainer

    assert "rollout_func" in inspect.signature(GRPOTrainer.__init__).parameters
    assert list(inspect.signature(GRPOTrainer._generate_and_score_completions).parameters) == ["self", "inputs"]
    assert list(inspect.signature(GRPOTrainer._compute_loss).parameters) == ["self", "model", "inputs"]
    generate = inspect.getsource(GRPOTrainer._generate)
    assert 'extra_fields.pop("env_mask"' in generate  # env_mask becomes the tool mask
    assert "self.rollout_func(prompts, self)" in generate
    # length buckets call TRL's log-probabilities per group, by position up to compute_aux_loss
    logps = list(inspect.signature(GRPOTrainer._get_per_token_logps_and_entropies).parameters)
    assert logps[:8] == [
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "compute_aux_loss",
    ]
    # rollout_ahead takes the next step's batch in get_batch_samples, which the training loop calls once per step
    from transformers import Trainer

    assert list(inspect.signature(Trainer.get_batch_samples).parameters) == [
        "self",
        "epoch_iterator",
        "num_batches",
        "device",
    ]
    assert "self.get_batch_samples(epoch_iterator, num_batches" in inspect.getsource(Trainer)
    assert 'inputs.get("old_per_token_logps")' in inspect.getsource(GRPOTrainer._compute_loss)
    # compact_fused_head switches the fused head's compaction through trl.trainer.utils._use_triton
    import trl.trainer.utils as trl_utils

    assert "compact = _use_triton(hidden_states.device)" in inspect.getsource(trl_utils.add_fused_lm_head)
    loss = inspect.getsource(GRPOTrainer._compute_loss)
    assert "advantages.dim() == 1" in loss  # (B,) is unsqueezed; (B, T) is used as is
    assert 'completion_mask * inputs["tool_mask"]' in loss


def test_compute_loss_uses_per_token_advantages(tmp_path):
    """With old log-probs = the current ones (ratio 1) and β = 0, TRL's grpo loss is
    mean_i Σ_t m_it (−A_it) / Σ_t m_it and its dapo loss (the default) Σ_it m_it (−A_it) / (model tokens): checked
    against those hand computations with a (B, T) advantage."""
    from trl import GRPOConfig, GRPOTrainer

    from agentkit.models import load_model

    model, tok = load_model("tiny-random")
    import datasets

    data = datasets.Dataset.from_list([{"prompt": "a"}])

    def trainer(loss_type):
        args = GRPOConfig(
            output_dir=str(tmp_path),
            num_generations=2,
            per_device_train_batch_size=2,
            report_to=[],
            use_cpu=True,
            bf16=False,
            loss_type=loss_type,
        )
        t = GRPOTrainer(
            model,
            reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
            args=args,
            train_dataset=data,
            processing_class=tok,
        )
        t.current_gradient_accumulation_steps = 1
        t.model.train()
        return t

    adv = torch.tensor([[1.0, -2.0, 3.0, 0.5], [0.25, 0.0, -1.0, 4.0]])
    tool_mask = torch.tensor([[1, 0, 1, 1], [1, 1, 1, 0]])
    completion_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    inputs = {
        "prompt_ids": torch.tensor([[5, 6], [5, 6]]),
        "prompt_mask": torch.ones(2, 2, dtype=torch.long),
        "completion_ids": torch.tensor([[7, 8, 9, 10], [11, 12, 13, 14]]),
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "advantages": adv,
        "num_items_in_batch": torch.tensor(5.0),  # model tokens in the batch
    }
    grpo = trainer("grpo")
    loss = grpo._compute_loss(grpo.model, inputs)
    m = (tool_mask * completion_mask).float()  # row 0: tokens 0, 2; row 1: tokens 0, 1, 2
    assert loss.item() == pytest.approx(((-2.0) + 0.25) / 2, abs=1e-6)  # (−1 − 3)/2 and (−0.25 − 0 + 1)/3
    dapo = trainer("dapo")
    assert dapo._compute_loss(dapo.model, inputs).item() == pytest.approx(-3.25 / 5, abs=1e-6)
    assert m.sum().item() == 5
