"""agentkit.toollight.dpo: log-ratios leave tool tokens out; training widens the preference margin."""

import inspect

import pytest
import torch


def test_the_trl_internals_we_override_keep_their_shape():
    """MaskedDPOTrainer overrides two private DPOTrainer hooks and extends DataCollatorForPreference; a TRL that
    renames them, changes their parameters or stops producing ``completion_mask`` fails here, not mid-training
    (then check the override and raise the bound in pyproject.toml)."""
    from trl import DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    assert list(inspect.signature(DPOTrainer._prepare_dataset).parameters) == [
        "self",
        "dataset",
        "processing_class",
        "args",
        "dataset_name",
    ]
    assert list(inspect.signature(DPOTrainer._set_signature_columns_if_needed).parameters) == ["self"]
    collator = DataCollatorForPreference(pad_token_id=0, max_length=8, truncation_mode="keep_start")
    out = collator.torch_call([{"prompt_ids": [1, 2], "chosen_ids": [3], "rejected_ids": [4, 5]}])
    # chosen rows first, then rejected: the layout MaskedCollator writes its masks into
    assert out["input_ids"].tolist() == [[1, 2, 3, 0], [1, 2, 4, 5]]
    assert out["completion_mask"].tolist() == [[0, 0, 1, 0], [0, 0, 1, 1]]


def test_dpo_log_ratios_leave_out_tool_tokens(tiny_engine, tmp_path):
    """The loss MaskedDPOTrainer computes on a real batch equals −log σ(β(Δ_chosen − Δ_rejected)) with each Δ a
    sum over the model's own tokens only; counting the tool-result tokens would give another value."""
    import copy
    import math

    from trl import DPOConfig

    from agentkit.toollight.dpo import masked_dpo_trainer_cls, to_dpo_dataset
    from agentkit.toollight.pairs import Pair

    tok = tiny_engine.tokenizer
    chosen, rejected = _pair_trajs(tiny_engine)
    ds = to_dpo_dataset([Pair(chosen, rejected, "test", "hard")])
    ref = copy.deepcopy(tiny_engine.model)
    policy = copy.deepcopy(tiny_engine.model)
    with torch.no_grad():
        policy.lm_head.weight.mul_(1.7)  # a policy that differs from its reference
    args = DPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=1, beta=0.1, report_to=[], use_cpu=True, max_length=512
    )
    trainer = masked_dpo_trainer_cls()(model=policy, ref_model=ref, args=args, train_dataset=ds, processing_class=tok)
    batch = next(iter(trainer.get_train_dataloader()))
    with torch.no_grad():
        got = trainer.compute_loss(policy, batch).item()

        def logp(model, t, masked=True):
            ids = torch.tensor([t.prompt_ids + t.completion_ids])
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
            keep = [0] * len(t.prompt_ids) + (t.mask if masked else [1] * len(t.completion_ids))
            return sum(lp[i - 1, ids[0, i]].item() for i in range(1, ids.shape[1]) if keep[i])

        def loss(masked):
            margin = (
                logp(policy, chosen, masked)
                - logp(ref, chosen, masked)
                - logp(policy, rejected, masked)
                + logp(ref, rejected, masked)
            )
            return -math.log(1 / (1 + math.exp(-0.1 * margin)))

    assert got == pytest.approx(loss(True), rel=1e-4)
    assert abs(loss(True) - loss(False)) > 1e-3  # the check can tell the two apart


def _pair_trajs(engine):
    from agentkit.agent.trajectory import Segment, Trajectory

    tok = engine.tokenizer
    prompt = [{"role": "user", "content": "What is 17 * 23?"}]
    pids = engine.encode(prompt)

    def traj(parts):
        t = Trajectory("q", prompt, pids)
        for kind, text in parts:
            t.segments.append(Segment(kind, text, tok(text, add_special_tokens=False).input_ids))
        return t

    chosen = traj(
        [
            ("model", "<python>print(17*23)</python>"),
            ("tool", "\n<result>\n391\n</result>\n"),
            ("model", "<answer>391</answer>"),
        ]
    )
    return chosen, traj([("model", "<answer>381</answer>")])


