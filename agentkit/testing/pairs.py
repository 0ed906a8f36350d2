"""A small TRL-style preference file (text pairs with a tool result inside the chosen reply), for tests."""

from __future__ import annotations

from pathlib import Path

from agentkit.agent.loop import TIR_SYSTEM_PROMPT
from agentkit.data.tasks import write_jsonl


def write_text_pairs(path: str | Path, n: int = 4) -> Path:
    prompt = [{"role": "system", "content": TIR_SYSTEM_PROMPT}, {"role": "user", "content": "What is 17 * 23?"}]
    good = "<python>print(17*23)</python>\n<result>\n391\n</result>\n<answer>391</answer>"
    write_jsonl(
        path,
        [
            {
                "prompt": prompt,
                "chosen": [{"role": "assistant", "content": good}],
                "rejected": [{"role": "assistant", "content": "<answer>381</answer>"}],
            }
        ]
        * n,
    )
    return Path(path)
