r"""``AgentPPOTrainer``: multi-turn PPO with a critic for tool-using agents, on ``AgentGRPOTrainer``.

Everything but the advantages is ``AgentGRPOTrainer``'s (rollouts on any engine, tool tokens masked, TIPS
shaping, TRL's clipped-ratio loss, accelerate / DDP, checkpoints and resume). What PPO adds:

1. **A critic** (``agentkit.rl.value``): a ``ValueHead`` on the policy's last hidden state (``critic="head"``, the
   backbone shared: full weights or LoRA adapters learn from the value loss too) or a separate ``ValueModel``
   (``critic="separate"``, a copy of the policy's backbone at the start). Its parameters join the optimizer as a
   second parameter group (``value_learning_rate``), are clipped to ``max_grad_norm`` apart from the policy's,
   and are saved with every checkpoint (``critic.safetensors``) and restored on resume.
2. **Token rewards.** Turn k's reward (``TurnRewards.turns``: TIPS' α(γΦ_k − Φ_{k−1}), plus R on the last turn)
   sits on the last model token of turn k; with ``kl_in_reward`` every model token also gets
   :math:`-\beta\,(\log\pi_{old}(y_t) - \log\pi_{ref}(y_t))` (TRL's ``PPOTrainer``: KL in the reward, k1), β the
   config's ``beta``, and then the loss carries no KL term; otherwise β is the loss's KL as in GRPO.
3. **GAE over model tokens only** (``agentkit.rl.advantages.gae``): tool-result tokens get neither advantage nor
   value target; advantages whitened over the batch's model tokens (all processes), as TRL's PPO.
4. **The loss**: TRL's clipped surrogate on those advantages plus ``vf_coef`` × PPO's clipped value loss
   (``clipped_value_loss``) on the same micro-batch, scaled for gradient accumulation like the policy term.

So TIPS-PPO is this trainer with TIPS' shaper: shaped per-turn rewards feed GAE, as in the paper.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import annotated_types as at
import safetensors.torch as st
import torch

from agentkit.config import Fraction, NonNegFloat, PosFloat, option
from agentkit.rl.advantages import TurnRewards, gae
from agentkit.rl.trainer import AgentGRPOTrainer, token_advantages
from agentkit.rl.value import (
    ValueHead,
    ValueModel,
    backbone_of,
    clipped_value_loss,
    completion_values,
    hidden_size,
    masked_whiten,
)


@dataclass
class PPOSettings:
    """PPO's critic and advantage settings (the optimisation and the rollouts are ``RLSettings``')."""

    critic: Literal["head", "separate"] = option(
        "separate",
        "separate (a copy of the policy's backbone with its own head: verl's, the TIPS paper's PPO) or head (a value "
        "head on the policy's backbone; collapsed a LoRA policy in a pilot, docs/results/tips-ppo-head-pilot)",
    )
    vf_coef: NonNegFloat = option(0.1, "weight of the value loss (TRL's PPO: 0.1)")
    cliprange_value: PosFloat = option(0.2, "ε_V, the value clip around the rollout's values (TRL's PPO: 0.2)")
    gamma: Annotated[float, at.Interval(gt=0, le=1)] = option(1.0, "discount per model token in GAE (TRL's PPO: 1.0)")
    lam: Fraction = option(1.0, "GAE's λ (verl's and OpenRLHF's default 1.0: Monte Carlo returns; TRL's PPO: 0.95)")
    kl_in_reward: bool = option(
        True, "put β·KL(π_old ‖ π_ref) in every model token's reward (TRL's PPO) instead of the loss"
    )
    whiten_advantages: bool = option(True, "whiten the advantages over the batch's model tokens (TRL's PPO)")
    value_learning_rate: PosFloat | None = option(None, "the critic's learning rate (None: the policy's)")


class AgentPPOTrainer(AgentGRPOTrainer):
    """PPO on agent trajectories (see the module docstring).

    Args:
        model: the policy (a model instance: the critic is built from it before any adapter is added).
        args: TRL's ``GRPOConfig`` (``num_generations`` trajectories per question; groups matter only to a shaper's
            statistics here; ``beta`` is the KL coefficient; ``num_iterations`` PPO epochs per batch).
        train_dataset: from ``agent_dataset``.
        processing_class: the policy's tokenizer.
        tools: the tools the agent may call.
        agent: the rollout's limits and sampling.
        ppo: the critic and GAE settings (default ``PPOSettings()``).
        engine, shaper, outcome, callbacks, peft_config: as for ``AgentGRPOTrainer`` (its ``length_buckets`` only
            with a separate critic: a value head reads the hidden states of TRL's one padded batch).
    """

    def __init__(
        self,
        model,
        args,
        train_dataset,
        *,
        processing_class,
        tools,
        agent,
        ppo: PPOSettings | None = None,
        engine: Any = None,
        shaper: Any = None,
        outcome=None,
        callbacks=None,
        peft_config=None,
    ):
        if isinstance(model, str):
            raise TypeError("AgentPPOTrainer takes a model instance (load_model), not a name")
        self.ppo = ppo or PPOSettings()
        separate = ValueModel.from_policy(model) if self.ppo.critic == "separate" else None
        super().__init__(
            model,
            args,
            train_dataset,
            processing_class=processing_class,
            tools=tools,
            agent=agent,
            engine=engine,
            shaper=shaper,
            outcome=outcome,
            callbacks=callbacks,
            peft_config=peft_config,
            length_buckets=self.ppo.critic != "head",  # the head reads the hidden states of one padded batch
        )
        critic = separate if separate is not None else ValueHead(hidden_size(model))
        self.critic = self.accelerator.prepare_model(critic.to(self.accelerator.device))

    # ---- the critic ---------------------------------------------------------------------------------------
    @contextmanager
    def _hidden_states(self):
        """Collect the policy backbone's ``last_hidden_state`` of every forward inside the block (for a value head;
        a separate critic needs none, and nothing is kept)."""
        seen: list[torch.Tensor] = []
        if self.ppo.critic != "head":
            yield seen
            return
        backbone = backbone_of(self.accelerator.unwrap_model(self.model))
        handle = backbone.register_forward_hook(lambda m, a, out: seen.append(out.last_hidden_state))
        try:
            yield seen
        finally:
            handle.remove()

    def _critic_values(self, hidden: list[torch.Tensor], ids: torch.Tensor, mask: torch.Tensor, width: int):
        """``[B, width]`` values of the completion tokens' states: from the policy's hidden states (a head) or the
        separate critic's own pass."""
        full = self.critic(torch.cat(hidden)) if self.ppo.critic == "head" else self.critic(ids, mask)
        return completion_values(full, width)

    @staticmethod
    def _sequences(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, attention mask, model-token mask over the completion) of a batch TRL built."""
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        model = inputs["completion_mask"] * inputs.get("tool_mask", torch.ones_like(inputs["completion_mask"]))
        return ids, attn, model.float()

    # ---- advantages ---------------------------------------------------------------------------------------
    def _advantages(self, out: dict[str, Any], rewards: list[TurnRewards], groups: list[str], mode: str):
        """GAE over each trajectory's model tokens with the critic's values (module docstring); stores the value
        targets and the values in ``out`` for the value loss."""
        c = self.ppo
        ids, attn, model = self._sequences(out)
        width = out["completion_ids"].shape[1]
        local = self._local(rewards)
        token_rewards = token_advantages(self._trajs, [r.turns for r in local], width, last_only=True)
        token_rewards = token_rewards.to(ids.device)
        with torch.no_grad(), self._hidden_states() as hidden:
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, ids, attn, width, batch_size=self.args.per_device_train_batch_size
            )
            values = self._critic_values(hidden, ids, attn, width).float() * model
        if c.kl_in_reward and self.beta != 0.0:
            kl = (logps - out["ref_per_token_logps"]) * model
            token_rewards = token_rewards - self.beta * kl
            self._metrics[mode]["ppo/kl"].append(self._masked_mean(kl, model))
        adv, ret = torch.zeros_like(values), torch.zeros_like(values)
        for row in range(values.shape[0]):
            flags = model[row].bool().tolist()
            a, r = gae(token_rewards[row].tolist(), values[row].tolist(), flags, c.gamma, c.lam)
            adv[row], ret[row] = torch.tensor(a), torch.tensor(r)
        self._metrics[mode]["ppo/value_mean"].append(self._masked_mean(values, model))
        self._metrics[mode]["ppo/return_mean"].append(self._masked_mean(ret, model))
        if c.whiten_advantages:
            sums = torch.tensor([(adv * model).sum(), (adv * adv * model).sum(), model.sum()], device=ids.device)
            adv = masked_whiten(adv, model, tuple(self.accelerator.reduce(sums, reduction="sum").tolist()))
        out["ppo_returns"], out["ppo_values"] = ret, values
        return adv

    def _masked_mean(self, x: torch.Tensor, mask: torch.Tensor) -> float:
        """The mean of ``x`` over the masked entries of every process."""
        sums = self.accelerator.reduce(torch.stack([(x * mask).sum(), mask.sum()]).float(), reduction="sum")
        return float(sums[0] / sums[1].clamp(min=1.0))

    # ---- the loss -----------------------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        beta = self.beta
        if self.ppo.kl_in_reward:
            self.beta = 0.0  # the KL is in the rewards
        try:
            with self._hidden_states() as hidden:
                loss = super()._compute_loss(model, inputs)
        finally:
            self.beta = beta
        ids, attn, mask = self._sequences(inputs)
        values = self._critic_values(hidden, ids, attn, inputs["completion_ids"].shape[1]).float()
        vloss, clipfrac = clipped_value_loss(
            values, inputs["ppo_values"], inputs["ppo_returns"], mask, self.ppo.cliprange_value
        )
        mode = "train" if self.model.training else "eval"
        scale = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        self._metrics[mode]["ppo/value_loss"].append(float(vloss.detach()))
        self._metrics[mode]["ppo/value_clipfrac"].append(float(clipfrac))
        return loss + self.ppo.vf_coef * vloss / scale

    # ---- optimisation and checkpoints ---------------------------------------------------------------------
    def _critic_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.critic.parameters() if p.requires_grad]

    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        lr = self.ppo.value_learning_rate or self.args.learning_rate
        optimizer.add_param_group({"params": self._critic_parameters(), "lr": lr, "weight_decay": 0.0})
        return optimizer

    def _clip_grad_norm(self, model):
        norm = self.accelerator.clip_grad_norm_(self._critic_parameters(), self.args.max_grad_norm)
        self._metrics["train"]["ppo/value_grad_norm"].append(float(norm))
        return super()._clip_grad_norm(model)

    CRITIC_FILE = "critic.safetensors"

    def _save_checkpoint(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        where = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
        if self.accelerator.is_main_process and where.is_dir():
            st.save_model(self.accelerator.unwrap_model(self.critic), str(where / self.CRITIC_FILE))

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = Path(resume_from_checkpoint) / self.CRITIC_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: a PPO checkpoint without its critic cannot resume")
        st.load_model(self.accelerator.unwrap_model(self.critic), str(path), device=str(self.accelerator.device))
