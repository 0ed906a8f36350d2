"""The public API documents its parameters: Google-style ``Args`` naming every parameter (a class: those of its
``__init__``, or of its fields for a dataclass), ``Returns`` where something is returned, read by griffe as the
API reference (mkdocstrings) reads them."""

import griffe
import pytest

# The public API (docs/api.md): the engine protocol and engines, tools, the agent loop, the recipe base and
# RunContext, agentkit.rl's trainer and advantages, uncertainty scoring, each core method's entry points.
PUBLIC = [
    *(f"engines.base.Engine.{m}" for m in ("encode", "tokenize", "decode", "token_strings", "generate", "score")),
    "engines.base.Engine.load_weights",
    "engines.make_engine",
    "engines.hf.HFEngine",
    "engines.vllm.VLLMEngine",
    "engines.openai.OpenAIEngine",
    "tools.base.openai_schema",
    "tools.python.PythonTool",
    "tools.sandbox.Sandbox",
    "tools.sandbox.Sandbox.run",
    "tools.search.SearchTool",
    "tools.search.SearchIndex.search",
    "agent.loop.rollout",
    "agent.loop.continue_rollout",
    "agent.loop.agent_prompt",
    "recipe.RunContext",
    *(f"recipe.RunContext.{m}" for m in ("log", "done", "record", "each", "save_checkpoint", "progress")),
    *(f"recipe.RunContext.{m}" for m in ("add_section", "save_plot", "latest_checkpoint")),
    "recipe.Recipe",
    "runner.run_recipe",
    "rl.advantages.estimate",
    "rl.advantages.grpo",
    "rl.advantages.dr_grpo",
    "rl.advantages.rloo",
    "rl.advantages.gae",
    "tips.advantages.tips_segment",
    "uncertainty.score.score",
    "uncertainty.score.compute_scores",
    "server.app.create_app",
    # the core methods' entry points
    "toollight.pairs.pre_aligned_guided",
    "toollight.pairs.pre_aligned_vanilla",
    "toollight.pairs.self_evolved",
    "toollight.pairs.mix",
    "toollight.entropy.step_score",
    "toollight.sft.to_sft_dataset",
    "toollight.sft.train_sft",
    "toollight.dpo.to_dpo_dataset",
    "toollight.dpo.train_dpo",
    "rl.trainer.agent_dataset",
    "rl.trainer.AgentGRPOTrainer",
    "tips.potentials.PotentialScorer",
    "tips.potentials.PotentialScorer.potentials",
    "tips.shaping.shaped_turns",
    "tips.shaping.InfoPotentialShaper",
    "ace.adapt.Adapter",
    "ace.adapt.Adapter.step",
    "ace.adapt.Adapter.answer",
    "ace.store.PlaybookStore",
    "ace.store.PlaybookStore.commit",
    "ace.store.PlaybookStore.rollback",
    "ace.store.PlaybookStore.at",
    "models.retriever.Retriever",
    "models.retriever.Retriever.encode",
    "revela.model.RevelaModel",
    "gamerl.verifiers.verify",
    "gamerl.verifiers.score_answer",
    "gamerl.dataset.create_dataset",
    "gamerl.code2logic.validate",
    "gamerl.code2logic.draft_templates",
    "gamerl.code2logic.code2logic",
]


def _sections(obj) -> dict:
    return {s.kind.value: s for s in obj.docstring.parse("google")} if obj.docstring else {}


@pytest.fixture(scope="module")
def package():
    return griffe.load("agentkit", docstring_parser="google", allow_inspection=False)


def _parameters(obj) -> tuple[list[str], list[str]]:
    """(the parameters Args must name, the ``*args`` / ``**kwargs`` it may name)."""
    target = obj.members.get("__init__") if obj.is_class else obj
    if target is None:
        return [], []
    named = [p for p in target.parameters if p.name not in ("self", "cls")]
    variadic = ("variadic positional", "variadic keyword")
    return [p.name for p in named if p.kind.value not in variadic], [p.name for p in named if p.kind.value in variadic]


@pytest.mark.parametrize("path", PUBLIC)
def test_public_api_documents_its_parameters(package, path):
    obj = package[path]
    sections = _sections(obj)
    assert sections, f"{path} has no docstring"
    wanted, may = _parameters(obj)
    documented = [p.name.lstrip("*") for p in sections["parameters"].value] if "parameters" in sections else []
    assert not set(wanted) - set(documented), f"{path}: Args misses {sorted(set(wanted) - set(documented))}"
    assert not set(documented) - set(wanted) - set(may), f"{path}: Args names {set(documented) - set(wanted)}"
    if obj.is_function and str(obj.returns) not in ("None", "") and obj.name != "__init__":
        assert "returns" in sections or "yields" in sections, f"{path} has no Returns"
