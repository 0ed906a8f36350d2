"""AgentGRPOTrainer on the tiny model with scripted rollouts: the batch TRL trains on holds the rollout's own
ids, tool tokens masked, per-token advantages by turn; outcome GRPO's loss equals TRL's own on the same
rollouts; a training step moves the weights; the teacher refresh copies the policy."""

import os

import pytest
import torch

from agentkit.agent import AgentConfig
from agentkit.engines.base import SamplingParams
from agentkit.errors import AgentkitError
from agentkit.models import load_model
from agentkit.testing.scripted import ScriptedEngine
from agentkit.tools.base import ToolResult

os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
trl = pytest.importorskip("trl")

Q1, Q2 = "Where was Vel Oskar born?", "Who founded Zentrix?"
SCRIPT = {
    Q1: [  # one search then the right answer / no search, a wrong answer
        ["<search>Vel Oskar</search>", "<answer>Drenholt</answer>"],
        ["<answer>Kaldoria</answer>"],
    ],
    Q2: [
        ["<search>Zentrix</search>", "<answer>Vel Oskar</answer>"],
        ["<search>Zentrix</search>", "<answer>x</answer>"],
    ],
}


class Search:
    name = "search"
    description = "search the documents"
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def __call__(self, query: str) -> ToolResult:
        return ToolResult(f"[1] {query}: a document about {query}.")

    def close(self):
        pass


def _trainer(tmp_path, estimator="grpo", shaper=None, steps=1, engine="scripted", tasks=None, ours=None, **extra):
    from trl import GRPOConfig

    from agentkit.rl.trainer import AgentGRPOTrainer, agent_dataset

    model, tok = load_model("tiny-random")
    agent = AgentConfig(
        max_turns=3, max_total_tokens=512, sampling=SamplingParams(max_tokens=64, temperature=1.0, seed=0, entropy=True)
    )
    tools = {"search": Search()}
    tasks = tasks or [
        {"id": "q1", "question": Q1, "answer": "Drenholt"},
        {"id": "q2", "question": Q2, "answers": ["Vel Oskar"]},
    ]
    data = agent_dataset(tasks, tools, agent)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        num_generations=4,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        max_steps=steps,
        learning_rate=1e-2,
        max_completion_length=512,
        report_to=[],
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        **extra,
    )
    return AgentGRPOTrainer(
        model,
        args,
        data,
        processing_class=tok,
        tools=tools,
        agent=agent,
        engine=ScriptedEngine(SCRIPT) if engine == "scripted" else engine,
        estimator=estimator,
        shaper=shaper,
        **(ours or {}),
    )


def _batch(trainer):
    rows = [trainer.train_dataset[i] for i in (0, 0, 0, 0, 1, 1, 1, 1)]
    trainer.model.train()
    return rows, trainer._generate_and_score_completions(rows)


def test_batch_holds_rollout_ids_masks_and_turn_advantages(tmp_path):
    trainer = _trainer(tmp_path)
    rows, out = _batch(trainer)
    trajs = trainer._trajs
    assert {t.answer for t in trajs[:4]} == {"Drenholt", "Kaldoria"}  # the group got different trajectories
    for i, t in enumerate(trajs):
        n = len(t.completion_ids)
        assert out["completion_ids"][i, :n].tolist() == t.completion_ids  # the rollout's ids, not re-tokenised
        assert out["tool_mask"][i, :n].tolist() == t.mask
        assert out["prompt_ids"][i, -len(t.prompt_ids) :].tolist() == t.prompt_ids
    adv = out["advantages"]
    assert adv.shape == out["completion_ids"].shape
    for i, t in enumerate(trajs):
        model_tokens = adv[i][torch.tensor(t.mask + [0] * (adv.shape[1] - len(t.mask))).bool()]
        right = t.answer in ("Drenholt", "Vel Oskar")
        assert (model_tokens > 0).all() if right else (model_tokens < 0).all()
        tool = torch.tensor([1 - m for m in t.mask]).bool()
        assert (adv[i, : len(t.mask)][tool] == 0).all()  # tool tokens carry no advantage (and are masked)
    assert trainer._metrics["train"]["outcome/em"][-1] == pytest.approx(
        sum(t.answer in ("Drenholt", "Vel Oskar") for t in trajs) / 8
    )