@pytest.mark.parametrize("lora_r", [0, 4])
def test_train_dpo_widens_the_margin(tiny_engine, tmp_path, lora_r):
    """A few DPO steps raise log π(chosen) − log π(rejected) (model tokens only); LoRA adapters come back merged."""
    import copy

    from agentkit.toollight.dpo import DPOSettings, to_dpo_dataset, train_dpo
    from agentkit.toollight.pairs import Pair

    chosen, rejected = _pair_trajs(tiny_engine)
    model = copy.deepcopy(tiny_engine.model)

    def margin(m):
        def logp(t):
            ids = torch.tensor([t.prompt_ids + t.completion_ids])
            with torch.no_grad():
                lp = torch.log_softmax(m(input_ids=ids).logits[0, :-1].float(), -1)
            keep = [0] * len(t.prompt_ids) + t.mask
            return sum(lp[i - 1, ids[0, i]].item() for i in range(1, ids.shape[1]) if keep[i])

        return logp(chosen) - logp(rejected)

    before = margin(model)
    base = copy.deepcopy(model)
    ds = to_dpo_dataset([Pair(chosen, rejected, "test", "hard")] * 4)
    history, trained = train_dpo(
        model,
        copy.deepcopy(tiny_engine.tokenizer),
        ds,
        DPOSettings(epochs=3, learning_rate=5e-3, batch_size=2, lora_r=lora_r),
        tmp_path / "trainer",
        progress=False,
        adapter_dir=tmp_path / "adapter",
    )
    assert margin(trained) > before + 0.5
    assert any("loss" in h for h in history)
    assert "forward" not in trained.__dict__ and not any("lora" in n for n, _ in trained.named_parameters())
    assert (tmp_path / "adapter" / "adapter_config.json").is_file() == bool(lora_r)
    if lora_r:  # the saved adapter served per request on the model the round started from = the merged model
        from agentkit.engines import SamplingParams
        from agentkit.engines.hf import HFEngine

        served = HFEngine(base, tiny_engine.tokenizer, prefix_cache_mb=0)
        served.load_adapter("round", str(tmp_path / "adapter"))
        merged = HFEngine(trained.eval(), tiny_engine.tokenizer, prefix_cache_mb=0)
        p = SamplingParams(max_tokens=12, temperature=0)
        (a,) = served.generate([chosen.prompt_ids], SamplingParams(max_tokens=12, temperature=0, adapter="round"))
        (b,) = merged.generate([chosen.prompt_ids], p)
        assert a[0].token_ids == b[0].token_ids and a[0].logprobs == pytest.approx(b[0].logprobs, abs=1e-3)


def test_pairs_save_as_trl_conversational_and_load_back(tiny_engine, tmp_path):
    """Our pairs keep their exact ids and masks through save/load; text-only TRL pairs get the same ids and tool
    masks by tokenising each <result> span apart, the way the loop records it."""
    import datasets

    from agentkit.data.tasks import write_jsonl
    from agentkit.errors import AgentkitError
    from agentkit.toollight.dpo import load_pairs, to_dpo_dataset
    from agentkit.toollight.pairs import Pair

    chosen, rejected = _pair_trajs(tiny_engine)
    ds = to_dpo_dataset([Pair(chosen, rejected, "test", "hard")])
    ds.save_to_disk(str(tmp_path / "pairs"))
    back = load_pairs(tmp_path / "pairs", tiny_engine.tokenizer)
    assert back[0]["chosen"] == [{"role": "assistant", "content": chosen.text}]
    assert back[0]["prompt"] == chosen.prompt and back[0]["chosen_mask"] == chosen.mask
    text_only = ds.remove_columns(["prompt_ids", "chosen_ids", "rejected_ids", "chosen_mask", "rejected_mask"])
    write_jsonl(tmp_path / "pairs.jsonl", list(text_only))
    tok = load_pairs(tmp_path / "pairs.jsonl", tiny_engine.tokenizer)[0]
    assert tok["prompt_ids"] == chosen.prompt_ids
    assert tok["chosen_ids"] == chosen.completion_ids and tok["chosen_mask"] == chosen.mask
    assert tok["rejected_ids"] == rejected.completion_ids and 0 in tok["chosen_mask"]
    write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "x", "chosen": "y"}])
    with pytest.raises(AgentkitError, match="bad.jsonl:1: missing field"):
        load_pairs(tmp_path / "bad.jsonl", tiny_engine.tokenizer)
    assert isinstance(datasets.load_from_disk(str(tmp_path / "pairs")), datasets.Dataset)
