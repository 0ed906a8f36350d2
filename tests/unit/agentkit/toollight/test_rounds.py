"""agentkit.toollight.rounds: mining source questions."""


def test_mine_sources_keeps_questions_answered_wrongly_without_tools():
    from agentkit.data.tasks import Task
    from agentkit.testing.scripted import ScriptedEngine
    from agentkit.toollight.rounds import Group, SamplingSettings, mine_sources

    eng = ScriptedEngine(
        {
            "2 + 2": ["<answer>4</answer>"],
            "17 x 23": ["<python>print(17 * 23)</python>"],
            "capital": ["<answer>Lyon</answer>"],
        }
    )
    tasks = [
        Task("a", "What is 2 + 2?", "4", "add"),
        Task("b", "What is 17 x 23?", "391", "mul"),
        Task("c", "The capital of France?", "Paris", "qa", "em_f1"),
    ]
    groups, rates = mine_sources(eng, [Group("g", tasks, [])], SamplingSettings(mine_samples=2))
    assert rates == {"a": 1.0, "b": 0.0, "c": 0.0}
    assert [t.id for t in groups[0].tasks] == ["b", "c"]
