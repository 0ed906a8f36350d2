"""agentkit.server.serving: the Batcher merges concurrent requests and isolates a failing one."""

from agentkit.engines import SamplingParams


def test_batcher_merges_requests_with_per_prompt_fields(tiny_engine):
    """Requests that differ only in seeds share one engine call, and each gets what it would get alone."""
    from concurrent.futures import wait

    from agentkit.server.serving import Batcher

    batcher = Batcher(tiny_engine, window_s=0.5)
    base = dict(max_tokens=8, temperature=1.0)
    requests = [
        (["abc"], SamplingParams(seed=3, **base)),
        (["abc", "de", "f"], SamplingParams(seeds=[1, 2, 3], **base)),
        (["abc"], SamplingParams(seed=5, n=1, **base)),
        (["xyz"], SamplingParams(**base)),
    ]
    futures = [batcher.submit(ps, p) for ps, p in requests]
    wait(futures, timeout=60)
    assert batcher.calls == 1
    for (ps, p), fut in zip(requests[:3], futures):
        alone = tiny_engine.generate(ps, p)
        assert [[c.token_ids for c in cs] for cs in fut.result()] == [[c.token_ids for c in cs] for cs in alone]
    assert len(futures[3].result()[0]) == 1  # the unseeded request was sampled too


def test_batcher_isolates_a_failing_request(tiny_engine):
    """A merged call that fails is retried request by request, so one bad request fails alone."""
    from concurrent.futures import wait

    from agentkit.server.serving import Batcher

    batcher = Batcher(tiny_engine, window_s=0.5)
    p = SamplingParams(max_tokens=4)
    good, bad = batcher.submit(["abc"], p), batcher.submit([[]], p)  # an empty prompt is rejected by the engine
    wait([good, bad], timeout=60)
    assert len(good.result()[0]) == 1 and isinstance(bad.exception(), ValueError)
