"""The question prompt every uncertainty model answers (``uncertainty generate`` and the ensemble recipe): a short
system instruction, optional few-shot pairs for the task's metric, then the question."""

from __future__ import annotations

from agentkit.data.tasks import Task

SYSTEM = "Answer the question. Reply with the answer only, no explanation."
# Worked examples shown before each question (by the task's metric): small models answer in a word only when
# shown the format. The facts are invented, like suite (b)'s.
FEW_SHOT = {
    "numeric": [("What is 23 + 45?", "68"), ("What is 7 × 6?", "42"), ("What is 81 - 27?", "54")],
    "em_f1": [
        (
            "Velra Optics: Velra Optics is a company founded in 1961 by Onna Traskel.\nOnna Traskel: Onna "
            "Traskel is a chemist born in 1930 in the city of Brevik.\n\nQuestion: In which city was the "
            "founder of Velra Optics born?",
            "Brevik",
        ),
        ("In which year was Tomas Eldrin born?", "1954"),
    ],
}


def question_prompt(task: Task, system: str = SYSTEM, few_shot: bool = False) -> list[dict[str, str]]:
    """The chat messages for ``task``: ``system``, then (``few_shot``) the pairs of its metric, then the question.

    >>> question_prompt(Task(id="t", question="What is 2 + 2?", answer="4", kind="add"))[-1]
    {'role': 'user', 'content': 'What is 2 + 2?'}
    """
    msgs = [{"role": "system", "content": system}]
    for q, a in FEW_SHOT.get(task.metric, []) if few_shot else []:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return msgs + [{"role": "user", "content": task.question}]
