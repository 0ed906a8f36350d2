"""uncertainty generate with a local engine and a remote one (a real server on loopback) in one run."""

from agentkit.uncertainty.schema import iter_generations


def test_generate_mixes_local_and_remote_engines(tmp_path, tiny_engine, monkeypatch):
    """The same model served over the OpenAI API on loopback and run in-process gives the same samples."""
    from agentkit.engines.base import SamplingParams
    from agentkit.server import create_app
    from agentkit.testing.servers import serve_in_thread
    from agentkit.uncertainty.generate import generate, load_tasks

    monkeypatch.setenv("OPENAI_API_KEY", "sk-gen")
    tasks = load_tasks("arithmetic-easy:2")
    with serve_in_thread(create_app(tiny_engine, "tiny", api_key="sk-gen")) as url:
        generate(
            ["tiny-random", f"openai:tiny@{url}/v1"],
            tasks,
            tmp_path / "g.jsonl",
            SamplingParams(n=3, temperature=0.7, max_tokens=5, seed=0),
            progress=False,
        )
    rows = [r for _, r in iter_generations(tmp_path / "g.jsonl")]
    assert all(set(r.samples) == {"tiny-random", "tiny"} for r in rows)
    assert [r.samples["tiny"] for r in rows] == [r.samples["tiny-random"] for r in rows]
    assert [r.greedy["tiny"] for r in rows] == [r.greedy["tiny-random"] for r in rows]
