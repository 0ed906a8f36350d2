"""Each `agentkit bench` target runs end to end on the tiny model, reports identical outputs on both sides, and shows
its effect in the direction it claims: in work counted (tokens, passes), which is the same on any machine, or in time
where the margin is an order of magnitude."""


def test_agent_bench_runs_every_workload_on_the_tiny_model():
    """`agentkit bench agent` end to end on the tiny random model: the three loops of each workload agree."""
    from agentkit.eval.bench.agent import run

    res = run(model="tiny-random", tasks=2, turns=1, tokens_per_turn=4)
    for wl in ("python", "search", "steps"):
        r = res[wl]
        rows = {k: r[k] for k in ("re-encode-all", "re-encode", "prefix-cache")}
        assert r["identical_trajectories"]
        assert r["speedup"] == round(rows["re-encode"]["seconds"] / rows["prefix-cache"]["seconds"], 2)
        assert r["speedup_vs_re_encode_all"] == round(
            rows["re-encode-all"]["seconds"] / rows["prefix-cache"]["seconds"], 2
        )
        # the same trajectories: the same turns, calls and tokens on every side
        assert len({(x["turns"], x["tool_calls"], x["completion_tokens"]) for x in rows.values()}) == 1
        assert rows["prefix-cache"]["turns"] >= 2 and rows["prefix-cache"]["completion_tokens"] > 0
        # what the speed-up comes from: each side runs fewer prompt tokens through the model than the one before,
        # and the cache's saving is the tokens it reports reused
        prefill = [rows[k]["prefill_tokens"] for k in ("re-encode-all", "re-encode", "prefix-cache")]
        assert prefill[0] > prefill[1] > prefill[2] > 0, prefill
        assert r["reused_tokens"] > 0


def test_sandbox_bench_runs():
    from agentkit.eval.bench.sandbox import run

    res = run(n=3, pool_size=1)
    assert res["isolation"] == "kernel"
    # every row measured; which is faster is the benchmark's to say (docs/benchmarks.md), not a test's: on a
    # loaded machine three samples each can order either way (a fresh clone's suite beside three busy processes did)
    for row in ("sandbox", "sandbox_burst", "python_c"):
        assert 0 < res[row]["p50_ms"] <= res[row]["p95_ms"], res
    assert res["speedup_p50"] == round(res["python_c"]["p50_ms"] / res["sandbox"]["p50_ms"], 1)


def test_structured_bench_runs_on_the_tiny_model(tiny_engine):
    """`agentkit bench structured`'s HFEngine part: every fixed-workload row decodes the same token count
    constrained and free, and the grammar's share of the time is measured."""
    from agentkit.eval.bench.structured import engine_rows

    rows = engine_rows(tiny_engine, batch_sizes=(1, 3), max_tokens=8, repeats=1)
    fixed = [r for r in rows if r["workload"] == "fixed"]
    assert [r["batch"] for r in fixed] == [1, 3]
    assert all(r["free_tokens"] == r["constrained_tokens"] == 8 * r["batch"] for r in fixed)
    assert all(0 < r["grammar_share_of_time"] < 1 and r["ratio"] > 0 for r in rows)


def test_tips_potentials_bench_on_the_tiny_model():
    """`agentkit bench tips-potentials`: the packed potentials equal one pass per (state, answer), for fewer
    tokens through the model."""
    from agentkit.eval.bench.tips_potentials import run

    res = run(model="tiny-random", trajectories=2)
    assert res["trajectories"] == 2 and res["states"] == 8 and res["pairs"] == 16  # 3 searches: 4 states each
    assert res["max_abs_potential_diff"] < 1e-3
    assert res["packed"]["tokens"] < 0.5 * res["per-pair"]["tokens"]


def test_rl_step_bench_on_the_tiny_model():
    """`agentkit bench rl-step` end to end: a step of each trainer, and both losses on the same rollouts."""
    from agentkit.eval.bench.rl_step import run

    res = run(model="tiny-random", questions=1, group=2, turns=2, max_tokens=4, warm_start=8)
    assert 0 < res["warm_start"]["examples"] <= 8 and res["prompt_tokens"] > 0
    for side in ("agentkit", "trl"):
        assert res[side]["rollout_seconds"] > 0 and res[side]["model_tokens"] > 0 and res[side]["step_seconds"] > 0
    same = res["same_rollouts_loss"]
    # Both losses sum the same n <= 16 per-token terms (1 question x 2 samples x 2 turns x 4 tokens), each |A| <= 1
    # at ratio 1, in their own orders: float32 orders differ by at most 2·n·u·Σ|terms| (u = 2^-24).
    bound = 2 * 16 * 2.0**-24 * 16
    assert same["abs_diff"] <= bound and same["max_token_advantage_diff"] <= bound


