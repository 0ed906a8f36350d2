"""AgentPPOTrainer on the tiny model with scripted rollouts: GAE's value targets over model tokens only (with a
zero critic and λ = 1 every model token's target is the trajectory's return), the critic's gradients (a head
moves the policy's backbone too; a separate critic does not), a training step, the critic saved with each
checkpoint and restored on resume, TIPS' shaped turn rewards reaching the token rewards."""

import os

import pytest
import torch

from agentkit.agent import AgentConfig
from agentkit.engines.base import SamplingParams
from agentkit.models import load_model
from agentkit.testing.scripted import ScriptedEngine

from .test_trainer import SCRIPT, Search

os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
trl = pytest.importorskip("trl")

RIGHT = ("Drenholt", "Vel Oskar")


def _trainer(tmp_path, steps=1, shaper=None, save="no", **ppo):
    from trl import GRPOConfig

    from agentkit.rl.ppo import AgentPPOTrainer, PPOSettings
    from agentkit.rl.trainer import agent_dataset

    model, tok = load_model("tiny-random")
    agent = AgentConfig(max_turns=3, max_total_tokens=512, sampling=SamplingParams(max_tokens=64, seed=0))
    tools = {"search": Search()}
    tasks = [{"id": "q1", "question": "Where was Vel Oskar born?", "answer": "Drenholt"}]
    tasks.append({"id": "q2", "question": "Who founded Zentrix?", "answers": ["Vel Oskar"]})
    args = GRPOConfig(
        output_dir=str(tmp_path),
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=steps,
        learning_rate=1e-2,
        max_completion_length=512,
        report_to=[],
        use_cpu=True,
        logging_steps=1,
        save_strategy="steps" if save == "steps" else "no",
        save_steps=1,
        disable_tqdm=True,
    )
    return AgentPPOTrainer(
        model,
        args,
        agent_dataset(tasks, tools, agent),
        processing_class=tok,
        tools=tools,
        agent=agent,
        engine=ScriptedEngine(SCRIPT),
        shaper=shaper,
        ppo=PPOSettings(**ppo),
    )


def _batch(trainer):
    rows = [trainer.train_dataset[i] for i in (0, 0, 0, 0, 1, 1, 1, 1)]
    trainer.model.train()
    return trainer._generate_and_score_completions(rows)


def _model_mask(t, width):
    return torch.tensor(t.mask + [0] * (width - len(t.mask))).bool()


def test_gae_targets_with_a_zero_critic_are_the_returns(tmp_path):
    trainer = _trainer(tmp_path, lam=1.0, whiten_advantages=False)
    out = _batch(trainer)
    width = out["completion_ids"].shape[1]
    assert (out["ppo_values"] == 0).all()  # a zero-initialised head
    for i, t in enumerate(trainer._trajs):
        model = _model_mask(t, width)
        score = 1.4 if t.answer in RIGHT else 0.4  # format 0.4 + EM
        assert torch.allclose(out["ppo_returns"][i][model], torch.tensor(score))
        assert torch.allclose(out["advantages"][i][model], torch.tensor(score))
        assert (out["ppo_returns"][i][~model] == 0).all() and (out["advantages"][i][~model] == 0).all()
    assert trainer._metrics["train"]["ppo/return_mean"][-1] > 0


def test_whitened_advantages_have_zero_mean_over_model_tokens(tmp_path):
    trainer = _trainer(tmp_path)
    out = _batch(trainer)
    model = out["completion_mask"] * out["tool_mask"]
    adv = out["advantages"][model.bool()]
    assert abs(float(adv.mean())) < 1e-5 and float(adv.std(unbiased=False)) == pytest.approx(1.0, abs=1e-4)
    assert (out["advantages"][~model.bool()] == 0).all()


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_value_loss_reaches_the_critic(tmp_path, critic):
    """The value loss trains the critic; through a head it also moves the policy's backbone, through a separate
    critic it leaves the policy's gradients as they are."""
    trainer = _trainer(tmp_path, critic=critic)
    out = _batch(trainer)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    head = trainer.critic.head if critic == "separate" else trainer.critic
    grads = []
    for coef in (0.0, 1.0):
        trainer.ppo.vf_coef = coef
        trainer.model.zero_grad()
        trainer.critic.zero_grad()
        trainer.compute_loss(trainer.model, out).backward()
        grads.append(trainer.model.model.layers[0].mlp.up_proj.weight.grad.clone())
        if coef:  # the values miss the returns: the head has a gradient
            assert head.linear.weight.grad.abs().sum() > 0
        with torch.no_grad():  # from now on the head reads the hidden state (a zero head passes no gradient)
            head.linear.weight.fill_(0.1)
    assert torch.equal(grads[0], grads[1]) == (critic == "separate")
    if critic == "separate":  # its own backbone, not the policy's
        assert {id(p) for p in trainer.critic.parameters()}.isdisjoint(id(p) for p in trainer.model.parameters())
    assert trainer._metrics["train"]["ppo/value_loss"][-1] > 0


def test_a_training_step_moves_policy_and_critic_and_checkpoints_the_critic(tmp_path):
    trainer = _trainer(tmp_path, steps=1, save="steps", critic="separate")
    before = [p.detach().clone() for p in trainer.critic.parameters()]
    policy_before = next(trainer.model.parameters()).detach().clone()
    trainer.train()
    assert any(not torch.equal(b, p) for b, p in zip(before, trainer.critic.parameters()))
    assert not torch.equal(policy_before, next(trainer.model.parameters()))
    log = trainer.state.log_history[0]
    assert "ppo/value_loss" in log and "ppo/value_grad_norm" in log and "outcome/em" in log
    ckpt = tmp_path / "checkpoint-1"
    assert (ckpt / "critic.safetensors").is_file()
    fresh = _trainer(tmp_path, steps=1, critic="separate")
    fresh._load_from_checkpoint(str(ckpt))
    for a, b in zip(fresh.critic.parameters(), trainer.critic.parameters()):
        assert torch.equal(a, b)


def test_shaped_turn_rewards_feed_gae(tmp_path):
    """TIPS-PPO: a shaper's per-turn rewards sit on each turn's last model token."""
    from agentkit.rl.advantages import TurnRewards

    class Shaper:  # fixed shaping: +0.5 on every tool turn, −0.5 on the last (it telescopes)
        def potentials(self, trajs, answers):
            return [[0.0] * max(1, t.tool_calls + 1) for t in trajs]

        def shape(self, pots, outcomes, step):
            return [TurnRewards(r, [0.5] * (len(p) - 1) + [-0.5 * (len(p) - 1)]) for p, r in zip(pots, outcomes)], {}

    trainer = _trainer(tmp_path, lam=0.0, gamma=1.0, whiten_advantages=False, shaper=Shaper())
    out = _batch(trainer)
    for i, t in enumerate(trainer._trajs):
        model = _model_mask(t, out["completion_ids"].shape[1])
        ret = out["ppo_returns"][i][model]
        ends = [j for j in range(len(t.mask)) if t.mask[j] and (j + 1 == len(t.mask) or not t.mask[j + 1])]
        score = 1.4 if t.answer in RIGHT else 0.4
        expect = [0.5] * t.tool_calls + [score - 0.5 * t.tool_calls]
        # λ = 0 and V = 0: each token's target is its own reward: the turn's reward on its last token, 0 before
        assert [float(out["ppo_returns"][i][j]) for j in ends] == pytest.approx(expect)
        assert float(ret.abs().sum()) == pytest.approx(sum(abs(x) for x in expect))
