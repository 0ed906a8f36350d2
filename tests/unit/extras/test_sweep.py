"""The sweep's frozen stages: built once per name, kept in the run folder, loaded by a resumed run."""

import torch

from agentkit.extras.sweep import stage
from agentkit.recipe import RunContext


def test_a_stage_is_built_once_and_loaded_from_the_run_folder(tmp_path):
    calls = []

    def build():
        calls.append(1)
        return {"state": {"w": torch.arange(3.0)}, "losses": [1.0, 0.5]}

    ctx = RunContext(tmp_path / "run")
    first = stage(ctx, "seed0-encoder", build)
    assert (tmp_path / "run" / "state" / "stages" / "seed0-encoder.pt").exists()
    resumed = RunContext(tmp_path / "run", resume=True)  # a later attempt of the same run
    again = stage(resumed, "seed0-encoder", build)
    assert len(calls) == 1 and torch.equal(again["state"]["w"], first["state"]["w"]) and again["losses"] == [1.0, 0.5]
    stage(resumed, "seed1-encoder", build)  # another name is its own stage
    assert len(calls) == 2