def test_rollouts_by_the_policy_itself_keep_it_training(tmp_path):
    """Without an engine the policy samples through an HFEngine on its own weights; building that engine must
    not leave the policy in eval mode for the loss."""
    trainer = _trainer(tmp_path, engine=None)
    _, out = _batch(trainer)
    assert trainer._engine.model is trainer.model and trainer.model.training
    assert len(trainer._metrics["train"]["rollout/seconds"]) == 1 and not trainer._metrics["eval"]
    assert out["advantages"].shape == out["completion_ids"].shape


def test_outcome_grpo_loss_equals_trl_on_the_same_rollouts(tmp_path):
    """TRL's own GRPOTrainer given the same trajectories (rollout_func + env_mask) and rewards computes the same
    loss as AgentGRPOTrainer with the grpo estimator."""
    from trl import GRPOConfig, GRPOTrainer

    from agentkit.rl.trainer import replay

    ours = _trainer(tmp_path / "a")
    rows, out = _batch(ours)
    trajs, scores = ours._trajs, [s["score"] for s in ours._scores]

    def reward(completions, **_):
        return scores

    model, tok = load_model("tiny-random")
    model.load_state_dict(ours.model.state_dict())
    args = GRPOConfig(
        output_dir=str(tmp_path / "b"),
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=512,
        report_to=[],
        use_cpu=True,
        bf16=False,
    )
    theirs = GRPOTrainer(
        model,
        reward_funcs=[reward],
        args=args,
        train_dataset=ours.train_dataset,
        processing_class=tok,
        rollout_func=replay(trajs),
    )
    theirs.model.train()
    ref = theirs._generate_and_score_completions(rows)
    assert torch.allclose(
        ref["advantages"][:, None].expand_as(out["advantages"]) * out["tool_mask"] * out["completion_mask"],
        out["advantages"] * out["tool_mask"] * out["completion_mask"],
        atol=1e-6,
    )
    ours.current_gradient_accumulation_steps = theirs.current_gradient_accumulation_steps = 1  # set by train()
    loss_ours = ours.compute_loss(ours.model, out)
    loss_theirs = theirs.compute_loss(theirs.model, ref)
    assert loss_ours.item() == pytest.approx(loss_theirs.item(), abs=1e-6)
    assert loss_ours.item() != 0


def test_training_steps_move_the_weights_and_log(tmp_path):
    trainer = _trainer(tmp_path, estimator="dr_grpo", steps=2, loss_type="dr_grpo")
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert trainer._engine.loads == 2  # the rollout engine got the policy's weights once per step
    logged = [h for h in trainer.state.log_history if "outcome/em" in h]
    assert len(logged) == 2 and all("grad_norm" in h and "rollout/tokens_per_second" in h for h in logged)


def test_bad_configuration(tmp_path):
    with pytest.raises(AgentkitError, match="unknown advantage estimator 'gpro'"):
        _trainer(tmp_path, estimator="gpro")
    with pytest.raises(ValueError, match="mask_truncated_completions"):
        _trainer(tmp_path, mask_truncated_completions=True)
    from agentkit.rl.trainer import agent_dataset

    with pytest.raises(AgentkitError, match="task 'q9' has no gold answer"):
        agent_dataset([{"id": "q9", "question": "?", "answer": ""}], [Search()], AgentConfig())


def test_snapshot_of_a_trainer_patched_policy_is_frozen():
    """TRL patches the policy's forward on the instance (a closure over the original module): the snapshot must
    run its own copied weights, not the live policy's."""
    from trl.trainer.utils import add_fused_lm_head

    from agentkit.rl.trainer import snapshot

    model, _ = load_model("tiny-random")
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    frozen = snapshot(model)
    ids = torch.tensor([[5, 6, 7, 8]])
    before = frozen(input_ids=ids).logits
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
    assert torch.equal(frozen(input_ids=ids).logits, before)
    assert not torch.equal(model(input_ids=ids).logits, before)