def test_revela_bench_on_the_tiny_model():
    """`agentkit bench revela` end to end: every timed variant runs, on a batch of real stdlib chunks."""
    from agentkit.eval.bench.revela import run

    res = run(batch=4, tokens=24, repeats=1, model="tiny-random")
    assert res["batch"] == 4 and 4 < res["lm_tokens"] <= 4 * 24 and 0 < res["sim_nonzero_pairs"] <= 12
    assert 0 < res["sim_attended_chunks"] <= 4
    for k in ("plain_lm_step_s", "plain_lm_step_hf_loss_s", "revela_lm_step_s", "revela_full_step_s"):
        assert res[k] > 0
    assert res["revela_lm_step_plain_loss_logged_s"] > 0 and len(res["round_seconds"]["logged"]) == 1
    assert res["revela_lm_step_kv_grad_s"] > 0
    # kv_grad keeps the recording pass's activations for backward: more saved than without it, and the plain
    # step (one pass over the batch) saves less than either Revela pass pair
    saved = res["saved_for_backward_mib"]
    assert saved["revela_lm_step_kv_grad"] > saved["revela_lm_step"] > saved["plain_lm_step"] > 0
    # one forward pass for the batch against one per (query, document) pair: 15.7x here on the tiny model, loaded
    assert res["ratio_naive_vs_revela_lm"] > 2, res["ratio_naive_vs_revela_lm"]


def test_gamerl_verify_bench_runs(tmp_path):
    import json

    from agentkit.eval.bench.gamerl_verify import main

    out = tmp_path / "gv.json"
    assert main(answers=600, judge_answers=0, out=str(out)) == 0
    result = json.loads(out.read_text())
    assert result["ours_answers_per_s"] > 0 and sum(result["paths"].values()) == 600
    assert result["rg_score_answers_per_s"] > 0 and result["ours_decide_answers_per_s"] > 0 and "provenance" in result
    # the same answers, decided alike: full credit here exactly where reasoning-gym gives full credit
    assert result["full_credit_agreement"] == 1.0 and sum(result["rg_paths"].values()) == 600
    assert result["answers_read"]["ours"] > result["answers_read"]["rg_extract_answer"]


def test_bench_compare_flags_a_ratio_that_fell(tmp_path, capsys):
    """`agentkit bench compare OLD NEW`: a ratio that moved the worse way by more than the margin is flagged and
    the exit status is 1; within the margin, 0. Directions come from each bench's ratios()."""
    import json
    import shutil
    from pathlib import Path

    from agentkit.cli import main

    recorded = Path("docs/results/bench/ace.json")
    for sub in ("old", "new"):
        (tmp_path / sub).mkdir()
        shutil.copy(recorded, tmp_path / sub / "ace.json")
    assert main(["bench", "compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    capsys.readouterr()
    res = json.loads(recorded.read_text())
    res["step_median_s"] *= 1.25  # slower: "lower is better" fell by 25 %
    res["lazy_speedup"] *= 1.05  # a higher speed-up never counts as a fall
    (tmp_path / "new" / "ace.json").write_text(json.dumps(res))
    assert main(["bench", "compare", str(tmp_path / "old"), str(tmp_path / "new"), "--margin", "0.2"]) == 1
    out = capsys.readouterr().out
    assert "1 of 3 ratios fell by more than 20%" in out and "FELL" in out.split("step seconds")[1].split("\n")[0]
    assert main(["bench", "compare", str(tmp_path / "old"), str(tmp_path / "new"), "--margin", "0.3"]) == 0
    assert main(["bench", "summary", str(tmp_path / "new")]) == 0
    assert "no result under" in capsys.readouterr().out


def test_make_bench_runs_every_bench_and_each_declares_its_ratios():
    import re
    from pathlib import Path

    from agentkit.eval.bench import BENCHES

    make = Path("Makefile").read_text()
    cpu = re.search(r"BENCHES_CPU := (.*?)\n(?!\t)", make, re.S).group(1).replace("\\", " ").split()
    assert sorted([*cpu, "serve", "weight-sync"]) == sorted(BENCHES.names())
    assert all(callable(getattr(BENCHES.get(n), "ratios", None)) for n in BENCHES.names())


def test_engine_bench_rows_carry_bf16_decode_and_the_roofline():
    from agentkit.eval.bench.engine import run

    res = run("tiny-random", batch_sizes=(1, 6), max_tokens=4, modes=("fixed",), vllm=False)
    assert res["memory_bandwidth_gbs"] > 0 and res["weight_bytes"]["bf16"] < res["weight_bytes"]["fp32"]
    for r in res["rows"]:
        assert r["hfengine_bf16_decode"] > 0 and 0 < r["bandwidth_fraction_hfengine"]
        assert r["ratio_bf16_decode_vs_fp32"] == round(r["hfengine_bf16_decode"] / r["hfengine_entropy"], 2)
    g = res["greedy_bf16_decode_vs_fp32"]
    assert g["prompts"] == 16 and 0 <= g["identical"] <= 16
    assert [p["rows"] for p in res["projection_ms"]] == [1, 2, 4, 64]
    assert all(p[k] > 0 for p in res["projection_ms"] for k in ("fp32_h_wt", "fp32_w_ht", "bf16_h_wt"))
