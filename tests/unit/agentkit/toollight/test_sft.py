"""agentkit.toollight.sft / sft_data: planned trajectories run the real tools, and tool-result tokens (and the prompt) are out of the loss, in the dataset and in the loss TRL's SFTTrainer computes."""

import pytest
import torch

from agentkit.data import arithmetic_suite
from agentkit.data.arithmetic import EASY_KINDS
from agentkit.data.multihop import MultiHopKB
from agentkit.toollight.sft import SFTSettings, to_sft_dataset
from agentkit.toollight.sft_data import make_trajectories, plan
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig
from agentkit.tools.search import SearchTool


@pytest.fixture(scope="module")
def trajs(tiny_engine):
    kb = MultiHopKB.build(0)
    corpus = kb.corpus()
    tools = {"python": PythonTool(SandboxConfig(pool_size=1)), "search": SearchTool(corpus, top_k=1)}
    tasks = arithmetic_suite(3, 5) + arithmetic_suite(1, 5, kinds=EASY_KINDS) + kb.questions(2, 5)
    try:
        yield tasks, make_trajectories(tasks, tiny_engine.tokenizer, tools, {d["id"]: d["title"] for d in corpus})
    finally:
        tools["python"].close()


def test_plans_call_the_right_tool_or_none(trajs):
    tasks, out = trajs
    assert [t.tool_calls for t in out] == [1, 1, 1, 0, len(tasks[4].meta["support"]), len(tasks[5].meta["support"])]
    for task, t in zip(tasks, out):
        assert t.answer == task.answer and t.segments[-1].text.startswith(f"<answer>{task.answer}</answer>")
        for seg in t.segments:
            assert seg.kind == "model" or (seg.ok and seg.text.startswith("\n<result>"))
    # the python result is the sandbox's real output: the answer itself
    assert out[0].segments[1].text == f"\n<result>\n{tasks[0].answer}\n</result>\n"
    assert plan(tasks[3]) == [(f"<answer>{tasks[3].answer}</answer>", None)]


def test_dataset_labels_mask_prompt_and_tool_tokens(trajs):
    _, out = trajs
    ds = to_sft_dataset(out)
    for t, row in zip(out, ds):
        n = len(t.prompt_ids)
        assert row["input_ids"] == t.prompt_ids + t.completion_ids
        assert row["labels"][:n] == [-100] * n
        pos = n
        for seg in t.segments:
            got = row["labels"][pos : pos + len(seg.token_ids)]
            assert got == (seg.token_ids if seg.kind == "model" else [-100] * len(seg.token_ids))
            pos += len(seg.token_ids)
    assert len(to_sft_dataset(out, max_length=10)) == 0  # too-long rows are dropped, never cut


def test_trl_loss_counts_only_model_tokens(trajs, tiny_engine, tmp_path):
    """The loss SFTTrainer computes on a real batch equals a cross-entropy computed independently over the model's
    own tokens alone (the trajectory's mask): prompt and tool-result tokens contribute nothing."""
    import copy

    from trl import SFTConfig, SFTTrainer

    _, out = trajs
    ds = to_sft_dataset(out[:3]).remove_columns(["task_id"])
    model = copy.deepcopy(tiny_engine.model)  # the trainer may change what it is given; the fixture is shared
    args = SFTConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=3,
        report_to=[],
        use_cpu=True,
        max_length=SFTSettings().max_length,
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=ds, processing_class=copy.deepcopy(tiny_engine.tokenizer)
    )
    batch = next(iter(trainer.get_train_dataloader()))
    with torch.no_grad():
        trl_loss = trainer.compute_loss(model, batch).item()
        total, count = 0.0, 0
        for t in out[:3]:
            ids = torch.tensor([t.prompt_ids + t.completion_ids])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
            keep = [0] * len(t.prompt_ids) + t.mask
            for i in range(1, ids.shape[1]):
                if keep[i]:
                    total -= logp[i - 1, ids[0, i]].item()
                    count += 1
    assert trl_loss == pytest.approx(total / count, rel=1e-4)
    assert count == sum(sum(t.mask) for t in out[:3]) < sum(len(t.completion_ids) for t in out[:3])