def test_teacher_refresh_copies_the_policy():
    from agentkit.engines.hf import HFEngine
    from agentkit.rl.trainer import refresh_teacher

    model, tok = load_model("tiny-random")
    teacher = HFEngine(model, tok)
    before = teacher.model
    refresh_teacher(teacher, model)
    assert teacher.model is not model and teacher.model is not before  # a frozen copy, not the training policy
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(teacher.model.parameters()))
    assert not any(p.requires_grad for p in teacher.model.parameters())


def test_lagged_teacher_is_saved_with_checkpoints_and_restored(tmp_path):
    from types import SimpleNamespace

    from agentkit.engines.hf import HFEngine
    from agentkit.rl.trainer import TeacherRefresh, snapshot

    model, tok = load_model("tiny-random")
    cb = TeacherRefresh(HFEngine(snapshot(model), tok), every=2)
    args = SimpleNamespace(output_dir=str(tmp_path))
    state = SimpleNamespace(global_step=4, is_world_process_zero=True)
    (tmp_path / "checkpoint-4").mkdir()
    cb.on_step_end(args, state, None, model=model)  # step 4: refreshed from the policy
    assert cb.refreshed_at == [4]
    cb.on_save(args, state, None)
    saved = {k: v.clone() for k, v in cb.teacher.model.state_dict().items()}
    with torch.no_grad():
        for p in cb.teacher.model.parameters():
            p.add_(1.0)
    assert cb.restore(tmp_path / "checkpoint-4")
    assert all(torch.equal(saved[k], v) for k, v in cb.teacher.model.state_dict().items())
    assert not cb.restore(tmp_path / "checkpoint-9")  # no teacher there: left as it is


def test_length_buckets_give_trl_s_log_probs_and_gradients(tmp_path):
    """The loss's forward pass per length group (the default) gives the log-probabilities, entropies and gradients
    of TRL's one padded batch (rotary positions shifted by the trimmed padding: equal up to rounding)."""
    from trl import GRPOTrainer

    ours = _trainer(tmp_path)
    _, out = _batch(ours)
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    mask = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    keep = out["completion_ids"].shape[1]
    lengths = out["completion_mask"].sum(1)
    assert lengths.min() < keep // 2  # the batch has short and long rows: several groups, trimmed
    weights = torch.randn(ids.shape[0], keep, generator=torch.Generator().manual_seed(0)) * out["completion_mask"]

    def run(fn):
        ours.model.zero_grad()
        logps, ent, _ = fn(ours.model, ids, mask, keep, compute_entropy=True)
        (logps * weights).sum().backward()
        return logps.detach(), ent.detach(), [p.grad.clone() for p in ours.model.parameters()]

    calls = []
    real = GRPOTrainer._get_per_token_logps_and_entropies

    def counted(self, model, input_ids, *args, **kwargs):
        calls.append(tuple(input_ids.shape))
        return real(self, model, input_ids, *args, **kwargs)

    GRPOTrainer._get_per_token_logps_and_entropies = counted
    try:
        ours.length_buckets = True
        a = run(ours._get_per_token_logps_and_entropies)
    finally:
        GRPOTrainer._get_per_token_logps_and_entropies = real
    b = run(lambda *x, **k: real(ours, *x, **k))
    assert len(calls) > 1 and sum(r * c for r, c in calls) < ids.numel()  # fewer padded tokens than one batch
    m = out["completion_mask"].bool()
    assert torch.allclose(a[0][m], b[0][m], atol=1e-5) and torch.allclose(a[1][m], b[1][m], atol=1e-5)
    assert (a[0][~m] == 0).all()
    for ga, gb in zip(a[2], b[2]):
        assert torch.allclose(ga, gb, atol=1e-5, rtol=1e-4)


