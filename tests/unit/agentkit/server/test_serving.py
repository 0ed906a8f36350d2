"""agentkit.server.serving: the Batcher merges concurrent requests and isolates a failing one."""

import pytest

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


def test_a_short_request_finishes_while_a_long_one_runs_and_cancel_ends_it(tiny_engine):
    """Steps interleave: a short request that comes after a long one is answered first; cancelling the long one
    ends its job at the next step and leaves the batcher idle."""
    import time

    from agentkit.server.serving import Batcher, Cancelled

    batcher = Batcher(tiny_engine, window_s=0.0, hold_s=0.2)
    long = batcher.submit(["long"], SamplingParams(max_tokens=1500, ignore_eos=True, temperature=0))
    while batcher.steps < 3:
        time.sleep(0.001)
    short = batcher.submit(["short"], SamplingParams(max_tokens=4, temperature=0))
    assert len(short.result(timeout=60)[0][0].token_ids) == 4
    assert not long.done()  # the long one was still decoding when the short one was answered
    batcher.cancel(long)
    with pytest.raises(Cancelled):
        long.result(timeout=60)
    deadline = time.monotonic() + 5
    while not batcher.idle:
        assert time.monotonic() < deadline
        time.sleep(0.01)