def test_train_sft_leaves_a_plain_model_that_copies_safely(trajs, tiny_engine, tmp_path):
    """After SFT the model has its class forward back (TRL patches the instance), so a deepcopy (DPO's reference)
    computes with its own weights."""
    import copy

    from agentkit.toollight.sft import SFTSettings, train_sft

    _, out = trajs
    model = copy.deepcopy(tiny_engine.model)
    _, trained = train_sft(
        model,
        copy.deepcopy(tiny_engine.tokenizer),
        to_sft_dataset(out[:2]),
        SFTSettings(epochs=1, batch_size=2),
        tmp_path,
        progress=False,
    )
    assert "forward" not in trained.__dict__ and trained.config.use_cache
    twin = copy.deepcopy(trained)
    with torch.no_grad():
        twin.lm_head.weight.mul_(2.0)
        ids = torch.tensor([[1, 2, 3]])
        assert not torch.allclose(twin(input_ids=ids).logits, trained(input_ids=ids).logits)


def test_json_chat_style_is_the_rollout_format(tiny_engine):
    """With the rollout's json/chat format the planned calls are hermes calls, the results the template's tool
    messages, the answer plain text: the same ids as the template's rendering of that conversation."""
    from agentkit.agent import AgentConfig
    from agentkit.engines.base import encode_prompt

    kb = MultiHopKB.build(0)
    corpus = kb.corpus()
    tool = SearchTool(corpus, top_k=1)
    (task,) = kb.questions(1, 5)
    cfg = AgentConfig(style="json", tool_turns="chat")
    (t,) = make_trajectories(
        [task], tiny_engine.tokenizer, {"search": tool}, {d["id"]: d["title"] for d in corpus}, cfg
    )
    hops = len(task.meta["support"])
    assert t.tool_calls == hops and t.segments[-1].text == task.answer + tiny_engine.tokenizer.eos_token
    assert t.segments[0].text.startswith('<tool_call>{"name": "search", "arguments": {"query": ')
    chat = list(t.prompt)
    for call, result in zip(t.segments[0:-1:2], t.segments[1::2]):
        assert call.text.endswith(tiny_engine.tokenizer.eos_token)  # the model ends its turn after the call
        chat += [
            {"role": "assistant", "content": call.text.removesuffix(tiny_engine.tokenizer.eos_token)},
            {"role": "tool", "name": "search", "content": ""},
        ]
        chat[-1]["content"] = tool(**result.arguments).output
    n = len(t.prompt_ids + t.completion_ids) - len(t.segments[-1].token_ids)
    assert (t.prompt_ids + t.completion_ids)[:n] == encode_prompt(tiny_engine.tokenizer, chat)


def test_labelled_logits_loss_equals_the_full_forward_loss():
    """Logits only where the next token is labelled: the same loss and gradients as HF's labels= loss over the full
    [B, T, V] logits, with padding and answers at different positions per row."""
    import torch

    from agentkit.models.tiny import build_tiny_model
    from agentkit.toollight.sft import labelled_logits_trainer

    torch.manual_seed(0)
    model = build_tiny_model(64)
    ids = torch.randint(0, 60, (3, 12))
    mask = torch.ones_like(ids)
    mask[2, 9:] = 0  # right padding
    labels = torch.full_like(ids, -100)
    labels[0, 10:] = ids[0, 10:]
    labels[1, 4:7] = ids[1, 4:7]
    labels[2, 7:9] = ids[2, 7:9]
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    ours = labelled_logits_trainer().compute_loss(None, model, inputs)
    ours.backward()
    g_ours = model.lm_head.weight.grad.clone()
    model.zero_grad()
    full = model(**inputs).loss  # mean over the labelled tokens
    full.backward()
    assert ours.item() == pytest.approx(full.item(), rel=1e-6)
    assert torch.allclose(g_ours, model.lm_head.weight.grad, atol=1e-6)
    n = 2 + 3 + 2  # labelled tokens; with num_items_in_batch the sum is divided by it (gradient accumulation)
    summed = labelled_logits_trainer().compute_loss(None, model, inputs, num_items_in_batch=torch.tensor(2 * n))
    assert summed.item() == pytest.approx(full.item() / 2, rel=1e-6)
