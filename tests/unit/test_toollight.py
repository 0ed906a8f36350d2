"""Tool-Light SFT stage: the planned trajectories run the real tools, and tool-result tokens (and the prompt)
are out of the loss, in the dataset and in the loss TRL's SFTTrainer actually computes."""

import json

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
            got = row["labels"][pos:pos + len(seg.token_ids)]
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
    args = SFTConfig(output_dir=str(tmp_path), per_device_train_batch_size=3, report_to=[], use_cpu=True,
                     max_length=SFTSettings().max_length)
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds,
                         processing_class=copy.deepcopy(tiny_engine.tokenizer))
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


def test_toollight_recipe_tiny_and_resume(tmp_path):
    """The whole loop on the tiny model: base, SFT, a pre-aligned and a self-evolved round, each evaluated, each
    stage's model saved; a resumed run recomputes nothing and reports the same figures."""
    import datasets

    from agentkit.runner import run_recipe

    metrics, run_dir = run_recipe("toollight", [], output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    for stage in ("base", "sft", "dpo-1", "dpo-2"):
        for suite in ("arithmetic", "multihop"):
            assert 0 <= metrics[f"{stage}/{suite}/accuracy"] <= 1
    for stage in ("sft", "dpo-1", "dpo-2"):
        assert (run_dir / "models" / stage / "config.json").exists()
    for stage in ("dpo-1", "dpo-2"):
        samples = datasets.load_from_disk(str(run_dir / "rounds" / stage / "samples"))
        assert len(samples) > 0 and {"prompt_ids", "completion_ids", "mask"} <= set(samples.column_names)
        summary = json.loads((run_dir / "rounds" / stage / "summary.json").read_text())
        if summary["pairs"]:
            pairs = datasets.load_from_disk(str(run_dir / "rounds" / stage / "pairs"))
            assert {"prompt", "chosen", "rejected"} <= set(pairs.column_names)
    sources = json.loads((run_dir / "rounds" / "sources.json").read_text())
    assert len(sources["no_tool_correct_rate"]) == 3 + 1 + 2  # every pool question was mined
    logged = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("dpo-1/pairs" in m for m in logged)
    report = (run_dir / "report.md").read_text()
    assert "| dpo-2 | multihop |" in report
    again, _ = run_recipe("toollight", [], output_dir=str(run_dir), preset="tiny", resume=True, quiet=True)
    # resumed from the recorded stages and evaluations: the same figures (NaN: efficiency without calls)
    assert again.keys() == metrics.keys()
    assert all(again[k] == metrics[k] or (again[k] != again[k] and metrics[k] != metrics[k]) for k in metrics)


def test_toollight_recipe_trains_on_given_pairs(tmp_path):
    """Users' TRL-style pairs replace the first round's sampling; the round trains and saves a changed model."""
    import datasets
    from safetensors.torch import load_file

    from agentkit.runner import run_recipe
    from agentkit.testing.pairs import write_text_pairs

    write_text_pairs(tmp_path / "pairs.jsonl")
    _, run_dir = run_recipe("toollight", [f"pairs={tmp_path / 'pairs.jsonl'}", "self_evolved_rounds=0",
                                          "dpo.learning_rate=1e-3"],
                            output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    pairs = datasets.load_from_disk(str(run_dir / "rounds" / "dpo-1" / "pairs"))
    assert pairs.num_rows == 4 and 0 in pairs[0]["chosen_mask"]  # the <result> span is masked
    history = [json.loads(x) for x in (run_dir / "state" / "stages.jsonl").read_text().splitlines()]
    dpo = next(h["value"]["history"] for h in history if h["key"] == "dpo-1")
    assert any("loss" in h for h in dpo)
    before, after = (load_file(str(run_dir / "models" / s / "model.safetensors")) for s in ("sft", "dpo-1"))
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_toollight_recipe_on_user_questions(tmp_path):
    """Questions and a corpus from files: 20 % held out, no SFT without sft_data, both tools offered."""
    from agentkit.data import MultiHopKB
    from agentkit.data.tasks import write_jsonl
    from agentkit.runner import run_recipe

    kb = MultiHopKB.build(0)
    write_jsonl(tmp_path / "q.jsonl", [t.to_dict() for t in kb.questions(10, seed=3)])
    kb.write_corpus(tmp_path / "corpus.jsonl")
    metrics, run_dir = run_recipe("toollight", [f"questions={tmp_path / 'q.jsonl'}",
                                                f"corpus={tmp_path / 'corpus.jsonl'}", "self_evolved_rounds=0"],
                                  output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    assert {k.split("/")[0] for k in metrics} == {"base", "dpo-1"}  # no SFT stage
    assert {k.split("/")[1] for k in metrics} == {"questions"}
    assert len(json.loads((run_dir / "rounds" / "sources.json").read_text())["no_tool_correct_rate"]) == 8
    assert len((run_dir / "state" / "eval_base.jsonl").read_text().splitlines()) == 2


def _traj(parts):
    """A trajectory from (kind, entropies) parts; token ids are placeholders of the right length."""
    from agentkit.agent.trajectory import Segment, Trajectory

    segs = [Segment(kind, "", [0] * len(h), entropies=h if kind == "model" else None) for kind, h in parts]
    return Trajectory("t", [], [], segs)


def test_entropy_profile_and_chain_entropy_by_hand():
    from agentkit.toollight.entropy import boundary_profile, entropy_by_tool_calls, step_score, window_means

    a = _traj([("model", [1.0, 2.0, 3.0]), ("tool", [0, 0]), ("model", [5.0, 4.0])])
    b = _traj([("model", [1.0]), ("tool", [0]), ("model", [3.0, 2.0, 1.0]), ("tool", [0]), ("model", [7.0])])
    c = _traj([("model", [0.5, 0.5])])
    prof = boundary_profile([a, b, c], k=2)
    # before: position -2 has a's 2.0 and b's second turn 2.0; -1 has 3.0, 1.0 and 1.0
    assert prof["before"] == pytest.approx([2.0, 5 / 3]) and prof["before_count"] == [2, 3]
    # after: +1 has 5.0, 3.0, 7.0; +2 has 4.0, 2.0
    assert prof["after"] == pytest.approx([5.0, 3.0]) and prof["after_count"] == [3, 2]
    w = window_means(prof, (1, 2))
    assert w["before_1"] == pytest.approx(5 / 3) and w["after_2"] == pytest.approx((15 + 6) / 5)
    groups = entropy_by_tool_calls([a, b, c])
    assert groups[0]["mean"] == 0.5 and groups[1]["mean"] == pytest.approx(3.0) and groups[2]["n"] == 1
    assert step_score([]) == (float("-inf"), 0) and step_score([2.0, 0.0]) == (1.0, 2)


def test_toollight_analyze_recipe_tiny(tmp_path):
    from agentkit.errors import AgentkitError
    from agentkit.runner import run_recipe

    metrics, run_dir = run_recipe("toollight_analyze", [], output_dir=str(tmp_path / "a"), preset="tiny", quiet=True)
    assert metrics["arithmetic/trajectories"] == metrics["multihop/trajectories"] == 6  # 3 tasks x 2 samples
    assert (run_dir / "entropy.png").exists() and (run_dir / "trajectories").is_dir()
    with pytest.raises(AgentkitError, match="suites"):
        run_recipe("toollight_analyze", ["suites=[mathh]"], output_dir=str(tmp_path / "b"), preset="tiny", quiet=True)


def test_branches_continue_open_turns_and_reuse_the_prefix(tiny_engine):
    """Entropy-guided branching on the tiny model: branch points are steps after tool results, branches carry
    the prefix's tool calls, continue the cut turn, and come out identical with and without the prefix cache
    while encoding far fewer prompt tokens with it."""
    import copy

    from agentkit.agent import AgentConfig
    from agentkit.agent.trajectory import Segment, Trajectory
    from agentkit.engines import SamplingParams
    from agentkit.engines.hf import HFEngine
    from agentkit.toollight.sampling import branch_points, cut, entropy_guided_rollouts

    tok = tiny_engine.tokenizer
    cached = HFEngine(tiny_engine.model, tok, max_batch_size=8)
    naive = HFEngine(tiny_engine.model, tok, max_batch_size=8, prefix_cache_mb=0)
    cfg = AgentConfig(max_turns=3, max_tool_calls=3, max_tokens_per_turn=12, temperature=1.0, seed=1)

    def chain(i):
        prompt = [{"role": "user", "content": f"question number {i} with some padding words"}]
        t = Trajectory(f"q{i}", prompt, cached.encode(prompt), meta={"sample": 0, "turns": 2})
        for kind, text in (("model", "<python>print(1)</python>"), ("tool", "\n<result>\n1\n</result>\n"),
                           ("model", "so the answer follows here")):
            ids = tok(text, add_special_tokens=False).input_ids
            t.segments.append(Segment(kind, text, ids, entropies=[float(j % 7) for j in range(len(ids))]
                                      if kind == "model" else None))
        return t

    main = [chain(i) for i in range(3)]
    (seg, keep, score), = branch_points(main[0], top_b=3)
    assert seg == 2 and 0 < keep < len(main[0].segments[2].token_ids)
    c = cut(main[0], seg, keep, tok)
    assert c.tool_calls == 1 and c.meta["open_turn"] and c.meta["turns"] == 1 and c.finish == "running"
    # put the main chains' keys/values in the cache, as sampling them would have
    cached.generate([m.prompt_ids + m.completion_ids for m in main], SamplingParams(max_tokens=1, temperature=0))
    python = PythonTool(SandboxConfig(pool_size=1))
    try:
        got = {}
        for name, eng in (("naive", naive), ("cached", cached)):
            before = eng.prefill_tokens
            _, br = entropy_guided_rollouts(eng, [], [python], cfg, top_b=1, branches=2, main=copy.deepcopy(main))
            got[name] = ([b.completion_ids for b in br], eng.prefill_tokens - before)
    finally:
        python.close()
    assert got["naive"][0] == got["cached"][0] and len(got["cached"][0]) == 6
    assert got["cached"][1] < got["naive"][1] / 3
    branch = br[0]
    assert branch.meta["branch_of"] == "q0" and branch.segments[2].text.startswith(c.segments[2].text[:1])
    assert branch.completion_ids[: len(c.completion_ids)] == c.completion_ids  # the prefix is kept as it was


def _cand(name, correct, calls, length, entropy=1.0):
    """A candidate with ``calls`` tool calls, ``length`` model tokens and constant entropy."""
    from agentkit.agent.trajectory import Segment, Trajectory
    from agentkit.toollight.pairs import Candidate

    segs = [Segment("model", name, [0] * length, entropies=[entropy] * length)]
    segs += [Segment("tool", "", [0]) for _ in range(calls)]
    return Candidate(Trajectory(name, [], [], segs), correct)


def test_difficulty_thresholds():
    from agentkit.toollight.pairs import PairRules, difficulty

    r = PairRules()
    mk = [_cand(str(i), i < 7, 1, 5) for i in range(10)]  # 70 % correct
    assert difficulty(mk, r.vanilla_easy_at, r.vanilla_hard_at) == "easy"
    assert difficulty(mk[3:], r.vanilla_easy_at, r.vanilla_hard_at) is None  # 4/7 = 57 %: between the two
    half = [_cand("a", True, 1, 5), _cand("b", False, 1, 5)]
    assert difficulty(half, r.guided_easy_at, r.guided_hard_at) == "easy"  # 50 % counts as easy
    assert difficulty(half[1:], r.guided_easy_at, r.guided_hard_at) == "hard"


def test_pre_aligned_rules():
    from agentkit.toollight.pairs import PairRules, pre_aligned_guided, pre_aligned_vanilla

    r = PairRules()
    cands = [_cand("c2", True, 2, 30, 0.5), _cand("c1-hi", True, 1, 40, 0.9), _cand("c1-lo", True, 1, 50, 0.2),
             _cand("w3", False, 3, 20, 0.1), _cand("w1", False, 1, 60, 2.0), _cand("w4", False, 4, 10, 0.3)]
    p = pre_aligned_guided(cands, r)  # 3/6 correct: easy for guided data
    assert (p.chosen.task_id, p.rejected.task_id, p.difficulty) == ("c1-lo", "w4", "easy")
    assert pre_aligned_guided([_cand("w", False, 2, 5), _cand("w2", False, 0, 5)], r) is None  # nothing correct
    sft = _cand("sft", True, 1, 9).traj
    p = pre_aligned_guided([_cand("w", False, 2, 5), _cand("w2", False, 0, 5)], r, sft=sft)
    assert p.chosen is sft and p.rejected.task_id == "w" and p.difficulty == "hard"
    v = [_cand("short", True, 2, 10), _cand("long", True, 1, 30),
         *[_cand(f"w{i}", False, 1, 5 + 2 * i) for i in range(6)]]  # wrong: 5 … 15 tokens, 1 call each
    p = pre_aligned_vanilla(v, r)  # 2/8 correct: hard; chosen: the shortest correct
    assert (p.chosen.task_id, p.rejected.task_id, p.difficulty) == ("short", "w5", "hard")  # rejected: the longest
    short_wrong = [_cand("short", True, 2, 10), *[_cand(f"w{i}", False, 1, 4) for i in range(4)]]
    assert pre_aligned_vanilla(short_wrong, r) is None  # no wrong sample is longer or makes more calls


def test_self_evolved_rules_and_mixing():
    from agentkit.toollight.pairs import Pair, PairRules, mix, self_evolved

    r = PairRules()
    hard = [_cand("c-short", True, 1, 10), _cand("c-long", True, 3, 40),
            *[_cand(f"w{i}", False, i, 20 + i) for i in range(6)]]  # 2 correct < 0.5 * 6 wrong: hard
    p = self_evolved(hard, r)
    assert (p.chosen.task_id, p.rejected.task_id, p.rule) == ("c-long", "w0", "self_evolved_hard")
    easy = [_cand("c0", True, 0, 10, 0.5), _cand("c1", True, 1, 10), _cand("w2", False, 2, 10),
            _cand("w5", False, 5, 10)]
    p = self_evolved(easy, r)
    assert (p.chosen.task_id, p.rejected.task_id, p.difficulty) == ("c0", "w5", "easy")
    assert self_evolved([_cand("c", True, 1, 5)], r) is None  # needs both a correct and a wrong sample

    t = _cand("x", True, 1, 5).traj
    vanilla = [Pair(t, t, "v", "hard")] * 40 + [Pair(t, t, "v", "easy")] * 40
    guided = [Pair(t, t, "g", "hard")] * 14 + [Pair(t, t, "g", "easy")] * 30
    out = mix(vanilla, guided, r, seed=0)
    count = {(p.rule, p.difficulty): sum(1 for q in out if (q.rule, q.difficulty) == (p.rule, p.difficulty))
             for p in out}
    # guided-hard (14) limits the mix: 14 / (7/20 * 2/3) = 60 pairs: vanilla 26 hard + 13 easy, guided 14 + 7
    assert count == {("v", "hard"): 26, ("v", "easy"): 13, ("g", "hard"): 14, ("g", "easy"): 7}
    # no guided-easy pair at all: that bucket is left out, the other three keep their ratios
    out = mix(vanilla, guided[:14], r, seed=0)
    assert len(out) == 26 + 13 + 14 and {p.difficulty for p in out if p.rule == "g"} == {"hard"}


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
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=1, beta=0.1, report_to=[], use_cpu=True,
                     max_length=512)
    trainer = masked_dpo_trainer_cls()(model=policy, ref_model=ref, args=args, train_dataset=ds,
                                       processing_class=tok)
    batch = next(iter(trainer.get_train_dataloader()))
    with torch.no_grad():
        got = trainer.compute_loss(policy, batch).item()

        def logp(model, t, masked=True):
            ids = torch.tensor([t.prompt_ids + t.completion_ids])
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
            keep = [0] * len(t.prompt_ids) + (t.mask if masked else [1] * len(t.completion_ids))
            return sum(lp[i - 1, ids[0, i]].item() for i in range(1, ids.shape[1]) if keep[i])

        def loss(masked):
            margin = (logp(policy, chosen, masked) - logp(ref, chosen, masked)
                      - logp(policy, rejected, masked) + logp(ref, rejected, masked))
            return -math.log(1 / (1 + math.exp(-0.1 * margin)))

    assert got == pytest.approx(loss(True), rel=1e-4)
    assert abs(loss(True) - loss(False)) > 1e-3  # the check can tell the two apart


def test_train_sft_leaves_a_plain_model_that_copies_safely(trajs, tiny_engine, tmp_path):
    """After SFT the model has its class forward back (TRL patches the instance), so a deepcopy (DPO's reference)
    computes with its own weights."""
    import copy

    from agentkit.toollight.sft import SFTSettings, train_sft

    _, out = trajs
    model = copy.deepcopy(tiny_engine.model)
    _, trained = train_sft(model, copy.deepcopy(tiny_engine.tokenizer), to_sft_dataset(out[:2]),
                           SFTSettings(epochs=1, batch_size=2), tmp_path, progress=False)
    assert "forward" not in trained.__dict__ and trained.config.use_cache
    twin = copy.deepcopy(trained)
    with torch.no_grad():
        twin.lm_head.weight.mul_(2.0)
        ids = torch.tensor([[1, 2, 3]])
        assert not torch.allclose(twin(input_ids=ids).logits, trained(input_ids=ids).logits)


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

    chosen = traj([("model", "<python>print(17*23)</python>"), ("tool", "\n<result>\n391\n</result>\n"),
                   ("model", "<answer>391</answer>")])
    return chosen, traj([("model", "<answer>381</answer>")])


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
    ds = to_dpo_dataset([Pair(chosen, rejected, "test", "hard")] * 4)
    history, trained = train_dpo(model, copy.deepcopy(tiny_engine.tokenizer), ds,
                                 DPOSettings(epochs=3, learning_rate=5e-3, batch_size=2, lora_r=lora_r), tmp_path,
                                 progress=False)
    assert margin(trained) > before + 0.5
    assert any("loss" in h for h in history)
    assert "forward" not in trained.__dict__ and not any("lora" in n for n, _ in trained.named_parameters())


def test_mine_sources_keeps_questions_answered_wrongly_without_tools():
    from agentkit.data.tasks import Task
    from agentkit.testing.scripted import ScriptedEngine
    from agentkit.toollight.rounds import Group, SamplingSettings, mine_sources

    eng = ScriptedEngine({"2 + 2": ["<answer>4</answer>"], "17 x 23": ["<python>print(17 * 23)</python>"],
                          "capital": ["<answer>Lyon</answer>"]})
    tasks = [Task("a", "What is 2 + 2?", "4", "add"), Task("b", "What is 17 x 23?", "391", "mul"),
             Task("c", "The capital of France?", "Paris", "qa", "em_f1")]
    groups, rates = mine_sources(eng, [Group("g", tasks, [])], SamplingSettings(mine_samples=2))
    assert rates == {"a": 1.0, "b": 0.0, "c": 0.0}
    assert [t.id for t in groups[0].tasks] == ["b", "c"]