def test_rollout_ahead_samples_the_next_step_while_this_one_trains(tmp_path):
    """rollout_ahead on a real HFEngine: step k+1's trajectories are sampled (in the background thread, by a
    frozen copy of step k's weights) before step k's optimizer step ends; their batch carries the sampler's
    log-probabilities as the loss's old ones; the first step, sampled in line, does not."""
    import threading
    import time

    from transformers import TrainerCallback

    tasks = [{"id": f"q{i}", "question": (Q1, Q2)[i % 2], "answer": "Drenholt"} for i in range(6)]
    trainer = _trainer(tmp_path, steps=3, engine=None, tasks=tasks, ours={"rollout_ahead": True})
    events, batches = [], []
    sample, generate = trainer._sample, trainer._generate_and_score_completions

    def timed_sample(engine, rows, prompts, step):
        start = time.perf_counter()
        assert engine.model is not trainer.model  # a frozen copy: the optimizer does not change it under us
        out = sample(engine, rows, prompts, step)
        events.append(("sample", step, start, threading.current_thread().name))
        return out

    def recorded(inputs):
        out = generate(inputs)
        batches.append((out, list(trainer._trajs)))
        return out

    class Steps(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            events.append(("end", state.global_step, time.perf_counter(), None))

    trainer._sample, trainer._generate_and_score_completions = timed_sample, recorded
    trainer.add_callback(Steps())
    trainer.train()
    trainer.close()
    samples = {e[1]: e for e in events if e[0] == "sample"}
    ends = {e[1]: e[2] for e in events if e[0] == "end"}
    assert sorted(samples) == [0, 1, 2] and sorted(ends) == [1, 2, 3]
    assert samples[0][3] == threading.current_thread().name  # the first step samples in line
    for step in (1, 2):  # the others in the background, started before the previous step's update ended
        assert samples[step][3].startswith("agentkit-rollout-ahead") and samples[step][2] < ends[step]
    assert "old_per_token_logps" not in batches[0][0]
    for out, trajs in batches[1:]:
        expected = torch.zeros_like(out["old_per_token_logps"])  # the sampler's logprob on each model token
        for row, t in enumerate(trajs):
            pos = 0
            for seg in t.segments:
                if seg.kind == "model":
                    expected[row, pos : pos + len(seg.token_ids)] = torch.tensor(seg.logprobs)
                pos += len(seg.token_ids)
        assert torch.equal(out["old_per_token_logps"], expected)
        model_tokens = (out["completion_mask"] * out["tool_mask"]).bool()
        assert (expected[model_tokens] < 0).all() and (expected[~model_tokens] == 0).all()
    logged = [h for h in trainer.state.log_history if "rollout/wait_seconds" in h]
    assert len(logged) == 2


def test_rollout_ahead_conditions(tmp_path):
    with pytest.raises(AgentkitError, match="temperature 1"):
        _trainer(tmp_path, ours={"rollout_ahead": True}, temperature=0.7)
    with pytest.raises(AgentkitError, match="trained on once"):
        _trainer(tmp_path, ours={"rollout_ahead": True}, num_iterations=2)


def test_compact_fused_head_projects_only_labelled_positions():
    """On a CPU TRL's fused head projects every position; inside ``compact_fused_head`` only the labelled ones,
    with the same log-probabilities."""
    import trl.trainer.utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    from agentkit.rl.buckets import compact_fused_head

    model, _ = load_model("tiny-random")
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(5, 200, (2, 12), generator=torch.Generator().manual_seed(0))
    labels = ids.clone()
    labels[:, :8] = -100  # after the shift by one: positions 7–10 of 11 labelled, 4 per row
    seen, real = [], trl_utils._ChunkedLogProbFunction.apply

    def counted(hidden, *args):
        seen.append(hidden.shape[0])
        return real(hidden, *args)

    trl_utils._ChunkedLogProbFunction.apply = counted
    try:
        full = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs
        with compact_fused_head():
            compact = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs
    finally:
        trl_utils._ChunkedLogProbFunction.apply = real
    assert seen == [2 * 11, 2 * 4]  # every shifted position, then the labelled ones only
    assert torch.allclose(full, compact, atol=1e-6)
    assert trl_utils._use_triton(torch.device("cpu")) is False  # switched back
