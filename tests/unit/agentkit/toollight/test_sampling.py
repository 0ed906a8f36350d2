"""agentkit.toollight.sampling: entropy-guided branches continue open turns and reuse the prefix cache."""

from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig


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
    cfg = AgentConfig(
        max_turns=3, max_tool_calls=3, sampling=SamplingParams(max_tokens=12, temperature=1.0, seed=1, entropy=True)
    )

    def chain(i):
        prompt = [{"role": "user", "content": f"question number {i} with some padding words"}]
        t = Trajectory(f"q{i}", prompt, cached.encode(prompt), meta={"sample": 0, "turns": 2})
        for kind, text in (
            ("model", "<python>print(1)</python>"),
            ("tool", "\n<result>\n1\n</result>\n"),
            ("model", "so the answer follows here"),
        ):
            ids = tok(text, add_special_tokens=False).input_ids
            t.segments.append(
                Segment(kind, text, ids, entropies=[float(j % 7) for j in range(len(ids))] if kind == "model" else None)
            )
        return t

    main = [chain(i) for i in range(3)]
    ((seg, keep, score),) = branch_points(main[0], top_b=3)
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
